"""Job lifecycle in the server: queued -> running -> done | cancelled | failed.

Every job runs :func:`runner.child_main` in its own child process (multiprocessing
"spawn"), so a crash or a stuck kernel never takes the server down. The child writes the
cache folder and sends events through a one-way pipe; the server polls the pipe's file
descriptor together with its ZeroMQ socket. Cancel sets a shared flag (checked between
frames and in progress callbacks) and, if the child is still alive ``CANCEL_GRACE`` seconds
later, terminates it (then kills it) — so cancel takes effect within a second even when one
frame takes minutes. At most ``workers`` jobs run at once; the others wait in FIFO order.

Nothing here blocks the server loop: a job is reported as ended as soon as its pipe closes
(the child sent its ``end`` event, or it died), and the exiting child process is reaped later
by :meth:`JobManager.tick` with non-blocking ``is_alive`` polls (terminate, then kill, if it
lingers) — never with a blocking ``join``, which used to stall every client for up to 2 s at
each job end.
"""
from __future__ import annotations

import multiprocessing as mp
import sys
import time
import traceback
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from protocol.scene import Scene
from .runner import child_main

CANCEL_GRACE = 0.5
"""Seconds between the cooperative cancel flag and terminate()."""
KILL_GRACE = 0.3
"""Seconds between terminate() (SIGTERM) and kill() (SIGKILL) of a child that is still alive."""
EXIT_GRACE = 5.0
"""Seconds a child may take to exit after closing its pipe before it is terminated."""


@dataclass
class Job:
    """Server-side record of one bake."""

    id: str
    scene: Scene
    cache_dir: str          # the resolved folder (os.path.realpath): one job per real folder
    resume: bool
    owner: bytes            # ZeroMQ identity of the submitting client
    submit_id: str          # id of the Submit message (parent of job errors)
    nbytes: int = 0         # bytes of the scene's arrays the server holds for the job until it ends
    submitted: float = field(default_factory=time.monotonic)   # when it was accepted (the job's log line)
    summary: str = ""       # what it bakes, for the server's log line at its end (the scene is dropped then)
    state: str = "queued"   # queued | running | cancelling | done | cancelled | failed
    frame: int = 0
    frames_done: int = 0
    message: str = ""
    proc: Optional[mp.Process] = None
    conn: Optional[object] = None
    cancel_event: Optional[object] = None
    cancel_deadline: Optional[float] = None
    kill_deadline: Optional[float] = None    # terminate() was sent; kill() at this time
    exit_deadline: Optional[float] = None    # pipe closed without an end event: wait this long for the exit code
    ended: bool = False
    end_event: Optional[tuple] = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running", "cancelling")


JobEvent = Callable[[Job, tuple], None]
"""on_event(job, event): runner events ("progress"/"frame"/"end", ...) forwarded to the server."""


def scene_nbytes(scene: Scene) -> int:
    """Bytes of a scene's arrays (vertices, triangles, animation ...): what a job holds in the
    server's memory while it waits or runs."""
    from protocol.scenewire import BODY_ARRAYS, FIELD_ARRAYS
    fields = getattr(scene, "force_fields", ())
    return (sum(int(getattr(getattr(b, name, None), "nbytes", 0) or 0) for b in scene.bodies for name in BODY_ARRAYS)
            + sum(int(getattr(getattr(f, name, None), "nbytes", 0) or 0) for f in fields for name in FIELD_ARRAYS))


class _Exiting:
    """A child whose job has ended but whose process has not exited yet."""

    __slots__ = ("proc", "deadline", "terminated")

    def __init__(self, proc: mp.Process, deadline: float):
        self.proc = proc
        self.deadline = deadline
        self.terminated = False


