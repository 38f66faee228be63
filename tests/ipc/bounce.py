"""The bounce scene (a soft cube dropped on a frictionless floor) and its restitution measure, shared
by the energy and bounce tests; scripts/measure_bounce.py prints the same figures for docs/solver.md."""
from __future__ import annotations

import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.model.primitives import box, grid_sheet

DROP = 0.3
"""Start height (m) of the cube's centre; it rests at 0.1 m."""


def first_bounce(zc: np.ndarray, drop: float = DROP) -> float:
    """sqrt(rise / fall) of frame-sampled centroid heights zc (m) around the first bounce: the fall
    ends at the first frame the next one is above, the rise at the highest frame before the
    centroid descends again (0 when it never rises)."""
    k = next((i for i in range(len(zc) - 1) if zc[i + 1] > zc[i]), len(zc) - 1)
    j = k
    while j + 1 < len(zc) and zc[j + 1] >= zc[j]:
        j += 1
    return float(np.sqrt(max(zc[j] - zc[k], 0.0) / (drop - zc[k])))


def bounce_scene(quality: str, substeps: int, integrator: str = "implicit_euler", damping: float = 0.0,
                 frames: int = 18) -> Scene:
    """A 0.2 m soft cube (2x2x2 divisions, E 1e5 Pa, 1000 kg/m^3, centre at DROP) over a frictionless
    2 m plane, 24 fps."""
    V, T = box((0.2, 0.2, 0.2), center=(0.0, 0.0, DROP), divisions=2)
    cube = Body("cube", "solid", V, T, material=Material(youngs_modulus=1e5, density=1000.0, friction=0.0,
                                                          damping=damping))
    P, PT, _ = grid_sheet((2.0, 2.0), (2, 2), center=(0.0, 0.0, 0.0))
    plane = Body("ground", "collider", P, PT, material=Material(friction=0.0))
    st = Settings(frame_end=frames + 1, substeps=substeps, solver_quality=quality, integrator=integrator)
    return Scene(st, (cube, plane))
