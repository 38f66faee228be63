"""Headless: a .clrscene with stiff bodies on Convex Hull and Proxy collision shapes (protocol 1.6), baked by
`clearance-server bake`: the scene file carries the shapes, the bodies land on the ground with their own
vertices (not the shapes') in the .pc2, and the proxy that leaves its object outside is warned about by name."""
import os
import subprocess
import sys

import numpy as np

from protocol import read_pc2, save_scene
from protocol.scene import Body, Material, Scene, Settings
from solver_server.model.primitives import box, grid_sheet, icosphere

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bake_a_scene_file_with_collision_shapes(tmp_path):
    F = 13
    V, T = box((0.1, 0.1, 0.1), center=(0.0, 0.0, 0.06), divisions=3)
    hull = Body("hull", "stiff", V, T, material=Material(density=500.0), collision_shape="convex_hull")
    V2 = V + [0.3, 0.0, 0.0]
    pv, pt = icosphere(0.04, (0.3, 0.0, 0.06), 1)
    prox = Body("prox", "stiff", V2, T, material=Material(density=500.0), collision_shape="proxy",
                shape_vertices=pv, shape_triangles=pt.astype(np.int32))
    G, GT, _ = grid_sheet((2.0, 2.0), (2, 2))
    ground = Body("ground", "collider", G, GT)
    save_scene(tmp_path / "s.clrscene", Scene(Settings(frame_start=1, frame_end=F), (hull, prox, ground)))
    e = dict(os.environ, PYTHONPATH=ROOT, CLEARANCE_STATE_DIR=str(tmp_path / "state"))
    e.pop("CLEARANCE_SECRET", None)
    r = subprocess.run([sys.executable, "-m", "solver_server", "bake", str(tmp_path / "s.clrscene"), "--out",
                        str(tmp_path / "out")], cwd=ROOT, env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "prox: 56 of 56 vertices lie outside its collision shape (proxy)" in r.stderr
    assert "hull:" not in r.stderr
    frames, _, _ = read_pc2(str(tmp_path / "out" / "hull.pc2"))
    assert frames.shape == (F, 56, 3)
    z = frames[:, :, 2].min(axis=1)
    assert z.min() > 0.0 and z[-1] < 1e-3          # on the ground, its own vertices above it
    frames2, _, _ = read_pc2(str(tmp_path / "out" / "prox.pc2"))
    # the proxy (a 4 cm ball around the centre) lands and rolls: the cube's own corners pass through the
    # ground, which is what the warning says; its centre rests a ball's radius up
    assert frames2[-1][:, 2].min() < -0.005
    assert 0.038 < frames2[-1].mean(axis=0)[2] < 0.042
