"""The real server process: handshake, a none-backend bake streamed and cached, cancel,
resume, failures, several clients."""
import json
import os

import numpy as np
import pytest

from protocol import Client, Done, Error, Frame, Progress, RemoteError
from scenes import expected_positions, make_scene


def _collect(client, job, timeout=30.0):
    frames, progress, errors, done = {}, [], [], None
    for ev in client.events(job, timeout=timeout):
        if isinstance(ev, Frame):
            frames[ev.frame] = ev
        elif isinstance(ev, Progress):
            progress.append(ev)
        elif isinstance(ev, Error):
            errors.append(ev)
        elif isinstance(ev, Done):
            done = ev
    return frames, progress, errors, done


def test_handshake_bake_stream_and_cache(server, tmp_path):
    scene = make_scene(n_frames=6)
    with Client(server.address, timeout=5.0, client_name="pytest") as c:
        w = c.connect()
        assert w.protocol_version[0] == 1 and "none" in w.backends
        c.ping()                          # answered (a silent server raises ServerUnreachable)
        job = c.submit(scene, str(tmp_path / "cache"))
        frames, progress, errors, done = _collect(c, job)
    s = scene.settings
    assert done.state == "done" and not errors
    assert done.frames_done == s.n_frames
    assert sorted(frames) == list(range(s.frame_start, s.frame_end + 1))
    for f, ev in frames.items():
        exp = expected_positions(scene, f)
        assert list(ev.names) == list(exp)
        for name, p in zip(ev.names, ev.positions):
            assert p.dtype == np.float32 and np.array_equal(p, exp[name])
    assert progress[0].state == "queued"
    assert {p.state for p in progress} <= {"queued", "building", "solving"}
    # cache folder
    root = tmp_path / "cache"
    for f in range(s.frame_start, s.frame_end + 1):
        assert (root / "frames" / f"frame_{f:05d}.npz").exists()
        assert (root / "state" / f"state_{f:05d}.npz").exists()
        with np.load(root / "frames" / f"frame_{f:05d}.npz") as z:
            assert list(z["names"]) == list(expected_positions(scene, f))
            assert np.array_equal(z["p0"], expected_positions(scene, f)["Cube.001"])
    stats = json.loads((root / "stats.json").read_text())["frames"]
    assert [r["frame"] for r in stats] == list(range(s.frame_start + 1, s.frame_end + 1))
    assert all({"newton_iterations", "contacts", "seconds"} <= set(r) for r in stats)
    info = json.loads((root / "scene.json").read_text())
    assert len(info["scene_hash"]) == 64 and info["bodies"] == ["Cube.001", "Cloth/with spaces é"]
    assert not list(root.rglob("*.tmp*"))


def test_invalid_scene_is_refused_with_object_and_field(server, tmp_path):
    import dataclasses
    scene = make_scene()
    bad = dataclasses.replace(scene.bodies[0], vertices=scene.bodies[0].vertices.copy())
    bad.vertices[2, 1] = np.nan
    scene = dataclasses.replace(scene, bodies=(bad,) + scene.bodies[1:])
    with Client(server.address, timeout=5.0) as c:
        c.connect()
        with pytest.raises(RemoteError) as e:
            c.submit(scene, str(tmp_path / "x"))
        assert e.value.code == "scene" and e.value.obj == "Cube.001" and e.value.field == "vertices"
        with pytest.raises(RemoteError) as e:
            c.submit(make_scene(), "relative/dir")
        assert e.value.field == "cache_dir"
        c.ping()                          # the server keeps serving


def _wait_frames(client, job, count, timeout=10.0):
    """Consume the job's events until ``count`` frames arrived; returns them."""
    got = []
    for ev in client.events(job, timeout=timeout):
        if isinstance(ev, Frame):
            got.append(ev)
            if len(got) == count:
                return got
        assert not isinstance(ev, Done), ev
    raise AssertionError("job ended early")


