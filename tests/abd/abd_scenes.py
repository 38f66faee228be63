"""Shared builders and the per-frame checks for the affine-body scene tests."""
from __future__ import annotations

import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.bodies import RIGIDITY_TOL
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.contact import count_intersections
from solver_server.model.primitives import box, grid_sheet


def stiff_box(name, size, center, density=1000.0, friction=0.3, rot=None, div=1, velocity=(0.0, 0.0, 0.0)):
    V, T = box(size, center=(0.0, 0.0, 0.0), divisions=div)
    if rot is not None:
        V = V @ rot.T
    V = V + np.asarray(center, np.float64)
    return Body(name, "stiff", V, T, material=Material(density=density, friction=friction),
                initial_velocity=tuple(velocity))


def ground(size=2.0, z=0.0, friction=0.3, rot=None, name="ground"):
    V, T, _ = grid_sheet((size, size), (2, 2), center=(0.0, 0.0, 0.0))
    if rot is not None:
        V = V @ rot.T
    V = V + [0.0, 0.0, z]
    return Body(name, "collider", V, T, material=Material(friction=friction))


def scene(*bodies, **settings) -> Scene:
    settings.setdefault("solver_quality", "accurate")
    return Scene(Settings(**settings), tuple(bodies))


class Run:
    """Bakes a scene frame by frame with the Newton IPC backend, checking every frame: zero
    edge-triangle intersections (the exact test of solver_server/contact/intersection.py) and
    every affine body's |A A^T - I|_F below RIGIDITY_TOL. Records the body rows per frame."""

    def __init__(self, sc: Scene):
        self.b = MeshBackend(sc)
        self.s = self.b.system
        self.ab = self.s.affine
        self.mesh = self.b.contact.mesh if self.b.contact is not None else None
        self.rows = [self.z.copy()]
        self.max_rigidity = 0.0
        self.frames = 0
        self.stats = []   # the backend's per-frame stats (converged, residual, ...)

    @property
    def z(self) -> np.ndarray:
        return self.b.stepper.x

    @property
    def x(self) -> np.ndarray:
        return self.s.dof_map.to_x(self.b.stepper.x)

    def advance(self, n: int = 1) -> None:
        for _ in range(n):
            self.stats.append(self.b.advance().stats)
            self.frames += 1
            self.check()

    def check(self) -> None:
        """The per-frame checks of the state reached (no intersection, rigid bodies); records the rows."""
        if self.mesh is not None:
            hits = count_intersections(np.ascontiguousarray(self.x), self.mesh.faces, self.mesh.edges)
            assert hits == 0, f"frame {self.frames}: {hits} edge-triangle intersections"
        if self.ab is not None:
            r = float(self.ab.rigidity_errors(self.z).max())
            self.max_rigidity = max(self.max_rigidity, r)
            assert r < RIGIDITY_TOL, f"frame {self.frames}: |A A^T - I| = {r:.3g}"
        self.rows.append(self.z.copy())

    def p(self, b: int) -> np.ndarray:
        """(frames + 1, 3) centre of mass of affine body b per frame."""
        r = int(self.ab.row0[b])
        return np.array([z[r] for z in self.rows])
