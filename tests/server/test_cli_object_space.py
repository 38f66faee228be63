"""``clearance-server bake`` of a scene carrying world matrices (protocol 1.7, what the add-on exports): .pc2
files in the object's space of each frame, named as the add-on names them, the server's cache in ``server/``,
the log naming the space; ``--frames`` and ``--resume`` keep to it; an output that is a link is refused.
No Blender here: the pass-through backend returns the scene's own motion, so every number is known."""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np

from protocol import read_pc2, save_scene
from protocol.cache_layout import pc2_stem
from scenes import expected_positions, make_scene

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, timeout=120):
    e = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "solver_server", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)


def _matrices(n_frames: int, seed: int) -> np.ndarray:
    """Per-frame world matrices: a turn, a non-uniform scale and a move that change every frame."""
    rng = np.random.default_rng(seed)
    out = np.repeat(np.eye(4)[None], n_frames, 0)
    for k in range(n_frames):
        a = 0.3 * k + seed
        R = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        out[k, :3, :3] = R @ np.diag([1.5, 0.7, 1.0 + 0.1 * k])
        out[k, :3, 3] = rng.normal(size=3)
    return out


def _scene(n_frames=6):
    scene = make_scene(n_frames=n_frames)
    bodies = tuple(b if b.role == "collider" else dataclasses.replace(b, world_matrices=_matrices(n_frames, i))
                   for i, b in enumerate(scene.bodies))
    return dataclasses.replace(scene, bodies=bodies)


def _local(world, m):
    inv = np.linalg.inv(m)
    return (world.astype(np.float64) @ inv[:3, :3].T + inv[:3, 3]).astype(np.float32)


def test_object_space_bake_in_the_addons_layout(tmp_path):
    scene = _scene()
    save_scene(str(tmp_path / "s.clrscene"), scene)
    out = tmp_path / "out"
    r = _run("bake", str(tmp_path / "s.clrscene"), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "output: object space" in r.stdout
    names = {b.name: pc2_stem(b.name) + ".pc2" for b in scene.simulated()}
    assert names["Cube.001"].startswith("Cube_001.") and names["Cloth/with spaces é"].startswith("Cloth_with_spaces__.")
    assert sorted(p.name for p in out.glob("*.pc2")) == sorted(names.values())
    assert json.loads((out / "server" / "scene.json").read_text())["frame_end"] == scene.settings.frame_end
    assert (out / "server" / "stats.json").is_file() and not (out / "scene.json").exists()
    s = scene.settings
    for b in scene.simulated():
        assert f"wrote {out / names[b.name]} ({b.name}, object space)" in r.stdout
        frames, start, _ = read_pc2(out / names[b.name])
        assert start == s.frame_start and frames.shape[0] == s.n_frames
        for k in range(s.n_frames):
            want = _local(expected_positions(scene, s.frame_start + k)[b.name], b.world_matrices[k])
            np.testing.assert_array_equal(frames[k], want)

    # --resume continues the cache in server/; --frames slices the matrices with the frames
    (out / "server" / "frames" / f"frame_{s.frame_end:05d}.npz").unlink()
    (out / "server" / "state" / f"state_{s.frame_end:05d}.npz").unlink()
    before = {n: read_pc2(out / f)[0] for n, f in names.items()}
    r = _run("bake", str(tmp_path / "s.clrscene"), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr
    assert all(np.array_equal(read_pc2(out / f)[0], before[n]) for n, f in names.items())
    r = _run("bake", str(tmp_path / "s.clrscene"), "--out", str(tmp_path / "part"), "--frames",
             str(s.frame_start + 2), str(s.frame_start + 4))
    assert r.returncode == 0, r.stderr
    frames, start, _ = read_pc2(tmp_path / "part" / names["Cube.001"])
    solid = scene.bodies[0]
    assert start == s.frame_start + 2 and frames.shape[0] == 3
    np.testing.assert_array_equal(frames[2], _local(solid.animation[4], solid.world_matrices[4]))


def test_object_space_bake_refuses_a_linked_output_and_writes_nothing(tmp_path):
    save_scene(str(tmp_path / "s.clrscene"), _scene(3))
    out = tmp_path / "out"
    out.mkdir()
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes")
    link = out / (pc2_stem("Cube.001") + ".pc2")
    os.symlink(mine, link)
    r = _run("bake", str(tmp_path / "s.clrscene"), "--out", str(out))
    assert r.returncode == 1 and str(link) in r.stderr and "symbolic link" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and mine.read_text() == "my notes" and not (out / "server").exists()


def test_frames_slices_every_per_frame_sample():
    """``--frames A B`` slices each per-frame array to A..B (world matrices, keyed pressure and force fields
    included: before, a scene with keyed pressure or a force field was refused by validation)."""
    from protocol.scene import ForceField
    from solver_server.runtime.bake import restrict_frames
    scene = _scene(6)
    F = scene.settings.n_frames
    cloth = dataclasses.replace(scene.bodies[1], pressure_samples=np.arange(F, dtype=np.float64))
    wind = ForceField("Wind", "wind", np.arange(F, dtype=np.float64), np.repeat(np.eye(4)[None], F, 0))
    push = ForceField("Push", "force", np.ones(F), np.repeat(np.eye(4)[None], F, 0), flow=np.arange(F, dtype=float))
    scene = dataclasses.replace(scene, bodies=(scene.bodies[0], cloth, scene.bodies[2]), force_fields=(wind, push))
    scene.validate()
    fs = scene.settings.frame_start
    part = restrict_frames(scene, fs + 1, fs + 3)
    part.validate()
    np.testing.assert_array_equal(part.bodies[1].pressure_samples, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(part.bodies[0].world_matrices, scene.bodies[0].world_matrices[1:4])
    np.testing.assert_array_equal(part.force_fields[0].strength, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(part.force_fields[1].flow, [1.0, 2.0, 3.0])
