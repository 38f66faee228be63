"""``clearance-server bake --solver-quality``: a real process overrides the scene file's setting.

The none backend is enough: what is checked is which scene the bake ran (the cache records
the hash of exactly that scene), what it says, and that resuming with the other quality is
refused like any other changed setting.
"""
import dataclasses
import json
import os
import subprocess
import sys

from protocol import load_scene, save_scene
from scenes import make_scene
from solver_server.runtime.cache import scene_hash

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V1_0_FILE = os.path.join(ROOT, "tests", "protocol", "data", "scene_v1_0.clrscene")


def _run(*args, timeout=120):
    e = dict(os.environ)
    e.pop("CLEARANCE_SECRET", None)
    e["PYTHONPATH"] = ROOT
    out = args[args.index("--out") + 1]
    e["CLEARANCE_STATE_DIR"] = os.path.join(os.path.dirname(out), "state_dir")   # warm markers stay in tmp
    return subprocess.run([sys.executable, "-m", "solver_server", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)


def _quality(scene, q):
    return dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, solver_quality=q))


def _baked_hash(out) -> str:
    return json.loads((out / "scene.json").read_text())["scene_hash"]


def test_override_replaces_the_scene_files_value(tmp_path):
    path = tmp_path / "s.clrscene"
    save_scene(path, _quality(make_scene(n_frames=4), "fast"))   # a file that asks for the Preview solver
    scene = load_scene(path)
    assert scene.settings.solver_quality == "fast"
    r = _run("bake", str(path), "--out", str(tmp_path / "a"), "--solver-quality", "accurate")
    assert r.returncode == 0, r.stderr
    assert "solver quality accurate" in r.stdout
    assert _baked_hash(tmp_path / "a") == scene_hash(_quality(scene, "accurate"))
    r = _run("bake", str(path), "--out", str(tmp_path / "f"))   # no option: the file's value
    assert r.returncode == 0, r.stderr
    assert "solver quality fast" in r.stdout
    assert _baked_hash(tmp_path / "f") == scene_hash(scene)
    assert load_scene(path).settings.solver_quality == "fast"   # the file itself is untouched


def test_a_1_0_scene_file_bakes_accurate_unless_told_otherwise(tmp_path):
    old = load_scene(V1_0_FILE)
    r = _run("bake", V1_0_FILE, "--out", str(tmp_path / "a"))
    assert r.returncode == 0, r.stderr
    assert "solver quality accurate" in r.stdout
    assert _baked_hash(tmp_path / "a") == scene_hash(_quality(old, "accurate"))
    r = _run("bake", V1_0_FILE, "--out", str(tmp_path / "f"), "--solver-quality", "fast")
    assert r.returncode == 0, r.stderr
    assert "solver quality fast" in r.stdout
    assert _baked_hash(tmp_path / "f") == scene_hash(_quality(old, "fast"))


def test_resume_with_the_other_quality_is_refused(tmp_path):
    path = tmp_path / "s.clrscene"
    scene = _quality(make_scene(n_frames=5), "fast")
    save_scene(path, scene)
    out = tmp_path / "out"
    assert _run("bake", str(path), "--out", str(out), "--solver-quality", "accurate").returncode == 0
    s = scene.settings
    (out / "frames" / f"frame_{s.frame_end:05d}.npz").unlink()    # as if stopped one frame early
    (out / "state" / f"state_{s.frame_end:05d}.npz").unlink()
    r = _run("bake", str(path), "--out", str(out), "--resume")    # the file says fast
    assert r.returncode == 1 and "different scene" in r.stderr
    r = _run("bake", str(path), "--out", str(out), "--resume", "--solver-quality", "accurate")
    assert r.returncode == 0, r.stderr
    assert f"resuming after frame {s.frame_end - 1}" in r.stdout


def test_an_unknown_quality_is_refused_by_name(tmp_path):
    path = tmp_path / "s.clrscene"
    save_scene(path, make_scene(n_frames=3))
    r = _run("bake", str(path), "--out", str(tmp_path / "o"), "--solver-quality", "medium")
    assert r.returncode == 2 and "--solver-quality" in r.stderr and "'medium'" in r.stderr
    assert not (tmp_path / "o").exists()
