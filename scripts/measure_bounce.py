"""Restitution of a soft cube dropped on a plane against the IPC substep count (issue 10, "Bounce").

Implicit Euler damps fast motion, and an impact is fast: the rebound the artist sees depends on how
many steps resolve the contact. Soft cube 0.2 m (2x2x2 divisions), E = 1e5 Pa, rho = 1000 kg/m^3,
centre dropped from 0.3 m onto a frictionless plane, 24 fps, 18 frames. Restitution
e = sqrt(rise / fall) of the centroid height after and before its lowest point (frame-sampled).

    .venv/bin/python scripts/measure_bounce.py [accurate|fast] [1,4,16,64]

Figures in docs/addon.md ("Substeps and bouncing").
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from protocol.scene import Body, Material, Scene, Settings  # noqa: E402
from solver_server.backends.ipc_backend import IPCBackend  # noqa: E402
from solver_server.scene.primitives import box, grid_sheet  # noqa: E402

DROP = 0.3
"""Start height (m) of the cube's centre; it rests at 0.1 m."""


def restitution(quality: str, substeps: int, frames: int = 18) -> float:
    """sqrt(rise / fall) of the cube's centroid around its lowest frame."""
    V, T = box((0.2, 0.2, 0.2), center=(0.0, 0.0, DROP), divisions=2)
    cube = Body("cube", "solid", V, T, material=Material(youngs_modulus=1e5, density=1000.0, friction=0.0))
    P, PT, _ = grid_sheet((2.0, 2.0), (2, 2), center=(0.0, 0.0, 0.0))
    plane = Body("ground", "collider", P, PT, material=Material(friction=0.0))
    sc = Scene(Settings(frame_end=frames + 1, substeps=substeps, solver_quality=quality), (cube, plane))
    b = IPCBackend(sc)
    n = len(V)
    zc = []
    for _ in range(frames):
        b.advance()
        zc.append(b.stepper.x[:n, 2].mean())
    zc = np.array(zc)
    k = int(np.argmin(zc))
    return float(np.sqrt(max(zc[k:].max() - zc[k], 0.0) / (DROP - zc[k])))


def main() -> None:
    quality = sys.argv[1] if len(sys.argv) > 1 else "accurate"
    counts = [int(a) for a in (sys.argv[2] if len(sys.argv) > 2 else "1,4,16,64").split(",")]
    for s in counts:
        t0 = time.time()
        e = restitution(quality, s)
        print(f"{quality}: {s:3d} substeps at 24 fps -> restitution {e:.2f} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
