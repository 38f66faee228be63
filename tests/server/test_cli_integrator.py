"""``clearance-server bake --integrator``: a real process overrides the scene file's integrator (the
cache records the hash of exactly the scene it baked), and a bad value is refused by argparse."""
import dataclasses

from protocol import load_scene, save_scene
from scenes import make_scene
from solver_server.runtime.cache import scene_hash
from test_cli_solver_quality import _baked_hash, _run


def test_override_replaces_the_scene_files_integrator(tmp_path):
    path = tmp_path / "s.clrscene"
    save_scene(path, make_scene(n_frames=4))
    scene = load_scene(path)
    assert scene.settings.integrator == "implicit_euler"
    r = _run("bake", str(path), "--out", str(tmp_path / "b"), "--integrator", "bdf2")
    assert r.returncode == 0, r.stderr
    assert "integrator bdf2" in r.stdout
    bdf2 = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, integrator="bdf2"))
    assert _baked_hash(tmp_path / "b") == scene_hash(bdf2) != scene_hash(scene)
    assert load_scene(path).settings.integrator == "implicit_euler"   # the file itself is untouched
    r = _run("bake", str(path), "--out", str(tmp_path / "x"), "--integrator", "verlet")
    assert r.returncode == 2 and "--integrator" in r.stderr
