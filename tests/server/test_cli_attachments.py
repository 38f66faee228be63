"""Headless: a .clrscene with a cloth strip attached to a stiff box (protocol 1.6's attach_to / attach_indices),
baked by `clearance-server bake`: the strip's attached edge travels with the box."""
import os
import subprocess
import sys

import numpy as np

from protocol import read_pc2, save_scene
from protocol.scene import Body, Material, Scene, Settings
from solver_server.model.primitives import box, grid_sheet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bake_a_scene_file_with_an_attachment(tmp_path):
    F = 7
    V, T, _ = grid_sheet((0.12, 0.04), (6, 2), center=(0.16, 0.0, 0.0))
    edge = np.nonzero(np.isclose(V[:, 0], 0.1))[0].astype(np.int32)
    strip = Body("strip", "cloth", V, np.ascontiguousarray(T, np.int32),
                 material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5),
                 attach_to="box", attach_indices=edge)
    BV, BT = box((0.2, 0.2, 0.2), divisions=2)
    crate = Body("box", "stiff", BV, BT, material=Material(density=500.0), initial_velocity=(0.0, 1.0, 0.0))
    save_scene(tmp_path / "s.clrscene", Scene(Settings(frame_start=1, frame_end=F), (strip, crate)))
    e = dict(os.environ, PYTHONPATH=ROOT)
    e.setdefault("CLEARANCE_STATE_DIR", str(tmp_path / "state"))
    e.pop("CLEARANCE_SECRET", None)
    r = subprocess.run([sys.executable, "-m", "solver_server", "bake", str(tmp_path / "s.clrscene"), "--out",
                        str(tmp_path / "out")], cwd=ROOT, env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    s, _, _ = read_pc2(str(tmp_path / "out" / "strip.pc2"))
    b, _, _ = read_pc2(str(tmp_path / "out" / "box.pc2"))
    d_box = (b[-1] - b[0]).mean(axis=0)
    d_edge = (s[-1][edge] - s[0][edge]).mean(axis=0)
    assert d_box[1] > 0.2 and d_box[2] < -0.1
    assert np.abs(d_edge - d_box).max() < 5e-4, (d_edge, d_box)
