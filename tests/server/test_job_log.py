"""Issue 20 item 11: the server writes one line per job to its stderr when the job starts (id, what it
bakes, how long it queued) and one when it ends (how it ended, frames, after how long); it used to log
nothing per job. Real server."""
from protocol import Client, Done
from scenes import make_scene


def _run(c, scene, folder):
    job = c.submit(scene, folder)
    return job, [ev for ev in c.events(job, timeout=60.0) if isinstance(ev, Done)][-1]


def test_one_line_per_job(server, tmp_path):
    with Client(server.address, timeout=30.0) as c:
        c.connect()
        ok, done = _run(c, make_scene(n_frames=3), str(tmp_path / "a"))
        assert done.state == "done"
        bad, done = _run(c, make_scene(n_frames=5, debug_fail_after=2), str(tmp_path / "b"))
        assert done.state == "failed"
    log = [ln for ln in server.stderr_text().splitlines() if ln.startswith("clearance-server: job ")]
    started = [ln for ln in log if " started after " in ln]
    lines = [ln for ln in log if " started after " not in ln]
    assert len(started) == 2 and len(lines) == 2, log
    assert started[0].startswith(f"clearance-server: job {ok[:8]} started after ") and " s queued: 'test scene'" in started[0]
    assert started[1].startswith(f"clearance-server: job {bad[:8]} started after ")
    assert lines[0].startswith(f"clearance-server: job {ok[:8]} done after ") and "3 frames" in lines[0]
    assert "'test scene', 3 objects, frames 3-5, backend none" in lines[0] and str(tmp_path / "a") in lines[0]
    assert lines[1].startswith(f"clearance-server: job {bad[:8]} failed after ") and " [" in lines[1]
