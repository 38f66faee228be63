"""One MPM simulation: particle state, grid, colliders and the substep loop (transfer.py kernels).

``MPMSolver`` is independent of the protocol: it takes particle arrays and a GridSpec, so tests and
benchmarks drive it directly; the backend (backends/mpm_backend.py) builds it from a Scene.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import numba

from .boundary import KINDS, SEPARATE
from .grid import Binning, GridSpec, count_outside
from .materials import NPARAM
from .sdf import ColliderField
from . import transfer

PARALLEL_MIN_PARTICLES = 20000
"""Below this many particles the kernels run single-threaded: waking threads for every parallel
region (about ten per substep) costs more than the work, especially on a busy machine."""


class MPMSolver:
    """Particles x (n, 3) m, v (n, 3) m/s, mass (n,) kg, vol0 (n,) m^3, mat (n,) int32 indices into
    params (k, NPARAM) (materials.pack), plastic (n,) initial plastic state. ``walls``: the domain
    box spec.domain_min..max has walls (particles are clamped into it); False: an open domain,
    particles leaving the box fall freely off the grid (``n_outside``)."""

    def __init__(self, spec: GridSpec, x: np.ndarray, v: np.ndarray, mass: np.ndarray, vol0: np.ndarray,
                 mat: np.ndarray, params: np.ndarray, plastic: np.ndarray,
                 gravity=(0.0, 0.0, -9.81), wall_friction: float = 0.3, wall_boundary: str = "separate",
                 collider_boundary: str = "separate", walls: bool = True):
        n = x.shape[0]
        self.spec = spec
        self.x = np.ascontiguousarray(x, np.float64).copy()
        self.v = np.ascontiguousarray(v, np.float64).copy()
        self.C = np.zeros((n, 3, 3))
        self.F = np.zeros((n, 3, 3))
        self.F[:, 0, 0] = self.F[:, 1, 1] = self.F[:, 2, 2] = 1.0
        self.tau = np.zeros((n, 3, 3))
        self.mass = np.ascontiguousarray(mass, np.float64)
        self.vol0 = np.ascontiguousarray(vol0, np.float64)
        self.mat = np.ascontiguousarray(mat, np.int32)
        self.params = np.ascontiguousarray(params, np.float64).reshape(-1, NPARAM)
        self.plastic = np.ascontiguousarray(plastic, np.float64).copy()
        self.gravity = np.array(gravity, np.float64)
        self.wall_friction = float(wall_friction)
        self.wall_kind = KINDS[wall_boundary]
        self.walls = bool(walls)
        self.collider_kind = KINDS[collider_boundary]
        self.origin = np.array(spec.origin)
        self.lo = np.array(spec.domain_min)
        self.hi = np.array(spec.domain_max)
        self.gm = np.zeros(spec.shape)
        self.gv = np.zeros(spec.shape + (3,))
        self.binning = Binning(spec, n)
        self.colliders: Optional[ColliderField] = None
        self._empty3 = np.zeros((1, 1, 1))
        self._empty4 = np.zeros((1, 1, 1, 3))
        self.parallel = n >= PARALLEL_MIN_PARTICLES and numba.get_num_threads() > 1
        self.nchunks = max(1, min(n, 8 * numba.get_num_threads())) if self.parallel else 1
        self.damping = 0.0
        """Grid velocity damping rate (1/s), 0 by default: v_i <- exp(-damping dt) v_i after the grid
        update. Dynamic relaxation for quasi-static loading (e.g. measuring an angle of repose
        without the inertial overshoot of a fast collapse); it also slows free fall, so keep it 0
        for animation."""
        transfer.init_stress(self.F, self.C, self.tau, self.plastic, self.mat, self.params, self.nchunks)

    def use_threads(self, parallel: bool) -> None:
        """Force the multi-threaded (colour-blocked) or the single-threaded kernels."""
        self.parallel = bool(parallel)
        self.nchunks = max(1, min(self.n, 8 * numba.get_num_threads())) if parallel else 1

    @property
    def n(self) -> int:
        return self.x.shape[0]

    def enable_colliders(self) -> ColliderField:
        if self.colliders is None:
            self.colliders = ColliderField(self.spec)
        return self.colliders

    def _coll(self):
        c = self.colliders
        if c is None:
            return False, self._empty3, self._empty4, self._empty4, self._empty3
        return True, c.phi, c.normal, c.vel, c.fric

    def p2g(self, dt: float) -> None:
        """Bin particles, zero the active grid, scatter (grid holds momentum afterwards)."""
        b = self.binning
        b.update(self.x, self.parallel)
        if not self.parallel:
            transfer.zero_active_serial(b.active_list, b.nb, self.gm, self.gv)
            transfer.p2g_serial(self.x, self.v, self.C, self.tau, self.mass, self.vol0, b.order, b.start,
                                b.colour_blocks, b.colour_start, self.origin, self.spec.dx, dt, self.gm, self.gv)
            return
        transfer.zero_active(b.active_list, b.nb, self.gm, self.gv)
        transfer.p2g(self.x, self.v, self.C, self.tau, self.mass, self.vol0, b.order, b.start, b.colour_blocks,
                     b.colour_start, self.origin, self.spec.dx, dt, self.gm, self.gv)

    def grid_update(self, dt: float) -> None:
        has, phi, nrm, vel, fric = self._coll()
        b = self.binning
        update = transfer.grid_update if self.parallel else transfer.grid_update_serial
        update(b.active_list, b.nb, self.gm, self.gv, self.origin, self.spec.dx, dt, self.gravity,
                             self.lo, self.hi, self.walls, self.wall_friction, self.wall_kind, has, phi, nrm, vel, fric,
                             self.collider_kind)
        if self.damping > 0.0:
            self.gv *= math.exp(-self.damping * dt)

    def g2p(self, dt: float) -> None:
        has, phi, nrm, vel, fric = self._coll()
        transfer.g2p(self.x, self.v, self.C, self.F, self.tau, self.plastic, self.mat, self.params, self.origin,
                     self.spec.dx, dt, self.gv, self.lo, self.hi, self.walls, self.gravity, self.wall_friction,
                     self.wall_kind, has, phi, nrm,
                     vel, fric, self.collider_kind, self.nchunks)

    def step(self, dt: float) -> None:
        """One substep of dt seconds."""
        self.p2g(dt)
        self.grid_update(dt)
        self.g2p(dt)

    def max_speed(self) -> float:
        """Largest speed (m/s) of the particles on the grid."""
        return transfer.max_speed(self.v, self.x, self.lo, self.hi)

    def n_outside(self) -> int:
        """Particles outside the domain box (open domain: off the grid, falling freely)."""
        return int(count_outside(self.x, self.lo, self.hi))

    def state(self) -> dict:
        return {"x": self.x.copy(), "v": self.v.copy(), "C": self.C.copy(), "F": self.F.copy(),
                "tau": self.tau.copy(), "plastic": self.plastic.copy()}

    def load(self, state: dict) -> None:
        for key in ("x", "v", "C", "F", "tau", "plastic"):
            arr = np.asarray(state[key], np.float64)
            dst = getattr(self, key)
            if arr.shape != dst.shape:
                raise ValueError(f"state {key!r} has shape {arr.shape}, expected {dst.shape}")
            dst[...] = arr

    def total_momentum(self) -> np.ndarray:
        """Total linear momentum sum m v (kg m/s) of the particles."""
        return (self.mass[:, None] * self.v).sum(axis=0)

    def nbytes(self) -> int:
        arrays = (self.x, self.v, self.C, self.F, self.tau, self.mass, self.vol0, self.mat, self.plastic, self.gm,
                  self.gv)
        extra = self.colliders.nbytes if self.colliders is not None else 0
        return sum(a.nbytes for a in arrays) + self.binning.nbytes + extra
