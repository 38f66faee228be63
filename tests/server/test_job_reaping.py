"""Issue 8 item 6: the server loop never waits for a finished job's process.

A real child process (multiprocessing spawn, a real pipe) reports the end of its job, closes
its pipe and then keeps running until the test lets it go, like a solver process whose Python
takes long to shut down. The JobManager must report the job ended at once and reap the process
later without blocking; the old code waited in ``join(timeout=2.0)`` and then killed it.
"""
import os
import select

from protocol.scene import Scene, Settings
from solver_server.runtime.jobs import JobManager


def lingering_child(scene, cache_dir, resume, conn, cancel_event):
    """A job process: one frame, the end event, pipe closed, then it stays alive until
    ``cancel_event`` is set (the test's release signal), and exits with code 0."""
    conn.send(("frame", 1, [], [], {}))
    conn.send(("end", "done", 1, "", "baked 1 frames", None, None))
    conn.close()
    cancel_event.wait(120)


def crashing_child(scene, cache_dir, resume, conn, cancel_event):
    """A job process that dies without an end event (as a segfault or kill -9 would)."""
    conn.send(("frame", 1, [], [], {}))
    os._exit(3)


def _scene():
    return Scene(Settings(frame_start=1, frame_end=2, backend="none"), ())


def _drain_until_ended(mgr, job):
    """Feed the manager as the server loop does: wait for the pipe, read, tick."""
    while not job.ended:
        if job.conn is not None:
            select.select([job.conn.fileno()], [], [], 30)
            mgr.read(job)
        mgr.tick()


def test_a_finished_job_is_reported_at_once_and_its_process_reaped_without_waiting(tmp_path):
    events = []
    mgr = JobManager(lambda job, ev: events.append(ev), target=lingering_child)
    job = mgr.submit(_scene(), str(tmp_path), False, b"client", "submit-id")
    mgr.tick()
    assert job.state == "running"
    _drain_until_ended(mgr, job)
    # reported while the child process is still alive: nothing waited for it
    assert job.state == "done" and events[-1][:3] == ("end", "done", 1)
    assert job.proc.is_alive()
    assert [ex.proc for ex in mgr.exiting] == [job.proc]
    mgr.tick()                                   # ticks keep returning while the child lingers
    assert job.proc.is_alive()
    job.cancel_event.set()                       # let it exit on its own
    while mgr.exiting:
        select.select([], [], [], 0.05)
        mgr.tick()
    assert job.proc.exitcode == 0                # exited by itself: reaped, not killed
    mgr.shutdown()


def test_a_crashed_job_is_reported_with_its_exit_code(tmp_path):
    events = []
    mgr = JobManager(lambda job, ev: events.append(ev), target=crashing_child)
    job = mgr.submit(_scene(), str(tmp_path), False, b"client", "submit-id")
    mgr.tick()
    _drain_until_ended(mgr, job)
    assert job.state == "failed"
    end = events[-1]
    assert end[0] == "end" and end[3] == "crash" and "exited with code 3" in end[4], end
    assert job.frames_done == 1 and not mgr.exiting
    mgr.shutdown()
