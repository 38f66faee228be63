"""The clearance-server command line: serve refuses unsafe binds, bake writes pc2 files."""
import json
import os
import subprocess
import sys

import numpy as np

from protocol import read_pc2, save_scene
from scenes import expected_positions, make_scene

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, timeout=60, env=None):
    e = dict(os.environ)
    e.pop("CLEARANCE_SECRET", None)
    e["PYTHONPATH"] = ROOT
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "solver_server", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)


def test_non_loopback_bind_without_secret_refuses_to_start():
    r = _run("serve", "--bind", "tcp://0.0.0.0:0", timeout=30)
    assert r.returncode != 0
    assert "without a secret" in r.stderr and "listening" not in r.stdout


def test_bake_writes_pc2_equal_to_the_input_motion(tmp_path):
    scene = make_scene(n_frames=6)
    save_scene(tmp_path / "s.clrscene", scene)
    r = _run("bake", str(tmp_path / "s.clrscene"), "--out", str(tmp_path / "out"),
             env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 0, r.stderr
    assert "bake done" in r.stdout and "frame" in r.stdout
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("*.pc2")) == ["Cloth_with_spaces.pc2", "Cube.001.pc2"]
    s = scene.settings
    for name, fname in (("Cube.001", "Cube.001.pc2"), ("Cloth/with spaces é", "Cloth_with_spaces.pc2")):
        frames, start, rate = read_pc2(out / fname)
        assert start == s.frame_start and rate == 1.0 and frames.shape[0] == s.n_frames
        for k in range(s.n_frames):
            assert np.array_equal(frames[k], expected_positions(scene, s.frame_start + k)[name])
    stats = json.loads((out / "stats.json").read_text())["frames"]
    assert len(stats) == s.n_frames - 1
    assert len(list((out / "state").glob("state_*.npz"))) == s.n_frames


def test_bake_frame_range_and_failure_exit_code(tmp_path):
    scene = make_scene(n_frames=8)
    save_scene(tmp_path / "s.clrscene", scene)
    fs = scene.settings.frame_start
    r = _run("bake", str(tmp_path / "s.clrscene"), "--out", str(tmp_path / "o"), "--frames", str(fs + 2), str(fs + 5))
    assert r.returncode == 0, r.stderr
    frames, start, _ = read_pc2(tmp_path / "o" / "Cube.001.pc2")
    assert start == fs + 2 and frames.shape[0] == 4
    assert np.array_equal(frames[3], expected_positions(scene, fs + 5)["Cube.001"])
    save_scene(tmp_path / "bad.clrscene", make_scene(n_frames=5, debug_fail_after=1))
    r = _run("bake", str(tmp_path / "bad.clrscene"), "--out", str(tmp_path / "b"))
    assert r.returncode == 1 and "failing at frame" in r.stderr
    assert len(list((tmp_path / "b" / "frames").glob("frame_*.npz"))) == 2
    (tmp_path / "junk.clrscene").write_bytes(b"not a scene")
    r = _run("bake", str(tmp_path / "junk.clrscene"), "--out", str(tmp_path / "j"))
    assert r.returncode == 1 and "cannot read" in r.stderr


def test_bake_resume_solves_only_the_missing_frames(tmp_path):
    scene = make_scene(n_frames=6)
    save_scene(tmp_path / "s.clrscene", scene)
    out = tmp_path / "out"
    assert _run("bake", str(tmp_path / "s.clrscene"), "--out", str(out)).returncode == 0
    full = {p.name: read_pc2(p)[0] for p in out.glob("*.pc2")}
    s = scene.settings
    for f in (s.frame_end - 1, s.frame_end):  # as if the bake had stopped two frames early
        (out / "frames" / f"frame_{f:05d}.npz").unlink()
        (out / "state" / f"state_{f:05d}.npz").unlink()
    for p in out.glob("*.pc2"):
        p.unlink()
    r = _run("bake", str(tmp_path / "s.clrscene"), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr
    assert f"resuming after frame {s.frame_end - 2}" in r.stdout
    assert r.stdout.count("done newton_iterations") == 2  # only two frames solved again
    for name, frames in full.items():
        assert np.array_equal(read_pc2(out / name)[0], frames)
    other = tmp_path / "other.clrscene"
    save_scene(other, make_scene(n_frames=6, seed=4))
    r = _run("bake", str(other), "--out", str(out), "--resume")
    assert r.returncode == 1 and "different scene" in r.stderr