def test_cancel_interrupts_a_long_frame(server, tmp_path):
    # Frame 2 sleeps 60 s: the job can only end "cancelled" without writing it if the server
    # stopped the child in the middle of the frame (cooperative flag, then terminate). How fast
    # that happens is measured by benchmarks/server.py, not asserted here.
    scene = make_scene(n_frames=4, debug_frame_delay=60.0)
    with Client(server.address, timeout=5.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "c"))
        _wait_frames(c, job, 1)          # frame_start written; now sleeping in frame 2
        reply = c.cancel(job)
        assert reply.state == "cancelling"
        frames, _, errors, done = _collect(c, job, timeout=20.0)
        assert done.state == "cancelled" and not errors and not frames
        assert c.status(job).state == "cancelled"
        c.ping()
    fs = scene.settings.frame_start
    root = tmp_path / "c"
    assert (root / "frames" / f"frame_{fs:05d}.npz").exists()
    assert not (root / "frames" / f"frame_{fs + 1:05d}.npz").exists()


def _frames_on_disk(root, scene):
    s = scene.settings
    out = {}
    for f in range(s.frame_start, s.frame_end + 1):
        with np.load(os.path.join(root, "frames", f"frame_{f:05d}.npz")) as z:
            out[f] = {k: z[k] for k in z.files}
    return out


