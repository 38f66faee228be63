"""kill -9 of the *server* mid-bake (issue 8, fault tests): the client is told the connection
was lost (not a timeout), the job's process goes with the server (so it neither keeps baking
nor keeps the folder's lock), every frame the client received is on disk, and a new server's
Resume continues from the last finished frame to the same result as an uninterrupted bake.
Real server processes, real signals, real folders."""
import os
import signal
import time

import numpy as np
import pytest

from protocol import Client, Done, Frame, ServerUnreachable
from scenes import expected_positions, make_scene


def _children(pid: int) -> list:
    """Pids of the live processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _frames_on_disk(root, scene) -> dict:
    out = {}
    s = scene.settings
    for f in range(s.frame_start, s.frame_end + 1):
        p = root / "frames" / f"frame_{f:05d}.npz"
        if p.exists():
            with np.load(p) as z:
                out[f] = {k: z[k].copy() for k in z.files}
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_server_killed_mid_bake_loses_nothing_and_resume_continues(server_factory, tmp_path):
    # 1.5 s a frame: when the server dies, its job is inside the next frame's solve; an orphan
    # job would finish that frame (writing it) 1.5 s later, one that goes with its server never does
    scene = make_scene(n_frames=6, debug_frame_delay=1.5)
    s = scene.settings
    env = {"CLEARANCE_STATE_DIR": str(tmp_path / "state")}
    srv = server_factory(env=env)
    received = {}
    with Client(srv.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "r"))
        with pytest.raises(ServerUnreachable) as lost:
            for ev in c.events(job, timeout=120.0):
                if isinstance(ev, Frame):
                    received[ev.frame] = ev
                    if len(received) == 2:
                        jobs = _children(srv.proc.pid)
                        assert jobs, "no job process"
                        os.kill(srv.proc.pid, signal.SIGKILL)     # mid-frame
                assert not isinstance(ev, Done), "the bake ended before the kill"
        # a cancel now fails at once, naming the loss (not "no reply" after the timeout)
        with pytest.raises(ServerUnreachable, match="lost the connection"):
            c.cancel(job)
    # the client says what happened, instead of waiting out its timeout
    assert "lost the connection" in str(lost.value) and "resume" in str(lost.value)
    srv.proc.wait(30)
    deadline = time.monotonic() + 60          # a bound for a hung orphan, not a timing assertion
    while any(_alive(p) for p in jobs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in jobs), "the job process outlived the killed server"

    root = tmp_path / "r"
    on_disk = _frames_on_disk(root, scene)
    # every frame sent was on disk first, and the job wrote nothing after its server died
    assert set(received) == set(on_disk)
    for f, ev in received.items():
        for name, p in zip(ev.names, ev.positions):
            assert np.array_equal(on_disk[f][f"p{list(ev.names).index(name)}"], p)
    assert len(on_disk) < s.n_frames                          # the bake really was cut short
    last = s.frame_start - 1        # the last frame with every frame up to it and its own state on disk
    while (root / "frames" / f"frame_{last + 1:05d}.npz").exists() and \
            (root / "state" / f"state_{last + 1:05d}.npz").exists():
        last += 1
    assert last >= max(received)
    kept = {f: (root / "frames" / f"frame_{f:05d}.npz").stat().st_ino for f in range(s.frame_start, last + 1)}

    # a new server resumes from the last finished frame (the folder is free: no orphan holds it)
    srv2 = server_factory(env=env)
    with Client(srv2.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(root), resume=True)
        events = list(c.events(job, timeout=120.0))
        assert events[-1].state == "done", events[-1]
        resumed = {ev.frame: ev for ev in events if isinstance(ev, Frame)}
        assert sorted(resumed) == list(range(s.frame_start, s.frame_end + 1))
    # frames finished before the kill were not solved again (same files), the rest were added
    assert {f: (root / "frames" / f"frame_{f:05d}.npz").stat().st_ino for f in kept} == kept
    # the result equals an uninterrupted bake (for the none backend: the input motion, computed
    # independently by expected_positions), on disk and as sent
    a = _frames_on_disk(root, scene)
    assert sorted(a) == list(range(s.frame_start, s.frame_end + 1))
    for f, ev in resumed.items():
        for i, name in enumerate(ev.names):
            assert np.array_equal(a[f][f"p{i}"], expected_positions(scene, f)[name])
        for name, p in zip(ev.names, ev.positions):
            assert np.array_equal(p, expected_positions(scene, f)[name])
    assert not list(root.rglob("*.tmp*"))


@pytest.mark.slow   # the real IPC solver: minutes with a cold kernel cache
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_server_killed_during_an_ipc_bake_resumes_to_the_uninterrupted_result(server_factory, tmp_path):
    """The solver's state (positions and velocities of frame k) comes back from disk after the
    server was killed: the resumed bake equals an uninterrupted one bit for bit, through the
    contact with the floor."""
    from protocol.scene import Body, Material, Scene, Settings
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64) * 0.1
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))], np.int32)
    cube = Body("Soft Cube", "solid", corners + (0, 0, 0.15), tris, material=Material(youngs_modulus=1e5),
                initial_velocity=(0.3, 0.0, -1.0))
    floor = Body("Floor", "collider", np.array([(-1, -1, 0), (1, -1, 0), (1, 1, 0), (-1, 1, 0)], np.float64),
                 np.array([(0, 1, 2), (0, 2, 3)], np.int32))
    scene = Scene(Settings(frame_start=1, frame_end=12, backend="ipc", solver_quality="accurate"), (cube, floor),
                  name="kill during contact")
    env = {"CLEARANCE_STATE_DIR": str(tmp_path / "state")}
    srv = server_factory(env=env)
    root = tmp_path / "r"
    received = {}
    with Client(srv.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(root))
        with pytest.raises(ServerUnreachable, match="lost the connection"):
            for ev in c.events(job, timeout=900.0):
                if isinstance(ev, Frame):
                    received[ev.frame] = ev
                    if len(received) == 5:
                        jobs = _children(srv.proc.pid)
                        os.kill(srv.proc.pid, signal.SIGKILL)
                assert not isinstance(ev, Done), "the bake ended before the kill"
    srv.proc.wait(30)
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in jobs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in jobs)
    assert len(_frames_on_disk(root, scene)) < 12
    srv2 = server_factory(env=env)
    with Client(srv2.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(root), resume=True)
        assert list(c.events(job, timeout=900.0))[-1].state == "done"
        job = c.submit(scene, str(tmp_path / "u"))
        assert list(c.events(job, timeout=900.0))[-1].state == "done"
    a, b = _frames_on_disk(root, scene), _frames_on_disk(tmp_path / "u", scene)
    assert sorted(a) == sorted(b) == list(range(1, 13))
    moved = np.abs(b[12]["p0"] - b[1]["p0"]).max()
    assert moved > 0.05, moved                     # it really fell and slid
    for f in b:
        for k in b[f]:
            assert np.array_equal(a[f][k], b[f][k]), (f, k)
