"""The "mpm" backend: granular bodies (sand, snow, water, jelly, mud) as MPM particles, colliders as
distance fields (solver_server/solvers/mpm/, docs/mpm.md).

Each granular body becomes the particles sampled inside its closed mesh; ``initial_positions`` and
every ``FrameResult.positions`` return those particles (a fixed count per body for the whole bake,
so the point cache stays valid), not the mesh vertices. ``particle_radius(name)`` (m) and
``stats["particle_radius"]`` tell the add-on how big to draw them. All bodies share one grid over
the domain box, with dx = 2 x the smallest particle spacing (8 particles per cell). The box is
automatic (Settings.mpm_domain "auto", the default: the bodies' and colliders' bounds plus a
margin, open: particles that leave it fall freely, off the grid, and are counted in
``stats["left_domain"]``) or the artist's (``"box"``: Settings.domain_min/max with walls,
Coulomb friction Settings.friction). IPC roles (solid, cloth, rod, stiff) are not coupled to
MPM in this version and are refused.
"""
from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from protocol.scene import Scene, SceneError
from solver_server.solvers.mpm import materials as mats
from solver_server.solvers.mpm.grid import GridSpec
from solver_server.solvers.mpm.inside import is_closed
from solver_server.solvers.mpm.memory import estimate_bytes, human, memory_limit
from solver_server.solvers.mpm.sampling import lattice_count, sample_body
from solver_server.solvers.mpm.solver import MPMSolver
from solver_server.solvers.mpm.timestep import max_dt, viscous_dt
from .base import Backend, FrameResult, ProgressFn

CELL_PER_SPACING = 2.0
"""Grid spacing dx in units of the smallest particle spacing (2 -> 8 particles per cell)."""

MAX_SUBSTEPS_PER_FRAME = 100000

AUTO_MARGIN_FRACTION = 0.1
"""Margin of the automatic domain on every side, as a fraction of the largest extent of the
bodies' and colliders' bounds ..."""
AUTO_MARGIN_CELLS = 4
"""... and at least this many grid cells."""


def auto_domain(scene: Scene, dx: float) -> tuple:
    """The open domain box (lo, hi) in m (Settings.mpm_domain "auto"): the bounds of every granular
    body and every collider over all frames, plus a margin of max(AUTO_MARGIN_FRACTION x the largest
    extent, AUTO_MARGIN_CELLS dx) on every side, plus, against gravity, the height the fastest
    initial velocity can rise (v^2 / 2g), rounded outwards to whole cells (multiples of dx). Particles
    outside it are off the grid and fall freely."""
    pts = []
    for b in scene.bodies:
        if b.role == "collider" and b.animation is not None:
            pts.append(np.asarray(b.animation, float).reshape(-1, 3))
        pts.append(np.asarray(b.vertices, float).reshape(-1, 3))
    pts = np.concatenate(pts)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    margin = max(AUTO_MARGIN_FRACTION * float((hi - lo).max()), AUTO_MARGIN_CELLS * dx)
    lo, hi = lo - margin, hi + margin
    g = np.asarray(scene.settings.gravity, float)
    gn = float(np.linalg.norm(g))
    if gn > 0:
        up = -g / gn
        rise = max(max(float(np.dot(b.initial_velocity, up)), 0.0) ** 2 / (2 * gn)
                   for b in scene.bodies if b.role == "granular")
        hi = hi + rise * np.maximum(up, 0.0)
        lo = lo + rise * np.minimum(up, 0.0)
    # whole cells from the world origin: node planes sit at (k + 1/2) dx whatever the scene's bounds,
    # so moving a collider's far end never shifts the grid under the sand
    return np.floor(lo / dx) * dx, np.ceil(hi / dx) * dx


