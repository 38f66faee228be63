"""Job lifecycle in the server: queued -> running -> done | cancelled | failed.

Every job runs :func:`runner.child_main` in its own child process (multiprocessing
"spawn"), so a crash or a stuck kernel never takes the server down. The child writes the
cache folder and sends events through a one-way pipe; the server polls the pipe's file
descriptor together with its ZeroMQ socket. Cancel sets a shared flag (checked between
frames and in progress callbacks) and, if the child is still alive ``CANCEL_GRACE`` seconds
later, terminates it (then kills it) — so cancel takes effect within a second even when one
frame takes minutes. At most ``workers`` jobs run at once; the others wait in FIFO order.
"""
from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from protocol.scene import Scene
from .runner import child_main

CANCEL_GRACE = 0.5
"""Seconds between the cooperative cancel flag and terminate()."""


@dataclass
class Job:
    """Server-side record of one bake."""

    id: str
    scene: Scene
    cache_dir: str
    resume: bool
    owner: bytes            # ZeroMQ identity of the submitting client
    submit_id: str          # id of the Submit message (parent of job errors)
    state: str = "queued"   # queued | running | cancelling | done | cancelled | failed
    frame: int = 0
    frames_done: int = 0
    message: str = ""
    proc: Optional[mp.Process] = None
    conn: Optional[object] = None
    cancel_event: Optional[object] = None
    cancel_deadline: Optional[float] = None
    ended: bool = False
    end_event: Optional[tuple] = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running", "cancelling")


JobEvent = Callable[[Job, tuple], None]
"""on_event(job, event): runner events ("progress"/"frame"/"end", ...) forwarded to the server."""


class JobManager:
    """Starts, watches and cancels job processes. Not thread-safe: call from the server loop."""

    def __init__(self, on_event: JobEvent, workers: int = 1):
        self.on_event = on_event
        self.workers = max(1, int(workers))
        self.jobs: dict = {}
        self.queue: deque = deque()
        self._ctx = mp.get_context("spawn")

    # -- queries ----------------------------------------------------------------------------
    def running(self) -> list:
        return [j for j in self.jobs.values() if j.state in ("running", "cancelling")]

    def busy_dir(self, cache_dir: str) -> Optional[Job]:
        for j in self.jobs.values():
            if j.active and j.cache_dir == cache_dir:
                return j
        return None

    def pipes(self) -> list:
        return [j.conn for j in self.running() if j.conn is not None]

    # -- lifecycle --------------------------------------------------------------------------
    def submit(self, scene: Scene, cache_dir: str, resume: bool, owner: bytes, submit_id: str) -> Job:
        job = Job(uuid.uuid4().hex, scene, cache_dir, resume, owner, submit_id, frame=scene.settings.frame_start)
        self.jobs[job.id] = job
        self.queue.append(job)
        return job

    def _start(self, job: Job) -> None:
        r, w = self._ctx.Pipe(duplex=False)
        job.cancel_event = self._ctx.Event()
        job.proc = self._ctx.Process(target=child_main, name=f"clearance-job-{job.id[:8]}",
                                     args=(job.scene, job.cache_dir, job.resume, w, job.cancel_event), daemon=True)
        job.proc.start()
        w.close()  # the child holds the only write end: EOF on r means the child is gone
        job.conn = r
        job.state = "running"

    def cancel(self, job: Job) -> None:
        if job.state == "queued":
            self.queue.remove(job)
            self._finish(job, ("end", "cancelled", 0, "", "cancelled before it started", None, None))
        elif job.state == "running":
            job.state = "cancelling"
            job.cancel_event.set()
            job.cancel_deadline = time.monotonic() + CANCEL_GRACE

    def read(self, job: Job) -> None:
        """Drain the job's pipe (call when its fd is readable)."""
        try:
            while job.conn is not None and job.conn.poll():
                ev = job.conn.recv()
                self._dispatch(job, ev)
        except Exception:  # EOF, or a message cut short by terminate()
            self._reap(job)

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

    def _reap(self, job: Job) -> None:
        """The child closed its pipe: collect it and report how the job ended."""
        if job.conn is not None:
            job.conn.close()
            job.conn = None
        if job.proc is not None:
            job.proc.join(timeout=2.0)
            if job.proc.is_alive():
                job.proc.kill()
                job.proc.join(timeout=2.0)
        if job.end_event is not None:
            ev = job.end_event
            ev = (ev[0], ev[1], job.frames_done) + tuple(ev[3:])
        elif job.state == "cancelling":
            ev = ("end", "cancelled", job.frames_done, "", "cancelled (worker stopped)", None, None)
        else:
            code = job.proc.exitcode if job.proc is not None else None
            ev = ("end", "failed", job.frames_done, "crash",
                  f"the solver process exited unexpectedly (exit code {code}); frames finished so far are in "
                  f"{job.cache_dir}", None, None)
        self._finish(job, ev)

    def _finish(self, job: Job, ev: tuple) -> None:
        job.state = ev[1]
        job.message = ev[4]
        job.ended = True
        job.scene = None  # free the meshes
        self.on_event(job, ev)

    def tick(self) -> None:
        """Enforce cancel deadlines, notice dead children, start queued jobs."""
        now = time.monotonic()
        for job in self.running():
            if job.state == "cancelling" and job.cancel_deadline is not None and now >= job.cancel_deadline:
                if job.proc.is_alive():
                    job.proc.terminate()
                job.cancel_deadline = None
            if job.proc is not None and not job.proc.is_alive() and job.conn is not None:
                self.read(job)  # drain what is left; EOF reaps it
                if job.conn is not None and not job.conn.poll():
                    self._reap(job)
        while self.queue and len(self.running()) < self.workers:
            self._start(self.queue.popleft())

    def shutdown(self) -> None:
        """Stop every job (terminate children) without reporting."""
        for job in self.running():
            if job.cancel_event is not None:
                job.cancel_event.set()
        for job in self.running():
            if job.proc is not None:
                job.proc.join(timeout=CANCEL_GRACE)
                if job.proc.is_alive():
                    job.proc.terminate()
                    job.proc.join(timeout=1.0)
                if job.proc.is_alive():
                    job.proc.kill()
                    job.proc.join(timeout=1.0)
            if job.conn is not None:
                job.conn.close()
                job.conn = None
            job.state = "cancelled"
