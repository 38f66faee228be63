"""``clearance-server bake`` of a scene file with a quadratic solid (Material.element, protocol 1.3):
a real process bakes it with the Accurate solver, returns the artist's vertices (the corner nodes)
above the floor, and the Fast solver's refusal names the object."""
import os
import subprocess
import sys

import numpy as np

from protocol import save_scene
from protocol.scene import Body, Material, Scene, Settings
from solver_server.model.primitives import box, grid_sheet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, timeout=600):
    e = dict(os.environ)
    e.pop("CLEARANCE_SECRET", None)
    e["PYTHONPATH"] = ROOT
    out = args[args.index("--out") + 1]
    e["CLEARANCE_STATE_DIR"] = os.path.join(os.path.dirname(out), "state_dir")
    return subprocess.run([sys.executable, "-m", "solver_server", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)


def test_cli_bakes_a_quadratic_solid_and_fast_refuses_it(tmp_path):
    V, T = box((0.2, 0.2, 0.2), center=(0, 0, 0.13), divisions=2)
    G, GT, _ = grid_sheet((1.0, 1.0), (2, 2))
    jelly = Body("Jelly", "solid", V, T, material=Material(youngs_modulus=1e5, element="quadratic"))
    scene = Scene(Settings(frame_end=6, solver_quality="accurate"), (jelly, Body("Floor", "collider", G, GT)))
    path = tmp_path / "q.clrscene"
    save_scene(path, scene)
    r = _run("bake", str(path), "--out", str(tmp_path / "a"))
    assert r.returncode == 0, r.stderr[-3000:]
    with np.load(tmp_path / "a" / "frames" / "frame_00006.npz") as f:
        assert list(f["names"]) == ["Jelly"]
        x = f["p0"]
    assert x.shape == V.shape                       # the artist's vertices, not the mid-edge nodes
    assert x[:, 2].min() > 0.0 and x[:, 2].min() < 0.03 - 1e-3  # fell (it started 3 cm up), stays above the floor
    r = _run("bake", str(path), "--out", str(tmp_path / "f"), "--solver-quality", "fast")
    assert r.returncode == 1
    assert "Jelly" in r.stderr and "Converged" in r.stderr
