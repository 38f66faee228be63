"""The real server process: handshake, a none-backend bake streamed and cached, cancel,
resume, failures, several clients."""
import json
import os
import time

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
        assert c.ping() < 1.0
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
        assert c.ping() < 1.0