def _identity(path):
    """(inode, mtime in ns) of a file: changes when the cache rewrites it (atomic replace)."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def test_resume_continues_and_equals_an_uninterrupted_bake(server, tmp_path):
    scene = make_scene(n_frames=7, debug_frame_delay=0.25)
    s = scene.settings
    with Client(server.address, timeout=5.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "r"))
        _wait_frames(c, job, 3)
        c.cancel(job)
        _, _, _, done = _collect(c, job)
        assert done.state == "cancelled"
        kept = sorted(os.listdir(tmp_path / "r" / "frames"))
        assert 3 <= len(kept) < s.n_frames
        # a different scene may not resume from this folder
        with pytest.raises(RemoteError) as e:
            c.submit(make_scene(n_frames=7, seed=5, debug_frame_delay=0.25), str(tmp_path / "r"), resume=True)
        assert e.value.code == "resume_mismatch"
        root = tmp_path / "r"
        last = s.frame_start - 1   # last frame with every frame before it and its own state on disk
        while (root / "frames" / f"frame_{last + 1:05d}.npz").exists() and \
                (root / "state" / f"state_{last + 1:05d}.npz").exists():
            last += 1
        assert last >= s.frame_start + 1
        kept_files = {}
        for f in range(s.frame_start, last + 1):
            for p in (root / "frames" / f"frame_{f:05d}.npz", root / "state" / f"state_{f:05d}.npz"):
                kept_files[p] = _identity(p)
        job2 = c.submit(scene, str(tmp_path / "r"), resume=True)
        frames, progress, errors, done = _collect(c, job2)
        assert done.state == "done" and not errors and done.frames_done == s.n_frames
        assert sorted(frames) == list(range(s.frame_start, s.frame_end + 1))  # kept frames are re-sent first
        assert any(p.state == "resuming" for p in progress)
        # only the missing frames were solved again: every kept frame and state file is the same
        # file as before (a rewrite replaces it by a new file through os.replace)
        assert {p: _identity(p) for p in kept_files} == kept_files
        job3 = c.submit(scene, str(tmp_path / "u"))
        assert _collect(c, job3)[3].state == "done"
    resumed, straight = _frames_on_disk(tmp_path / "r", scene), _frames_on_disk(tmp_path / "u", scene)
    for f in straight:
        assert set(resumed[f]) == set(straight[f])
        for k in straight[f]:
            assert np.array_equal(resumed[f][k], straight[f][k])
    for f, ev in frames.items():
        for name, p in zip(ev.names, ev.positions):
            assert np.array_equal(p, expected_positions(scene, f)[name])


def test_backend_failure_reports_and_server_keeps_serving(server, tmp_path):
    scene = make_scene(n_frames=6, debug_fail_after=2)
    fs = scene.settings.frame_start
    with Client(server.address, timeout=5.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "f"))
        frames, _, errors, done = _collect(c, job)
        assert done.state == "failed" and done.frames_done == 3
        assert sorted(frames) == [fs, fs + 1, fs + 2]
        assert len(errors) == 1 and errors[0].field == "debug_fail_after" and "failing at frame" in errors[0].message
        assert errors[0].job_id == job
        for f in (fs, fs + 1, fs + 2):
            assert (tmp_path / "f" / "frames" / f"frame_{f:05d}.npz").exists()
        c.ping()
        job = c.submit(make_scene(n_frames=3), str(tmp_path / "ok"))
        assert _collect(c, job)[3].state == "done"


def _job_child_pid(server_pid):
    kids = []
    for task in os.listdir(f"/proc/{server_pid}/task"):
        with open(f"/proc/{server_pid}/task/{task}/children") as f:
            kids += [int(p) for p in f.read().split()]
    for pid in kids:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"spawn_main" in f.read():
                return pid
    return None


def test_a_crashing_job_process_does_not_take_the_server_down(server, tmp_path):
    scene = make_scene(n_frames=4, debug_frame_delay=5.0)
    with Client(server.address, timeout=5.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "k"))
        _wait_frames(c, job, 1)
        pid = _job_child_pid(server.proc.pid)
        assert pid is not None
        os.kill(pid, 9)
        _, _, errors, done = _collect(c, job, timeout=5.0)
        assert done.state == "failed" and errors[0].code == "crash"
        c.ping()


def test_two_clients_at_once(server_factory, tmp_path):
    srv = server_factory("--workers", "2", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    a_scene = make_scene(n_frames=5, seed=1, debug_frame_delay=0.1)
    b_scene = make_scene(n_frames=4, seed=2, debug_frame_delay=0.1)
    with Client(srv.address, timeout=5.0, client_name="a") as a, Client(srv.address, timeout=5.0, client_name="b") as b:
        a.connect()
        b.connect()
        ja = a.submit(a_scene, str(tmp_path / "a"))
        jb = b.submit(b_scene, str(tmp_path / "b"))
        assert ja != jb
        # both at once: with one worker the second job would be "queued" (jobs take >= 0.3 s)
        assert a.status(ja).state == "running" and b.status(jb).state == "running"
        for cl, job, sc in ((a, ja, a_scene), (b, jb, b_scene)):
            frames, _, errors, done = _collect(cl, job)
            assert done.state == "done" and not errors
            assert sorted(frames) == list(range(sc.settings.frame_start, sc.settings.frame_end + 1))
            for f, ev in frames.items():
                assert np.array_equal(ev.positions[0], expected_positions(sc, f)["Cube.001"])
            assert all(getattr(m, "job_id", job) == job for m in cl.poll(0.2))  # nothing of the other job


def test_secret_server(server_factory, tmp_path):
    srv = server_factory("--secret", "s3cret", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    with Client(srv.address, timeout=5.0, secret="wrong") as c:
        with pytest.raises(RemoteError) as e:
            c.connect()
        assert e.value.code == "auth"
        with pytest.raises(RemoteError) as e:   # nothing else is accepted from this connection
            c.submit(make_scene(), str(tmp_path / "x"))
        assert e.value.code == "auth"
        with pytest.raises(RemoteError) as e:
            c.connect_secret = None
            c.secret = "s3cret"
            c.connect()
        assert e.value.code == "auth"
    with Client(srv.address, timeout=5.0) as c:   # no secret
        with pytest.raises(RemoteError) as e:
            c.ping()
        assert e.value.code == "auth"
    with Client(srv.address, timeout=5.0, secret="s3cret") as c:
        assert c.connect().server_name == "clearance-server"
        job = c.submit(make_scene(n_frames=2), str(tmp_path / "ok"))
        assert _collect(c, job)[3].state == "done"


def test_heartbeat_during_a_long_frame_and_shutdown_stops_jobs(server, tmp_path):
    with Client(server.address, timeout=5.0) as c:
        c.connect()
        job = c.submit(make_scene(n_frames=4, debug_frame_delay=60.0), str(tmp_path / "h"))
        _wait_frames(c, job, 1)
        beats = []
        for ev in c.events(job, timeout=20.0):     # the frame takes 60 s: only heartbeats arrive
            assert isinstance(ev, Progress), ev
            beats.append(ev)
            if len(beats) == 3:
                break
        assert all(b.state == "solving" for b in beats)  # the UI never looks frozen
        pid = _job_child_pid(server.proc.pid)
        assert pid is not None
        server.proc.terminate()
        assert server.proc.wait(5) == 0
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