class MPMBackend(Backend):
    """MPM backend for a validated Scene. ``collider_boundary``: "separate" (default), "slip" or
    "sticky" for collider surfaces; domain walls use "separate" with Settings.friction."""

    name = "mpm"

    def __init__(self, scene: Scene, progress: Optional[ProgressFn] = None, collider_boundary: str = "separate"):
        super().__init__(scene, progress)
        st = scene.settings
        self.granular = [b for b in scene.bodies if b.role == "granular"]
        self.colliders = [b for b in scene.bodies if b.role == "collider"]
        for b in scene.bodies:
            if b.role not in ("granular", "collider"):
                raise SceneError(
                    f"{b.name}: role {b.role!r} is simulated by the IPC backend; the MPM backend only simulates "
                    f"granular bodies with colliders (the two are not coupled in this version). Make it a "
                    f"collider or bake it separately", b.name, "role")
        if not self.granular:
            raise SceneError("the MPM backend needs at least one body with the granular role", "", "bodies")
        for b in self.granular:
            closed, n_open = is_closed(b.triangles)
            if not closed:
                raise SceneError(
                    f"{b.name}: the granular role needs a closed mesh (particles are sampled inside it), but {n_open} "
                    f"edges are open; close the holes or use a solid primitive", b.name, "triangles")
        spacing = min(b.material.particle_spacing for b in self.granular)
        self.dx = CELL_PER_SPACING * spacing
        self.open_domain = st.mpm_domain == "auto"
        lo, hi = auto_domain(scene, self.dx) if self.open_domain else self._box(st)
        self.spec = GridSpec.from_domain(lo, hi, self.dx)
        bound = sum(lattice_count(b.vertices, b.material.particle_spacing) for b in self.granular)
        need = estimate_bytes(bound, self.spec.n_nodes, bool(self.colliders))
        limit = memory_limit()
        if need > limit:
            worst = max(self.granular, key=lambda b: lattice_count(b.vertices, b.material.particle_spacing))
            raise SceneError(
                f"{worst.name}: up to {bound:,} particles on a {self.spec.shape[0]}x{self.spec.shape[1]}x"
                f"{self.spec.shape[2]} grid need about {human(need)}, above the limit of {human(limit)} "
                f"(CLEARANCE_MPM_MEMORY_LIMIT); raise the particle spacing or shrink the domain"
                + (" (the automatic domain covers every collider: use an explicit domain box)"
                   if self.open_domain else ""),
                worst.name, "particle_spacing")

        self.progress("building", 0.0)
        xs, vs, ms, vols, mat_ids, plast = [], [], [], [], [], []
        self.ranges = {}
        self.radius = {}
        params = []
        start = 0
        for k, b in enumerate(self.granular):
            pts = sample_body(b)
            n = pts.shape[0]
            s = b.material.particle_spacing
            vol = s ** 3
            xs.append(pts)
            vs.append(np.tile(np.asarray(b.initial_velocity, float), (n, 1)))
            ms.append(np.full(n, b.material.density * vol))
            vols.append(np.full(n, vol))
            mat_ids.append(np.full(n, k, np.int32))
            plast.append(np.full(n, mats.initial_plastic_state(b.material)))
            params.append(mats.pack(b.material))
            self.ranges[b.name] = (start, start + n)
            self.radius[b.name] = 0.5 * s
            start += n
        self.n_particles = start
        self.wave_speed = max(mats.wave_speed(b.material) for b in self.granular)
        self.viscous_limit = min(viscous_dt(self.dx, b.material.density, b.material.viscosity)
                                 for b in self.granular if b.material.mpm_material in ("water", "mud")) \
            if any(b.material.mpm_material in ("water", "mud") for b in self.granular) else math.inf
        self.progress("compiling", 0.0)
        self.solver = MPMSolver(self.spec, np.concatenate(xs), np.concatenate(vs), np.concatenate(ms),
                                np.concatenate(vols), np.concatenate(mat_ids), np.stack(params),
                                np.concatenate(plast), gravity=st.gravity, wall_friction=st.friction,
                                collider_boundary=collider_boundary, walls=not self.open_domain)
        self._closed = {c.name: is_closed(c.triangles)[0] for c in self.colliders}
        if self.colliders:
            self.solver.enable_colliders()
        self.frame_dt = 1.0 / st.fps
        self._field_key = None

    # -- public API -------------------------------------------------------------------------------------
    def particle_radius(self, body_name: str) -> float:
        """Half the particle spacing (m) of a granular body, for drawing its points as spheres."""
        return self.radius[body_name]

    def initial_positions(self) -> dict:
        return self._positions()

    def advance(self) -> FrameResult:
        t0 = time.perf_counter()
        st = self.scene.settings
        remaining = self.frame_dt
        substeps = 0
        sub_intervals = self._collider_intervals()
        elapsed = 0.0
        while remaining > 1e-12 * self.frame_dt:
            if self.colliders:
                self._update_colliders(min(int(elapsed / self.frame_dt * sub_intervals), sub_intervals - 1),
                                       sub_intervals)
            vmax = self.solver.max_speed()
            dt = max_dt(self.dx, vmax, self.wave_speed, self.viscous_limit)
            if dt >= remaining:
                dt = remaining
            elif remaining < 2 * dt:
                dt = 0.5 * remaining
            self.solver.step(dt)
            remaining -= dt
            elapsed += dt
            substeps += 1
            if substeps > MAX_SUBSTEPS_PER_FRAME:
                raise SceneError(f"the MPM step fell below {self.frame_dt / MAX_SUBSTEPS_PER_FRAME:.2e} s (speed "
                                 f"{vmax:.3g} m/s); the simulation is unstable: lower the stiffness or raise the "
                                 f"particle spacing", "", "youngs_modulus")
            if not np.isfinite(vmax):
                raise SceneError("the MPM simulation diverged (non-finite velocity); lower the stiffness",
                                 "", "youngs_modulus")
        self.frame += 1
        stats = {"substeps": substeps, "seconds": time.perf_counter() - t0, "particles": self.n_particles,
                 "max_speed": float(self.solver.max_speed()), "particle_radius": dict(self.radius),
                 "newton_iterations": 0, "contacts": 0, **self._left_domain()}
        return FrameResult(self.frame, self._positions(), stats)

    def get_state(self) -> dict:
        state = self.solver.state()
        state["frame"] = np.array(self.frame)
        return state

    def set_state(self, state: dict, frame: int) -> None:
        self.solver.load(state)
        self.frame = int(frame)
        self._field_key = None

    # -- internals --------------------------------------------------------------------------------------
    def _box(self, st) -> tuple:
        """The artist's walled domain box (mpm_domain "box"), checked against the bodies."""
        lo = np.array(st.domain_min, float)
        hi = np.array(st.domain_max, float)
        if not np.all(hi > lo):
            raise SceneError(f"the MPM domain box is empty: domain_min {st.domain_min} must be below domain_max "
                             f"{st.domain_max}", "", "domain_min")
        for b in self.granular:
            vmin = b.vertices.min(axis=0)
            vmax = b.vertices.max(axis=0)
            if np.any(vmin < lo) or np.any(vmax > hi):
                raise SceneError(
                    f"{b.name}: the granular body reaches outside the MPM domain box {tuple(lo)}..{tuple(hi)} "
                    f"(its bounds are {tuple(np.round(vmin, 4))}..{tuple(np.round(vmax, 4))}); move it or enlarge "
                    f"the domain", b.name, "vertices")
        for c in self.colliders:
            frames = c.animation if c.animation is not None else c.vertices[None]
            cmin = frames.min(axis=(0, 1))
            cmax = frames.max(axis=(0, 1))
            if np.any(cmax < lo) or np.any(cmin > hi):
                raise SceneError(
                    f"{c.name}: the collider never enters the MPM domain box {tuple(lo)}..{tuple(hi)}; move it inside "
                    f"or enlarge the domain", c.name, "vertices")
        return lo, hi

    def _left_domain(self) -> dict:
        """Stats of an open domain: particles that left the grid box (falling freely, no longer
        simulated), in total and per body. Empty for a walled box."""
        if not self.open_domain:
            return {}
        x, lo, hi = self.solver.x, self.solver.lo, self.solver.hi
        out = np.any((x < lo) | (x > hi), axis=1)
        per = {name: int(out[a:b].sum()) for name, (a, b) in self.ranges.items()}
        return {"left_domain": int(out.sum()), "left_domain_per_body": per}

    def _positions(self) -> dict:
        x = self.solver.x
        return {name: x[a:b].astype(np.float32) for name, (a, b) in self.ranges.items()}

    def _collider_frames(self, c):
        """Collider vertex positions (m) at the current and next frame samples."""
        st = self.scene.settings
        if c.animation is None:
            return c.vertices, c.vertices
        i = min(self.frame - st.frame_start, st.n_frames - 1)
        j = min(i + 1, st.n_frames - 1)
        return c.animation[i].astype(np.float64), c.animation[j].astype(np.float64)

    def _collider_intervals(self) -> int:
        """Rebuild the distance field often enough that colliders move under half a cell between
        rebuilds."""
        worst = 0.0
        for c in self.colliders:
            p0, p1 = self._collider_frames(c)
            worst = max(worst, float(np.linalg.norm(p1 - p0, axis=1).max()))
        return max(1, int(math.ceil(worst / (0.5 * self.dx))))

    def _update_colliders(self, k: int, n: int) -> None:
        key = (self.frame, k, n)
        static = all(c.animation is None for c in self.colliders)
        if static and self._field_key is not None:
            return
        if key == self._field_key:
            return
        field = self.solver.colliders
        field.clear()
        a = (k + 1.0) / n  # end of the sub-interval: particles end the frame outside the final surface
        for c in self.colliders:
            p0, p1 = self._collider_frames(c)
            pos = (1 - a) * p0 + a * p1
            vel = (p1 - p0) / self.frame_dt
            field.add(pos, vel, c.triangles, self._closed[c.name], c.material.thickness, c.material.friction)
        self._field_key = key
