"""The soft cube dropped on a plane (docs/solver.md, "Bounce"; issue 10): the scene, the drop and the
restitution e = sqrt(rise / fall) of its centroid around the first bounce. Used by test_bdf2.py and by
scripts/measure_bounce.py (which prints the restitution against the substep count).

Soft cube 0.2 m (2x2x2 divisions), E = 1e5 Pa, rho = 1000 kg/m^3, centre dropped from 0.3 m onto a
frictionless plane, 24 fps. The fall runs from the drop height to the first frame after which the
centroid rises, the rise from there to the next highest frame before it falls again (a bouncy cube's
second impact may sink lower than its first)."""
from __future__ import annotations

import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend
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
    """The soft cube over the plane (module doc)."""
    V, T = box((0.2, 0.2, 0.2), center=(0.0, 0.0, DROP), divisions=2)
    cube = Body("cube", "solid", V, T, material=Material(youngs_modulus=1e5, density=1000.0, friction=0.0,
                                                          damping=damping))
    P, PT, _ = grid_sheet((2.0, 2.0), (2, 2), center=(0.0, 0.0, 0.0))
    plane = Body("ground", "collider", P, PT, material=Material(friction=0.0))
    st = Settings(frame_end=frames + 1, substeps=substeps, solver_quality=quality, integrator=integrator)
    return Scene(st, (cube, plane))


def drop(quality: str, substeps: int, integrator: str = "implicit_euler", damping: float = 0.0,
         frames: int = 18) -> tuple:
    """(centroid heights per frame (m), smallest contact distance over the run (m), edge-triangle
    intersections summed over the frames) of the drop."""
    b = MeshBackend(bounce_scene(quality, substeps, integrator, damping, frames))
    n = len(b.scene.bodies[0].vertices)
    zc, dmin, crossings = [], np.inf, 0
    for _ in range(frames):
        r = b.advance()
        zc.append(b.stepper.x[:n, 2].mean())
        if r.stats.get("min_distance") is not None:
            dmin = min(dmin, r.stats["min_distance"])
        crossings += b.contact.count_intersections(b.system.dof_map.to_x(b.stepper.x))
    return np.array(zc), dmin, crossings


def restitution(quality: str, substeps: int, integrator: str = "implicit_euler", damping: float = 0.0,
                frames: int = 18) -> float:
    """sqrt(rise / fall) of the cube's centroid around its first bounce."""
    return first_bounce(drop(quality, substeps, integrator, damping, frames)[0])
