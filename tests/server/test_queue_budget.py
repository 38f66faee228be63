"""Issue 20 item 3: the server holds a bounded amount of scene data for queued jobs.

Every queued or running job keeps its scene in the server until it ends; 20 queued 52.5 MB
scenes took a server from 47 to 1,110 MiB. Now a Submit beyond ``--max-queued-mb`` (bytes of
scene arrays held) or ``--max-queued-jobs`` is refused with code ``busy`` and a message that
names the limit and what to do, before anything is written; once a job ends its bytes are free
again. A real server process, real sockets; memory from /proc, no timing.
"""
import pytest

from protocol import Client, RemoteError
from scenes import make_scene

MB = 1024 * 1024


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def _scene_of(mib: float):
    """A none-backend scene of about ``mib`` MiB of arrays (~120 bytes per vertex over its bodies)."""
    return make_scene(n_frames=2, n_vertices=int(mib * MB / 120))


def test_submits_beyond_the_byte_budget_are_refused_and_accepted_again_after_a_cancel(server_factory, tmp_path):
    srv = server_factory("--max-queued-mb", "1", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    with Client(srv.address, timeout=30.0) as c:
        c.connect()
        c.submit(make_scene(n_frames=4, debug_frame_delay=60.0), str(tmp_path / "sleeper"))   # runs, ~1 KB
        first = c.submit(_scene_of(0.4), str(tmp_path / "q1"))
        c.submit(_scene_of(0.4), str(tmp_path / "q2"))
        with pytest.raises(RemoteError) as e:
            c.submit(_scene_of(0.4), str(tmp_path / "q3"))
        assert e.value.code == "busy" and e.value.field == "scene"
        msg = e.value.message
        assert "job queue is full" in msg and "limit of 1 MiB" in msg and "--max-queued-mb" in msg, msg
        assert "\n" not in msg
        assert not (tmp_path / "q3").exists()          # refused before the folder was touched
        c.cancel(first)                                 # a queued job ends: its bytes are free again
        c.submit(_scene_of(0.4), str(tmp_path / "q3"))


def test_the_job_count_is_bounded_too(server_factory, tmp_path):
    srv = server_factory("--max-queued-jobs", "2", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    with Client(srv.address, timeout=30.0) as c:
        c.connect()
        c.submit(make_scene(n_frames=4, debug_frame_delay=60.0), str(tmp_path / "a"))
        c.submit(make_scene(n_frames=2), str(tmp_path / "b"))
        with pytest.raises(RemoteError) as e:
            c.submit(make_scene(n_frames=2), str(tmp_path / "c"))
        assert e.value.code == "busy" and "--max-queued-jobs" in e.value.message


def test_memory_stays_bounded_when_many_big_scenes_are_offered(server_factory, tmp_path):
    """The issue's attack scaled down: 20 scenes of 4 MiB against an 8 MiB budget (80 MiB offered)."""
    srv = server_factory("--max-queued-mb", "8", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    with Client(srv.address, timeout=60.0) as c:
        c.connect()
        c.submit(make_scene(n_frames=4, debug_frame_delay=60.0), str(tmp_path / "sleeper"))
        scene = _scene_of(4.0)
        before = _rss(srv.proc.pid)
        accepted = refused = 0
        for i in range(20):
            try:
                c.submit(scene, str(tmp_path / f"q{i}"))
                accepted += 1
            except RemoteError as e:
                assert e.code == "busy"
                refused += 1
        from solver_server.runtime.jobs import scene_nbytes
        assert refused >= 18 and accepted * scene_nbytes(scene) <= 8 * MB
        grown = _rss(srv.proc.pid) - before
        assert grown < 48 * MB, f"the server grew by {grown / MB:.0f} MiB"
