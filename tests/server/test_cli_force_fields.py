"""Headless: a .clrscene with a Wind field and a cloth with Air Drag, baked by `clearance-server bake`,
moves the cloth with the wind (the scene file carries protocol 1.5's force fields end to end)."""
import os
import subprocess
import sys

import numpy as np

from protocol import read_pc2, save_scene
from protocol.scene import Body, ForceField, Material, Scene, Settings
from solver_server.model.primitives import grid_sheet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_bake_a_scene_file_with_wind(tmp_path):
    F = 13
    V, T, _ = grid_sheet((0.5, 0.5), (4, 4), center=(0.0, 0.0, 1.0))
    sheet = Body("sheet", "cloth", V, np.ascontiguousarray(T, np.int32),
                 material=Material(density=200.0, thickness=1e-3, air_drag=1.0))
    M = np.repeat(np.eye(4)[None], F, 0)      # +Z: an updraft
    wind = ForceField("Wind", "wind", np.linspace(0.0, 4.0, F), M)
    scene = Scene(Settings(frame_start=1, frame_end=F, solver_quality="accurate", gravity=(0.0, 0.0, 0.0)),
                  (sheet,), force_fields=(wind,))
    save_scene(tmp_path / "s.clrscene", scene)
    e = dict(os.environ, PYTHONPATH=ROOT, CLEARANCE_STATE_DIR=str(tmp_path / "state"))
    e.pop("CLEARANCE_SECRET", None)
    r = subprocess.run([sys.executable, "-m", "solver_server", "bake", str(tmp_path / "s.clrscene"), "--out",
                        str(tmp_path / "out")], cwd=ROOT, env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    frames, _, _ = read_pc2(str(tmp_path / "out" / "sheet.pc2"))
    rise = float(frames[-1][:, 2].mean() - frames[0][:, 2].mean())
    # implicit Euler of dv/dt = (k / rho_A) (u(t) - v), u ramping 0 -> 4 m/s over 0.5 s: the sheet rises
    # well above zero but below the wind's own travel (1 m over the ramp)
    assert 0.2 < rise < 1.0, rise
    assert np.ptp(frames[-1][:, 2]) < 1e-3     # flat: the same push on every face
