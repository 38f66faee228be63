"""Implicit Euler (or BDF-2) as energy minimisation (book: "Optimization time integrator"):

  x^{n+1} = argmin_x  1/2 |x - x_tilde|_M^2 + h^2 (Psi_el(x) - sum_i m_i g.x_i + kappa B(x) + D_f(x))
                      + kappa_M/2 sum_{i in pen} m_i |x_i - x_hat_i|^2,
  x_tilde = x^n + h v^n, v^{n+1} = (x^{n+1} - x^n) / h.

With ``integrator="bdf2"`` the same objective is solved with h -> 2h/3 and x^n, v^n -> the BDF-2
combinations of the last two states (ipc/bdf2.py); friction's slip is then measured from that x_hat.
Bodies with Material.damping k_d > 0 add h/2 (x - x_hat)^T k_d K(x^n) (x - x_hat) (Rayleigh damping,
ipc/damping.py).

Prescribed vertices (collider vertices, pins) follow their targets x_hat(t^{n+1}): moved directly and
eliminated from the solve when the straight move from x^n is collision free and inverts nothing
(book: "DOF elimination"); otherwise pulled there by the penalty term whose stiffness kappa_M doubles
until they arrive ("Moving boundary conditions"), then snapped and eliminated. Friction is lagged
(normal forces and tangents frozen at x^n, FRICTION_UPDATES re-solves). Units: SI.

The unknown is the DOF array z (n_z, 3) of ``System.dof_map`` (ipc/dof_map.py): the vertex rows plus
4 rows per affine body (solver_server/bodies/). Elastic terms read the vertex rows of z directly;
contact, friction and CCD see x = W z and are pulled back by the chain rule (W^T g, W^T H W); the
affine bodies add their inertia (exact mass matrix), gravity and orthogonality energy on their rows.
Without affine bodies z is the vertex array and every map is the identity.
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np

from .assembly import FreePattern, RegionPattern, free_block
from solver_server.contact.terms import ALL_FRICTION
from solver_server.integrators.bdf2 import History, gravity_rows
from solver_server.integrators.damping import StepDamping
from .linear_solve import LinearSolver
from .newton import projected_newton
from solver_server.model.system import System
from solver_server.integrators.step_stats import StepStats

PIN_TOL = 1e-7          # m: a penalised vertex this close to its target is snapped and eliminated
KAPPA_M0 = 1.0e3        # initial penalty stiffness (dimensionless multiplier of the mass), book's DBC_stiff
FRICTION_UPDATES = 0    # extra lagged-friction re-solves per step (normal forces and tangents refreshed at the
                        # solved x). 1 cost ~15 Newton iterations a step on the folding drape (docs/solver.md)


BODY_STEP_MAX_VERTICES = 256   # per-island step (body_step.py) only while the affine bodies' collision shapes average at
                               # most this many vertices: its broad phase over each full step's path costs more per
                               # iteration than it saves on dense shapes. 100 Mesh cubes of 1,016 vertices, same run:
                               # 23.4 CPU s / frame with it (12 frames, 4 at the cap; ~350 ms / iteration) against
                               # 15.3 without (8 frames, 1 at the cap; ~250 ms); Convex Hull cubes (8 vertices) and the
                               # bin's low-poly props gain from it (docs/solver.md, the body step, item 9)


class IncrementalPotential:
    """The objective of one implicit-Euler step (see module doc)."""

    BODY_BLOCKS = True
    """Contact and friction Hessians of pairs between affine bodies assembled straight into the bodies' 12 x 12
    blocks (contact/body_blocks.py); False: every pair through vertex-space triplets and DofMap.pull_coo (the
    path before; kept for the before/after benchmark and the equality test)."""

    def __init__(self, sys: System, x_n: np.ndarray, v_n: np.ndarray, h: float, gravity: np.ndarray,
                 contact, fixed: np.ndarray, pen_idx: np.ndarray, pen_target: np.ndarray, kappa_m: float,
                 pattern: Optional[FreePattern] = None, x_hat: Optional[np.ndarray] = None,
                 damping: Optional[StepDamping] = None, external=None, cand_list=None):
        """cand_list: the step's contact.terms.CandidateList (a Verlet list) or None (a broad phase per query);
        h: the potential's step h_e (s); x_hat: the velocity reference (default x_n; BDF-2, ipc/bdf2.py),
        x_tilde = x_hat + h v_n; damping: Rayleigh damping of this step (ipc/damping.py) or None;
        external: air drag, force fields and pressure of this step (integrators/external.StepExternal) or None."""
        self.s = sys
        self.D = sys.dof_map
        self.ab = sys.affine
        self.nx = sys.n
        self.h = h
        self.x_n = x_n
        self.x_hat = x_n if x_hat is None else x_hat
        self.x_tilde = self.x_hat + h * v_n
        self.damping = damping
        self.external = external
        self._ext_H = None     # the external terms' free-DOF matrix (constant within the step without pressure)
        self.g = gravity
        self.contact = contact
        self.m = sys.mass_z
        self.dyn = sys.dynamic_z
        self.pen_idx = pen_idx
        self.pen_target = pen_target
        self.kappa_m = kappa_m
        wz = sys.weight_z
        mbar = float(wz[wz > 0].mean()) if (wz > 0).any() else 1.0
        self.pen_w = np.where(wz[pen_idx] > 0, wz[pen_idx], mbar) if len(pen_idx) else np.zeros(0)
        fixed_v = fixed | self.D.is_slaved
        self.fixed = fixed_v
        free_v = ~fixed_v
        self.free_dofs = np.nonzero(np.repeat(free_v, 3))[0]
        self.dof_map = -np.ones(3 * self.D.n_z, np.int64)
        self.dof_map[self.free_dofs] = np.arange(self.free_dofs.size)
        self._body_info = None
        if self.BODY_BLOCKS and contact is not None and self.D.body_arrays() is not None:
            from solver_server.contact.body_blocks import BodyInfo
            grp, wts, G = self.D.body_arrays()
            sl = self.D.is_slaved[:self.nx]
            mode = np.where(sl, 1, np.where(fixed_v[:self.nx], 2, 0)).astype(np.int8)
            self._body_info = BodyInfo(grp, wts, mode, G)
        self._cl = cand_list
        self._ecache = []
        self._derivs = None      # (candidates, x, barrier derivatives) of the last gradient (_barrier_derivs)
        self._g_gravity = None   # gradient's gravity term h^2 m g (3 n_z,), computed once
        self.cands = None
        self._ls_cands = None      # candidates of the last line-search segment
        self._narrow = None        # (list's candidates, lo, hi, its pairs near the segment lo..hi): _narrowed
        self._next_cands = None    # candidates valid at the accepted point (set by accepted())
        self._sub_key = None       # region of the last region_hessian and its (elements, pattern, DOF map)
        self._sub = None
        self.pattern = pattern if pattern is not None else FreePattern(*sys.elastic.patterns(), self.dof_map,
                                                                        self.free_dofs.size)
        M3 = np.repeat(np.where(self.dyn, self.m, 0.0), 3)
        self.M3 = M3
        self.mass_dofs = np.repeat(wz, 3)[self.free_dofs]
        # body of each free DOF for the stopping rule's per-body net-force test (newton.py); every extra
        # row of z (affine-body translation / L A^T rows) is a group of its own
        nb = int(sys.vertex_body.max()) + 1 if sys.n else 0
        grp = np.concatenate([np.asarray(sys.vertex_body, np.int64), nb + np.arange(self.D.n_z - sys.n)])
        self.dof_group = np.repeat(grp, 3)[self.free_dofs]

    # --- pieces --------------------------------------------------------------------------------
    def _energy(self, x: np.ndarray, cands) -> float:
        """The objective at x with the contact candidates cands. The last two values are kept (keyed by the
        candidate set and x itself): the line search and the bent-step tries (newton.py) ask for E at the
        iteration's start point once per try, with the same candidates while the Verlet list holds."""
        for k in self._ecache:
            if k[0] is cands and k[1].shape == x.shape and np.array_equal(k[1], x):
                return k[2]
        e = self._energy_eval(x, cands)
        self._ecache = [self._ecache[-1], (cands, np.array(x), e)] if self._ecache else [(cands, np.array(x), e)]
        return e

    def _energy_eval(self, x: np.ndarray, cands) -> float:
        h2 = self.h * self.h
        d = (x - self.x_tilde)[self.dyn]
        m = self.m[self.dyn]
        e = 0.5 * float((m[:, None] * d * d).sum()) - h2 * float((m[:, None] * x[self.dyn] * self.g).sum())
        if self.ab is not None:
            e += self.ab.energy(x, self.x_tilde, self.g, h2)
        el = self.s.elastic.energy(x[:self.nx])
        if not np.isfinite(el):
            return np.inf
        e += h2 * el
        if self.damping is not None:
            e += self.h * self.damping.energy(x[:self.nx] - self.x_hat[:self.nx])
        if self.external is not None:
            e += self.external.energy(self.D.to_x(x))
        if len(self.pen_idx):
            dp = x[self.pen_idx] - self.pen_target
            e += 0.5 * self.kappa_m * float((self.pen_w[:, None] * dp * dp).sum())
        if self.contact is not None:
            xs = self.D.positions(x)
            e += h2 * self.contact.energy(xs, cands)
            e += h2 * self.contact.friction_energy(xs, self.h)
        return e

    def energy(self, x: np.ndarray) -> float:
        cands = self.contact.candidates(self.D.positions(x)) if self.contact is not None else None
        return self._energy(x, cands)

    def prepare(self, x: np.ndarray) -> None:
        """Contact candidates at x: the previous line-search segment's set when x is its accepted
        point (every pair within dhat anywhere on the segment is in it), else a fresh broad phase."""
        if self.contact is None:
            return
        if self._next_cands is not None:
            self.cands, self._next_cands = self._next_cands, None
        elif self._cl is not None:
            self.cands = self._cl.at(self.D.positions(x))
        else:
            self.cands = self.contact.candidates(self.D.positions(x))

    def accepted(self, x: np.ndarray) -> None:
        """x was accepted by the line search on the last segment: reuse its candidates at x."""
        self._next_cands = self._ls_cands

    def gradient(self, x: np.ndarray) -> np.ndarray:
        h2 = self.h * self.h
        g = (self.M3 * (x - self.x_tilde).ravel())
        if self._g_gravity is None:   # h^2 m g per DOF: the same for every iterate of the step
            self._g_gravity = h2 * (np.where(self.dyn, self.m, 0.0)[:, None] * self.g[None, :]).ravel()
        g -= self._g_gravity
        g[:3 * self.nx] += h2 * self.s.elastic.gradient(x[:self.nx])
        if self.damping is not None:
            g[:3 * self.nx] += self.h * self.damping.gradient(x[:self.nx] - self.x_hat[:self.nx])
        if self.external is not None:
            g += self.D.pull_gradient(self.external.gradient(self.D.to_x(x)))   # W^T g (attachments to stiff bodies)
        if self.ab is not None:
            g += self.ab.gradient(x, self.x_tilde, self.g, h2)
        if len(self.pen_idx):
            gp = np.zeros_like(x)
            gp[self.pen_idx] = self.kappa_m * self.pen_w[:, None] * (x[self.pen_idx] - self.pen_target)
            g += gp.ravel()
        if self.contact is not None:
            xs = self.D.positions(x)
            if self._body_info is not None:
                gv, gb, _, _ = self._barrier_derivs(x, xs)
                gc = h2 * gv
            else:
                gc = h2 * self.contact.gradient_then_hessian(xs, self.cands)
            gf = self.contact.friction_gradient(xs, self.h)
            if gf is not None:
                gc = gc + h2 * gf
            g += self.D.pull_gradient(gc)
            if self._body_info is not None and len(gb):
                rows = self.D.group_row0[:, None] + np.arange(4)[None, :]
                g3 = g.reshape(-1, 3)
                g3[rows.ravel()] += h2 * gb.reshape(-1, 3)
        return g

    exact_friction = False
    """True: the friction Hessian without the stiff-body majorizer (contact/friction.py friction_hessian), the exact
    projected one; Newton sets it once the step residual has converged when newton.EXACT_TAIL is on."""

    def slip_reversals(self, x: np.ndarray, p: np.ndarray) -> int:
        """Friction pairs whose slip the step p (DOF rows, m) moves to another branch of f0 (contact/friction.py
        slip_reversals; 0 without friction)."""
        if self.contact is None or self.contact.fs is None:
            return 0
        return self.contact.slip_reversals(self.D.positions(x), self.D.positions(x + p), self.h)

    def slip_depth_bound(self, x: np.ndarray, p: np.ndarray, depth: float):
        """(t, n): the fraction of the step p (DOF rows, m) over which no friction pair's slip changes branch of f0,
        and how many pairs bound it (contact/friction.py slip_depth_bound; (1, 0) without friction)."""
        if self.contact is None or self.contact.fs is None:
            return 1.0, 0
        return self.contact.slip_depth_bound(self.D.positions(x), self.D.positions(x + p), self.h, depth)

    def _barrier_derivs(self, x: np.ndarray, xs: np.ndarray):
        """contact.derivatives_bodies at x (the barrier's gradient and Hessian in one pass), kept for the
        hessian(x) that follows gradient(x) at the same iterate."""
        c = self._derivs
        if c is not None and c[0] is self.cands and c[1].shape == x.shape and np.array_equal(c[1], x):
            return c[2]
        d = self.contact.derivatives_bodies(xs, self.cands, self._body_info)
        self._derivs = (self.cands, np.array(x), d)
        return d

    def hessian(self, x: np.ndarray):
        h2 = self.h * self.h
        parts = self.s.elastic.hessian_parts(x[:self.nx])
        diag = self.M3.copy()
        if len(self.pen_idx):
            dp = np.zeros_like(x)
            dp[self.pen_idx] = self.kappa_m * self.pen_w[:, None]
            diag += dp.ravel()
        if self.damping is not None:
            v = np.concatenate(parts) if parts else np.zeros(0)
            H = self.pattern.matrix_parts([h2 * v + self.h * self.damping.vals], 1.0, diag[self.free_dofs])
        else:
            H = self.pattern.matrix_parts(parts, h2, diag[self.free_dofs])
        nf = self.free_dofs.size
        if self.external is not None:
            if self._ext_H is None or self.external.varies:
                self._ext_H = free_block(*self.D.pull_coo(*self.external.hessian(self.D.to_x(x))), self.dof_map, nf)
            H = H + self._ext_H
        if self.ab is not None:
            ra, ca, va = self.ab.hessian(x, h2)
            H = H + free_block(ra, ca, va, self.dof_map, nf)
        if self.contact is not None:
            xs = self.D.positions(x)
            if self._body_info is not None:
                return H + self._contact_hessian_bodies(x, xs, nf)
            rb, cb, vb = self.D.pull_coo(*self.contact.hessian(xs, self.cands))
            if len(rb):
                H = H + free_block(rb, cb, h2 * np.asarray(vb), self.dof_map, nf)
            fh = self.contact.friction_hessian(xs, self.h, majorize=not self.exact_friction)
            if fh is not None and len(fh[0]):
                fr, fc, fv = self.D.pull_coo(*fh)
                H = H + free_block(fr, fc, h2 * np.asarray(fv), self.dof_map, nf)
        return H

    def _contact_hessian_bodies(self, x: np.ndarray, xs: np.ndarray, nf: int):
        """h^2 (barrier + friction Hessian) over the free DOFs, the pairs between affine bodies assembled into
        body blocks (contact/body_blocks.py), the others pulled from vertex triplets as before."""
        h2 = self.h * self.h
        parts = [self._barrier_derivs(x, xs)[2:]]
        fh = self.contact.friction_hessian_bodies(xs, self.h, self._body_info, majorize=not self.exact_friction)
        if fh is not None:
            parts.append(fh)
        rows, cols, vals = [], [], []
        for (rv, cv, vv), (blk, ga, gb) in parts:
            if len(rv):
                r, c, v = self.D.pull_coo(rv, cv, vv)
                rows.append(r)
                cols.append(c)
                vals.append(v)
            if len(blk):
                r, c, v = self.D.emit_group_blocks(blk, ga, gb)
                rows.append(r)
                cols.append(c)
                vals.append(v)
        if not rows:
            return free_block(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), self.dof_map, nf)
        return free_block(np.concatenate(rows), np.concatenate(cols), h2 * np.concatenate(vals), self.dof_map, nf)

    @property
    def local_refinement(self) -> bool:
        """Newton's local refinement (newton.py) runs without affine bodies only: with them the region block
        is the whole Hessian sliced, and the stiff-body scenes (issue 19) were measured without it."""
        return self.ab is None

    def _region_setup(self, R: np.ndarray):
        """(elastic subset, RegionPattern, free-DOF -> local map, vertex mask) of the free-DOF indices R (sorted),
        cached for the last R (Newton's local refinement solves one region for up to LOCAL_ITERS iterations)."""
        key = R.tobytes()
        if self._sub_key != key:
            dofs = self.free_dofs[R]
            lmap = -np.ones(3 * self.D.n_z, np.int64)
            lmap[dofs] = np.arange(R.size)
            verts = np.zeros(self.D.n_z, bool)
            verts[dofs // 3] = True
            vloc = -np.ones(self.D.n_z, np.int64)
            vloc[dofs[::3] // 3] = np.arange(R.size // 3)
            sub = self.s.elastic.subset(verts[:self.nx])
            groups = [el for _, el in sub.element_groups() if len(el)]
            self._sub = (sub, RegionPattern.from_elements(groups, vloc, R.size // 3), lmap, verts[:self.nx])
            self._sub_key = key
        return self._sub

    def region_hessian(self, x: np.ndarray, R: np.ndarray, cands=None, friction=ALL_FRICTION):
        """The block of the Newton matrix at x (N/m, as ``hessian``) over the free-DOF indices R (sorted), as a
        CSR matrix of size R x R, for Newton's local refinement (newton.py). Only the elastic elements with a
        vertex in R are evaluated (the others add nothing to the block) and the contact and friction pairs
        are assembled into the block alone. The whole matrix, sliced, when damping, external terms or affine
        bodies are on. cands / friction: the region's contact candidates and frozen friction pairs (default:
        the current candidates' pairs touching R, every friction pair)."""
        if self.damping is not None or self.external is not None or self.ab is not None:
            return self.hessian(x).tocsc()[R][:, R].tocsr()
        sub, pat, lmap, vin = self._region_setup(R)
        h2 = self.h * self.h
        parts = sub.hessian_parts(x[:self.nx])
        diag = self.M3.copy()
        if len(self.pen_idx):
            dp = np.zeros_like(x)
            dp[self.pen_idx] = self.kappa_m * self.pen_w[:, None]
            diag += dp.ravel()
        H = pat.matrix_parts(parts, h2, diag[self.free_dofs[R]])
        if self.contact is not None:
            xs = self.D.to_x(x)
            rb, cb, vb = self.D.pull_coo(*self.contact.hessian(xs, self._region_pairs(vin) if cands is None
                                                                else cands))
            if len(rb):
                H = H + free_block(rb, cb, h2 * np.asarray(vb), lmap, R.size)
            fh = self.contact.friction_hessian(xs, self.h, friction)
            if fh is not None and len(fh[0]):
                fr, fc, fv = self.D.pull_coo(*fh)
                H = H + free_block(fr, fc, h2 * np.asarray(fv), lmap, R.size)
        return H

    def region(self, R: np.ndarray):
        """The subproblem over the free-DOF indices R (sorted, whole vertices), every other DOF held, as an
        objective that evaluates only the terms reaching R (region.RegionObjective), or None where that is
        not implemented (damping, external terms, affine bodies, attachment exclusions): the caller then
        works on the whole objective."""
        if self.damping is not None or self.external is not None or self.ab is not None:
            return None
        if self.contact is not None and self.contact.excluded is not None:
            return None
        from .region import RegionObjective
        return RegionObjective(self, R)

    def _region_pairs(self, vin: np.ndarray):
        """The current contact candidates with a vertex in the mask vin (n,): the only pairs whose barrier
        Hessian reaches the region's block."""
        from solver_server.contact.broad_phase import touching
        return touching(self.cands, self.contact.mesh, vin)

    def search_direction(self, x: np.ndarray, p: np.ndarray) -> np.ndarray:
        """A bent full step for the Newton step p: affine bodies' steps bent towards rotations
        (bodies/affine.py, rotation_following_step); p itself (no bent step) without bodies."""
        if self.ab is None:
            return p
        return self.ab.search_step(x, p)

    @property
    def slip_tail(self) -> bool:
        """Newton's bounded exact friction tail (newton.SLIP_TAIL) runs where the per-island body step does (step_groups):
        not on cloth, soft solids or rods (whose friction Hessian is the exact one already), nor on bodies with collision
        shapes of more than BODY_STEP_MAX_VERTICES vertices on average (measured slower there, docs/solver.md "The body
        step", item 16)."""
        return self.step_groups is not None

    @property
    def step_groups(self):
        """(n_z,) int64: the contact-mesh body of each row of z (a vertex row its vertex's body, an affine
        body's 4 rows the body of its contact vertices) for Newton's per-island step (body_step.py); None
        without affine bodies or contact, or when the bodies' collision shapes average more than
        BODY_STEP_MAX_VERTICES vertices (then Newton's search is the one before, byte for byte)."""
        if self.ab is None or self.contact is None or self.ab.n == 0:
            return None
        if self.D.slaved.size > BODY_STEP_MAX_VERTICES * self.ab.n:
            return None
        if getattr(self, "_step_groups", None) is None:
            vb = np.asarray(self.contact.mesh.vertex_body, np.int64)
            g = -np.ones(self.D.n_z, np.int64)
            g[:self.nx] = vb
            for b in range(self.ab.n):
                r = int(self.ab.row0[b])
                g[r:r + 4] = vb[int(self.ab.vertex_offset[b])]
            self._step_groups = g
        return self._step_groups

    @property
    def n_groups(self) -> int:
        return int(self.contact.mesh.body_static.shape[0])

    @property
    def group_static(self) -> np.ndarray:
        return np.asarray(self.contact.mesh.body_static, bool)

    def max_step(self, x: np.ndarray, p: np.ndarray) -> float:
        """CCD bound of the step x -> x + p. With the step's candidate list (affine bodies only), the CCD of the
        list's pairs for this segment (CandidateList.segment: every pair that can come within dhat on it, the
        same set line_search_energy then reads for x + a p, a <= 1), else a swept broad phase and CCD."""
        a = 1.0
        if self.contact is not None:
            xs = self.D.positions(x)
            ps = self.D.positions(p)
            if self._cl is not None and self.contact.excluded is None:
                # the part of the step inside the present list first: an impact there bounds the step without a
                # new broad phase (a Newton step cut short by CCD mostly is); when that part is clear, the list
                # is rebuilt for the whole segment
                t_in = self._cl.reach(xs, ps)
                if 0.0 < t_in < 1.0:
                    a_in = self.contact.max_step_on(xs, t_in * ps, self._cl.cands)
                    if a_in < 1.0:
                        return min(a, a_in * t_in)
                xs1 = self.D.positions(x + p)
                cands = self._narrowed(self._cl.segment(xs, xs1), xs, xs1)
                a = min(a, self.contact.max_step_on(xs, ps, cands))
            else:
                a = min(a, self.contact.max_step(xs, ps))
        return a

    def _narrowed(self, cands, xs0: np.ndarray, xs1: np.ndarray):
        """The step list's pairs that can come within dhat on xs0 -> xs1 (ContactTerms.narrowed). The last one is
        kept with the boxes of its segment: a later segment of the same list whose two ends lie in them (the line
        search's x0 -> x0 + a p after the CCD of x0 -> x0 + p) reuses it, as every vertex of such a segment stays
        in its box."""
        nl = self._narrow
        if nl is not None and nl[0] is cands:
            bp = self.contact.C.broad_phase
            half = np.zeros(self._cl.nb)
            if (bp.within_boxes(xs0, nl[1], nl[2], self._cl.vb, half)
                    and bp.within_boxes(xs1, nl[1], nl[2], self._cl.vb, half)):
                return nl[3]
        sub = self.contact.narrowed(cands, xs0, xs1)
        self._narrow = (cands, np.minimum(xs0, xs1), np.maximum(xs0, xs1), sub)
        return sub

    def line_search_energy(self, x0: np.ndarray, x1: np.ndarray):
        if self.contact is None:
            cands = None
        elif self._cl is not None:
            xs0, xs1 = self.D.positions(x0), self.D.positions(x1)
            cands = self._narrowed(self._cl.segment(xs0, xs1), xs0, xs1)
        else:
            cands = self.contact.candidates_swept(self.D.positions(x0), self.D.positions(x1))
        self._ls_cands = cands
        return lambda x: self._energy(x, cands)

    def energy_on(self, cands):
        """E(x) with the contact candidates cands, which must hold every pair within dhat at the x it is called
        with (Newton's per-island step, body_step.py); cands become the accepted point's candidates."""
        self._ls_cands = cands
        return lambda x: self._energy(x, cands)

    def valid(self, x: np.ndarray) -> bool:
        if self.ab is not None and self.ab.min_det(x) <= 0.0:
            return False
        return self.s.elastic.min_tet_volume_ratio(x[:self.nx]) > 0.0


class TimeStepper:
    """Advances the system's state (x, v) by substeps of length h."""

    VERLET_SKIN = None
    """Skin (in dhat) of the Newton iterations' candidate list (contact.terms.SKIN when None; 0: a broad phase per
    query, the path before)."""

    VERLET_ALL = True
    """The candidate list on every scene with contact (issue 23, ninth session of 2026-11-27: cloth, soft solids and
    rods reuse it too; docs/solver.md "The converged default: cost per iteration"); False: only on scenes whose only
    moving parts are affine bodies (the path before, for the before / after benchmark)."""

    def __init__(self, sys: System, h: float, gravity, newton_tol: float, max_iter: int, contact=None,
                 linear_solver: str = "direct", integrator: str = "implicit_euler",
                 damping: Optional[np.ndarray] = None, external=None):
        """damping: (N,) s per vertex Rayleigh coefficient k_d (ipc/damping.py), None or all 0: off;
        external: integrators/external.ExternalForces (air drag, force fields, pressure) or None."""
        self.s = sys
        self.h = float(h)
        self.gravity = np.asarray(gravity, np.float64)
        self.tol = float(newton_tol)
        self.max_iter = int(max_iter)
        self.contact = contact
        self.linear_solver = LinearSolver(linear_solver)
        self._patterns = {}  # fixed-vertex mask -> FreePattern of the elastic Hessian
        self.D = sys.dof_map
        self.x = sys.z0.copy()   # the DOF array z (n_z, 3); its first N rows are the vertex positions
        self.v = sys.vz0.copy()
        self.static_fixed = np.zeros(self.D.n_z, bool)
        self.history = History(integrator, gravity_rows(sys, self.gravity))
        self.external = external
        self.kd = None if damping is None or not np.any(np.asarray(damping) > 0) else np.asarray(damping, np.float64)

    def _try_direct(self, x: np.ndarray, idx: np.ndarray, target: np.ndarray) -> bool:
        """Move the prescribed vertices idx straight to target if that path is collision and inversion
        free; modifies x in place and returns True on success."""
        if not len(idx):
            return True
        p = np.zeros_like(x)
        p[idx] = target - x[idx]
        if not np.any(p):
            return True
        if self.contact is not None and self.contact.max_step(self.D.to_x(x), self.D.to_x(p)) < 1.0:
            return False
        xn = x + p
        if self.s.elastic.min_tet_volume_ratio(xn[:self.s.n]) <= 0.0:
            return False
        x[idx] = target
        self.D.sync(x)
        return True

    def _pattern(self, fixed: np.ndarray) -> FreePattern:
        key = np.packbits(fixed).tobytes()
        pat = self._patterns.get(key)
        if pat is None:
            free = np.nonzero(np.repeat(~(fixed | self.D.is_slaved), 3))[0]
            dof_map = -np.ones(3 * self.D.n_z, np.int64)
            dof_map[free] = np.arange(free.size)
            if len(self._patterns) > 4:
                self._patterns.clear()
            pat = self._patterns[key] = FreePattern(*self.s.elastic.patterns(), dof_map, free.size)
        return pat

    def step(self, frame_end: float, start: Optional[np.ndarray] = None) -> StepStats:
        """One implicit-Euler (or BDF-2) step ending at (fractional) frame ``frame_end``. ``start``: the
        first Newton iterate (a DOF array like ``x``, intersection free and with no inverted element,
        e.g. another solver's approximate step); default x^n."""
        t0 = time.perf_counter()
        s = self.s
        st = StepStats()
        x_n = self.x.copy()
        x = self.x.copy() if start is None else np.array(start, np.float64)
        x_hat, v_hat, h_e = self.history.targets(x_n, self.v, self.h)
        if s.rest_schedule is not None:     # keyed Shrink: the rest shape of this step's end time
            s.rest_schedule.apply(s.elastic, frame_end - s.frame_start)
        damp = StepDamping(s.elastic, x_n[:s.n], self.kd) if self.kd is not None else None
        ext = self.external.for_step(x_n, x_hat, h_e, frame_end) if self.external is not None else None
        fixed = np.zeros(self.D.n_z, bool)
        pen_idx = np.zeros(0, np.int64)
        pen_t = np.zeros((0, 3))
        if len(s.bc_index):
            target = s.bc_target(frame_end)
            if self._try_direct(x, s.bc_index, target):
                fixed[s.bc_index] = True
            else:
                pen_idx, pen_t = s.bc_index, target
        if self.contact is not None:
            xs_n = self.D.to_x(x_n)
            self.contact.friction_setup(xs_n, self.contact.candidates(xs_n))
            self.contact.x_prev = np.array(self.D.to_x(x_hat))   # slip velocity (x - x_hat) / h_e
        kappa_m = KAPPA_M0
        cl = None
        if self.contact is not None and (self.VERLET_ALL or (s.affine is not None and not s.dynamic_z[:s.n].any())):
            from solver_server.contact.terms import CandidateList, SKIN
            skin = SKIN if self.VERLET_SKIN is None else self.VERLET_SKIN
            if skin > 0.0:
                cl = CandidateList(self.contact, skin * self.contact.dhat)
        updates = FRICTION_UPDATES if (self.contact is not None and self.contact.fs is not None) else 0
        for _round in range(60):
            ip = IncrementalPotential(s, x_n, v_hat, h_e, self.gravity, self.contact, fixed, pen_idx, pen_t,
                                      kappa_m, self._pattern(fixed), x_hat=x_hat, damping=damp,
                                      external=ext, cand_list=cl)
            res = projected_newton(ip, x, h_e, self.tol, self.max_iter, self.linear_solver)
            x = res.x
            st.newton_iterations += res.iterations
            st.local_solves += res.local_solves
            st.converged = st.converged and res.converged
            if not res.converged:
                st.residual = max(st.residual, res.residual, res.force_residual)
            if len(pen_idx):
                err = np.linalg.norm(x[pen_idx] - pen_t, axis=1)
                close = err < PIN_TOL
                # snap the ones that are close (and those whose remaining path is clear)
                if self._try_direct(x, pen_idx, pen_t):
                    fixed[pen_idx] = True
                    pen_idx, pen_t = np.zeros(0, np.int64), np.zeros((0, 3))
                    continue
                if close.all():
                    break
                kappa_m *= 2.0
                continue
            if updates > 0 and self.contact is not None:
                updates -= 1
                xs = self.D.to_x(x)
                self.contact.friction_setup(xs, self.contact.candidates(xs))
                self.contact.x_prev = np.array(self.D.to_x(x_hat))
                continue
            break
        self.D.sync(x)
        self.history.push(x_n, self.v)
        self.v = (x - x_hat) / h_e
        self.x = x
        if self.contact is not None:
            xs = self.D.to_x(x)
            cands = self.contact.candidates(xs)
            st.contacts = self.contact.count_active(xs, cands)
            st.min_distance = self.contact.min_distance(xs, cands)
        st.seconds = time.perf_counter() - t0
        return st