class JobManager:
    """Starts, watches and cancels job processes. Not thread-safe: call from the server loop.

    ``target`` is the function a job's child process runs, ``target(scene, cache_dir,
    resume, conn, cancel_event)``: :func:`runner.child_main` (tests pass another real one).
    """

    def __init__(self, on_event: JobEvent, workers: int = 1, target: Callable = child_main):
        self.on_event = on_event
        self.workers = max(1, int(workers))
        self.target = target
        self.jobs: dict = {}
        self.queue: deque = deque()
        self.exiting: list = []   # _Exiting: ended jobs' children still shutting down
        self._ctx = mp.get_context("spawn")

    # -- queries ----------------------------------------------------------------------------
    def running(self) -> list:
        return [j for j in self.jobs.values() if j.state in ("running", "cancelling")]

    def busy_dir(self, cache_dir: str) -> Optional[Job]:
        """The active (queued or running) job baking into ``cache_dir`` (a resolved path), if any."""
        for j in self.jobs.values():
            if j.active and j.cache_dir == cache_dir:
                return j
        return None

    def awaiting_exit(self) -> bool:
        """True while a job is being cancelled or waits for its process to exit before it is
        reported (terminated, or crashed): the server then ticks every 10 ms instead of every
        100 ms, so deadlines and the report are not late by a poll period."""
        return any(j.conn is None or j.state == "cancelling" for j in self.running())

    def pipes(self) -> list:
        return [j.conn for j in self.running() if j.conn is not None]

    # -- lifecycle --------------------------------------------------------------------------
    def held(self) -> tuple:
        """(jobs, bytes of their scenes) the server holds now: every queued or running job keeps
        its scene in memory until it ends (the queue budget counts these)."""
        active = [j for j in self.jobs.values() if j.active]
        return len(active), sum(j.nbytes for j in active)

    def owners(self) -> set:
        """ZeroMQ identities of the clients whose jobs are queued or running (their sessions are
        kept: a client that only receives frames must still be able to cancel)."""
        return {j.owner for j in self.jobs.values() if j.active}

    def submit(self, scene: Scene, cache_dir: str, resume: bool, owner: bytes, submit_id: str) -> Job:
        s = scene.settings
        job = Job(uuid.uuid4().hex, scene, cache_dir, resume, owner, submit_id, frame=s.frame_start,
                  nbytes=scene_nbytes(scene),
                  summary=f"{scene.name!r}, {len(scene.bodies)} objects, frames {s.frame_start}-{s.frame_end}, "
                          f"backend {s.backend}{', resume' if resume else ''}, {scene_nbytes(scene) / 2 ** 20:.1f} MiB, "
                          f"into {cache_dir}")
        self.jobs[job.id] = job
        self.queue.append(job)
        return job

    def _start(self, job: Job) -> None:
        r, w = self._ctx.Pipe(duplex=False)
        job.cancel_event = self._ctx.Event()
        job.proc = self._ctx.Process(target=self.target, name=f"clearance-job-{job.id[:8]}",
                                     args=(job.scene, job.cache_dir, job.resume, w, job.cancel_event), daemon=True)
        job.proc.start()
        w.close()  # the child holds the only write end: EOF on r means the child is gone
        job.conn = r
        job.state = "running"
        # the server's log line when a job starts (and one when it ends, server.py): id, what, how long it queued
        print(f"clearance-server: job {job.id[:8]} started after {time.monotonic() - job.submitted:.1f} s queued: "
              f"{job.summary}"[:800].replace("\n", " "), file=sys.stderr, flush=True)

    def cancel(self, job: Job) -> None:
        if job.state == "queued":
            self.queue.remove(job)
            self._finish(job, ("end", "cancelled", 0, "", "cancelled before it started", None, None))
        elif job.state == "running":
            job.state = "cancelling"
            job.cancel_event.set()
            job.cancel_deadline = time.monotonic() + CANCEL_GRACE

    def read(self, job: Job) -> None:
        """Drain the job's pipe (call when its fd is readable); never blocks."""
        while job.conn is not None:
            try:
                if not job.conn.poll():
                    return
                ev = job.conn.recv()
            except Exception:  # EOF, or a message cut short by terminate()
                self._pipe_closed(job)
                return
            try:
                self._dispatch(job, ev)
            except Exception:  # a bug in forwarding one event must not stop the server
                traceback.print_exc(file=sys.stderr)

    def _dispatch(self, job: Job, ev: tuple) -> None:
        kind = ev[0]
        if kind == "frame":
            job.frame = ev[1]
            job.frames_done += 1
            self.on_event(job, ev)
        elif kind == "progress":
            job.frame = ev[2]
            self.on_event(job, ev)
        elif kind == "end":
            job.end_event = ev

    def _pipe_closed(self, job: Job) -> None:
        """The child closed its pipe: it finished, or it died. A child that sent its ``end``
        event had released the cache folder before sending it, so the job is reported ended at
        once. Without an end event (terminated by cancel, or crashed) the report waits, without
        blocking, for the exit code: only an exited process has surely released its folder
        lock (the kernel may close the pipe before the folder), so a client that resubmits
        into the folder right after the report finds it free."""
        if job.conn is not None:
            job.conn.close()
            job.conn = None
        if job.end_event is not None:
            ev = job.end_event
            self._finish(job, (ev[0], ev[1], job.frames_done) + tuple(ev[3:]))
            self._park(job)
        elif job.proc is not None and job.proc.exitcode is None:
            grace = KILL_GRACE if job.state == "cancelling" else EXIT_GRACE
            job.exit_deadline = time.monotonic() + grace   # tick() reports it once the process has exited
        else:
            self._finish_without_end(job)

    def _finish_without_end(self, job: Job) -> None:
        """Report a job whose process exited without an end event: cancelled when it was being
        cancelled (terminated), a crash otherwise."""
        if job.state == "cancelling":
            self._finish(job, ("end", "cancelled", job.frames_done, "", "cancelled (worker stopped)", None, None))
            return
        code = job.proc.exitcode if job.proc is not None else None
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        self._finish(job, ("end", "failed", job.frames_done, "crash",
                           f"the solver process {how} unexpectedly; frames finished so far are in {job.cache_dir}",
                           None, None))

    def _park(self, job: Job) -> None:
        """Hand a finished job's still-running child to tick() for non-blocking reaping."""
        if job.proc is not None and job.proc.exitcode is None:
            self.exiting.append(_Exiting(job.proc, time.monotonic() + EXIT_GRACE))

    def _finish(self, job: Job, ev: tuple) -> None:
        job.state = ev[1]
        job.message = ev[4]
        job.ended = True
        job.scene = None  # free the meshes
        job.cancel_deadline = job.kill_deadline = job.exit_deadline = None
        self.on_event(job, ev)

    def tick(self) -> None:
        """Enforce cancel deadlines, notice dead children, reap exited ones, start queued jobs.
        Every check is non-blocking (``is_alive`` polls the child with waitpid WNOHANG)."""
        now = time.monotonic()
        for job in self.running():
            proc = job.proc
            if job.state == "cancelling" and job.cancel_deadline is not None and now >= job.cancel_deadline:
                job.cancel_deadline = None
                if proc.is_alive():
                    proc.terminate()
                    job.kill_deadline = now + KILL_GRACE
            if job.kill_deadline is not None and now >= job.kill_deadline:
                job.kill_deadline = None
                if proc.is_alive():
                    proc.kill()
            if job.conn is None:   # pipe closed without an end event: waiting for the exit code
                if not proc.is_alive():
                    self._finish_without_end(job)
                elif job.exit_deadline is not None and now >= job.exit_deadline:
                    job.exit_deadline = None
                    proc.kill()   # it closed its pipe yet will not exit: the next ticks report it
            elif not proc.is_alive():
                self.read(job)  # drain what is left; EOF finishes it
                if job.conn is not None and not job.conn.poll():
                    self._pipe_closed(job)
        still = []
        for ex in self.exiting:
            if not ex.proc.is_alive():
                ex.proc.join(timeout=0)
                continue
            if now >= ex.deadline:
                if ex.terminated:
                    ex.proc.kill()
                else:
                    ex.proc.terminate()
                    ex.terminated = True
                ex.deadline = now + KILL_GRACE
            still.append(ex)
        self.exiting = still
        while self.queue and len(self.running()) < self.workers:
            self._start(self.queue.popleft())

    def shutdown(self) -> None:
        """Stop every job (terminate children) without reporting. Blocks (at most a few
        seconds): the server is stopping."""
        for job in self.running():
            if job.cancel_event is not None:
                job.cancel_event.set()
        procs = [j.proc for j in self.running() if j.proc is not None] + [ex.proc for ex in self.exiting]
        for proc in procs:
            proc.join(timeout=CANCEL_GRACE)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=1.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)
        for job in self.running():
            if job.conn is not None:
                job.conn.close()
                job.conn = None
            job.state = "cancelled"
        self.exiting = []
