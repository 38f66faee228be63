"""One implicit-Euler (or BDF-2) step by block descent (the "fast" solver quality).

Same objective as the Newton stepper (solvers/newton/integrator.py): inertia + elasticity + kappa x
barrier + lagged friction, y = x^n + h v^n + h^2 g, friction frozen at x^n. The step starts every
free vertex as far along its predicted move as CCD allows (inertial_guess.py), then alternates
contact detection (bounds.py: admissible sets and barrier pairs) with batches of colour sweeps
(sweep.run_sweeps) and, between batches, a global stretching correction (global_correction.py). It
stops when a sweep's largest residual length (|g_i| h^2 / m_i, the move a vertex's force would cause
on its inertia alone; the body version for affine bodies) is below ``tol`` (m) with every prescribed
vertex (collider, pin) within PRESCRIBED_TOL of its target and every keyframed body at its target, or
when the sweep budget (max_sweeps, plus up to PRESCRIBED_EXTRA sweeps while a collider or pin has
not arrived) is spent; the size of the sweeps' moves is not a stop test (on a stack of stiff soft
cubes the moves fall below tol long before the forces balance). Before a detection, a keyframed
collider that is not at its target first takes its remaining move at once, carrying the free cloth
in its way along, as far as CCD allows (collider_carry.py); whatever is left it makes inside its
admissible sets in the sweeps, so a keyframed collider can never push through cloth; if it cannot
reach its target within the budget the step reports converged=False (the next step continues from
where it stopped). Isolated bodies end the step with their exact translation (free_translation.py).

With ``integrator="bdf2"`` the objective is BDF-2's (integrators/bdf2.py): y = x_hat + h_e v_hat + h_e^2 g,
1/h_e^2 in front of the inertia, friction slip measured from x_hat, v = (x - x_hat) / h_e. The sweeps,
admissible sets and CCD are unchanged and still start from the intersection-free x^n.
"""
from __future__ import annotations

import time
from typing import Optional

import numba
import numpy as np

from solver_server.threads import threads_for
from solver_server.integrators.bdf2 import History, gravity_rows
from solver_server.contact.terms import EPS_V
from solver_server.integrators.step_stats import StepStats
from solver_server.model.system import System
from .affine_block import AffineBlocks, affine_initial_guess, drop_vertices
from .bounds import GAMMA, PairCache, detect, unbounded
from .collider_carry import KEEP_DHAT, ColliderCarry
from .dihedral_cache import dihedral_cache
from .free_translation import FreeTranslation
from .global_correction import GlobalCorrection
from .incidence import color_arrays, elements
from .inertial_guess import inertial_guess, predicted_positions
from .sweep import initial_guess, run_sweeps
from .vertex_contact import FrictionPack, contact_pack, friction_pack, no_contact

STEPS_PER_SUBSTEP = 4  # block-descent steps per solver step of the scene (Settings.substeps): h = dt / substeps / 4
SWEEP_BUDGET = 16      # colour-sweep budget per block-descent step (VBD: few sweeps, small steps; with the global
                       # correction every 4 sweeps, 16 lands closer to the converged step than 25 without, at about
                       # the same cost; 12 left a stack of two soft cubes moving at 1.2 cm/s after 12 frames)
PRESCRIBED_TOL = 1e-7   # m, a prescribed vertex this close to its target has arrived
PRESCRIBED_EXTRA = 200  # extra sweeps a step may spend to bring colliders and pins to their keyframes:
                        # a keyframed object must be where the artist put it
CHEBYSHEV_RHO = 0.0     # spectral-radius estimate for Chebyshev acceleration (0: off)
QUERY_EDGE_FRACTION = 0.5  # broad-phase distance cap, in median edge lengths
SWEEP_PARALLEL_MIN_VERTICES = 2000  # sweeps run on numba's threads from this many vertices (colours of >= 200)
SWEEP_BUSY_OTHERS = 0.5  # ... when the load average (our own busy thread counts ~1) leaves >= half a core
                         # idle: a sweep batch is long enough (tens of ms) that a starved worker costs
                         # less than the second core gains (measured: 64^2 drape, load ~1.0-1.4)
INERTIAL_GUESS = True  # start each step from inertial_guess (CCD per vertex) instead of the first detection's balls
GLOBAL_CORRECTION = True  # between batches of sweeps, one pre-factorised stretching correction (global_correction.py)
CORRECTION_EVERY = 4      # sweeps per batch when corrections are on (a batch also ends at a re-detection)
FREE_TRANSLATION = True   # end each step with the exact translation step of free clusters (free_translation.py)
CUT_FRACTION = 0.02   # re-detect contact at once when this fraction of the vertices was cut in one sweep
COLLIDER_CARRY = True  # before a detection, move keyframed colliders to their targets carrying the free
                       # vertices in their way, as far as CCD allows (collider_carry.py); False: only the
                       # sweeps move colliders (sweep._move_colliders, ~gamma s_k per detection in contact)


class BlockDescentStepper:
    """Advances (x, v) of a System by implicit-Euler steps of length h with block descent."""

    def __init__(self, sys: System, h: float, gravity, tol: float, max_sweeps: int, contact=None,
                 rho: float = CHEBYSHEV_RHO, gamma: float = GAMMA, integrator: str = "implicit_euler"):
        self.s = sys
        self.h = float(h)
        self.gravity = np.asarray(gravity, np.float64)
        self.tol = float(tol)
        self.max_sweeps = int(max_sweeps)
        self.contact = contact
        self.rho = float(rho)
        self.gamma = float(gamma)
        self.x = sys.z0.copy()   # the DOF array z: N vertex rows, then 4 rows per affine body
        self.v = sys.vz0.copy()
        self.v_prev = None      # vertex velocities of the step before (m/s), for predicted_positions
        self.history = History(integrator, gravity_rows(sys, self.gravity))   # BDF-2's previous state
        h_e = self.history.targets(self.x, self.v, self.h)[2]                 # the potential's step (s)
        n = sys.n
        el = sys.elastic
        self.n_elements = el.n_elements()
        self.col_start, self.col_verts = color_arrays(el, n)
        self.n_colors = len(self.col_start) - 1
        self.EL = elements(el, n)
        self.SH = dihedral_cache(self.EL.shells, n)
        self.presc = np.zeros(n, np.bool_)
        self.presc[sys.bc_index[sys.bc_index < n]] = True
        # affine bodies: one 12-DOF block each (affine_block.py); their slaved vertices are prescribed
        # for the vertex sweep and left out of the colours
        self.affine = AffineBlocks(sys)
        self.presc |= self.affine.slaved
        self.col_start, self.col_verts = drop_vertices(self.col_start, self.col_verts, self.affine.slaved)
        # colliders move as rigid groups (one group per collider body), pins one by one
        self.group = -np.ones(n, np.int32)
        gi = 0
        for b in sys.blocks:
            if b.role == "collider":
                self.group[b.offset:b.offset + b.n_nodes] = gi
                gi += 1
        self.n_groups = gi
        self.on_surface = np.zeros(n, bool)
        if contact is not None:
            m = contact.mesh
            self.on_surface[m.faces.ravel()] = True
            self.on_surface[m.edges.ravel()] = True
            e = sys.x0[m.edges[:, 1]] - sys.x0[m.edges[:, 0]]
            self.edge_scale = float(np.median(np.linalg.norm(e, axis=1))) if len(e) else 1.0
        # one broad phase serves the detections (and the friction setup) while vertices stay within its margin
        self.pairs = PairCache(contact.mesh, self.on_surface, self.edge_scale) if contact is not None else None
        self.detections = 0
        self.cut_limit = max(8, int(CUT_FRACTION * n))
        free = sys.dynamic[:n] & ~self.presc
        self.correction = GlobalCorrection(self.EL, n, sys.mass[:n], h_e, free) if GLOBAL_CORRECTION else None
        self.corrections = 0
        self.free_moves = FreeTranslation(sys, self.presc, sys.mass) if FREE_TRANSLATION else None
        self.carry = None
        if contact is not None and COLLIDER_CARRY and self.n_groups:
            in_tet = np.zeros(n, bool)
            in_tet[self.EL.tets.ravel()] = True
            carriable = self.on_surface & sys.dynamic[:n] & ~self.presc & ~in_tet
            self.carry = ColliderCarry(contact.mesh, self.group, self.n_groups, carriable, KEEP_DHAT * contact.dhat)
        self.carry_passes = 0

    # --- checkpoint -------------------------------------------------------------------------------
    def checkpoint(self) -> dict:
        """Everything besides (x, v) that shapes the next step, as arrays for a resume file: the last
        step's velocities (predicted_positions' adaptive start) and the bodies' (start_rows), BDF-2's
        previous state, and the contact list's build point (PairCache). A bake resumed from it takes
        the same steps as the uninterrupted one, bit for bit."""
        out = self.history.checkpoint()
        if self.v_prev is not None:
            out["fast_v_prev"] = self.v_prev.copy()
        if self.affine.v_prev is not None:
            out["fast_body_v_prev"] = self.affine.v_prev.copy()
        if self.pairs is not None and self.pairs.x_ref is not None:
            out["fast_pairs_x_ref"] = self.pairs.x_ref.copy()
            out["fast_pairs_r_built"] = np.array(self.pairs.r_built)
        return out

    def restore(self, state) -> None:
        """Set what checkpoint() saved from ``state`` (which also holds x, v); a key it lacks (an older
        resume file) starts that piece afresh, as a first step does."""
        self.history.restore(state)
        vp = state.get("fast_v_prev")
        self.v_prev = None if vp is None else np.array(vp, np.float64)
        bp = state.get("fast_body_v_prev")
        self.affine.v_prev = None if bp is None else np.array(bp, np.float64)
        if self.pairs is not None:
            xr = state.get("fast_pairs_x_ref")
            if xr is not None and "fast_pairs_r_built" in state:
                self.pairs.rebuild(np.asarray(xr, np.float64), float(state["fast_pairs_r_built"]))
            else:
                self.pairs.x_ref, self.pairs.ps, self.pairs.r_built = None, None, 0.0

    # --- pieces -----------------------------------------------------------------------------------
    def _friction_pack(self, x_n: np.ndarray, eps: float, x_ref: Optional[np.ndarray] = None) -> FrictionPack:
        """Lagged friction set up at x_n; slip measured from x_ref (default x_n; BDF-2: x_hat)."""
        x_ref = x_n if x_ref is None else np.ascontiguousarray(x_ref)
        ct = self.contact
        fs = None
        if ct is not None:
            ct.friction_setup_pairs(x_n, self.pairs.near(x_n, ct.dhat))
            fs = ct.fs
        return friction_pack(fs, self.s.n, x_ref, eps)

    def _query_radius(self, x: np.ndarray, target: np.ndarray) -> float:
        """Broad-phase distance (m): large enough that a vertex can make its whole predicted move
        in one detection (ball radius gamma r), capped at QUERY_EDGE_FRACTION edge lengths (the
        candidate count grows with the square of r / edge length)."""
        d = np.sqrt(((target - x) ** 2).sum(1)).max() if len(x) else 0.0
        return float(min(d / self.gamma, QUERY_EDGE_FRACTION * self.edge_scale))

    def _arrived(self, x: np.ndarray, target: np.ndarray) -> bool:
        """Every prescribed vertex (collider, pin) is at its target."""
        i = self.s.bc_index
        return not len(i) or float(np.abs(x[i] - target[i]).max()) <= PRESCRIBED_TOL

    # --- the step ---------------------------------------------------------------------------------
    def step(self, frame_end: float, stats: bool = True) -> StepStats:
        """One step to the (fractional) frame ``frame_end``. ``stats``: also count the contacts and
        the smallest contact distance at the end (a broad phase of its own; the backend asks for it
        on a frame's last step only). converged is False only when a collider or pin could not reach
        its keyframe: spending the sweep budget is Fast's normal mode (a fixed-iteration solver, as
        VBD), not a failure the artist should be warned about; the residual is in last_step_size."""
        t0 = time.perf_counter()
        s = self.s
        st = StepStats()
        h = self.h
        x_n = self.x.copy()
        N = s.n
        dyn = s.dynamic & ~self.presc
        x_hat, v_hat, h_e = self.history.targets(x_n, self.v, h)
        y = x_n.copy()
        y[:N][dyn] = x_hat[:N][dyn] + (h_e * v_hat[:N][dyn] + h_e * h_e * self.gravity)   # implicit Euler: as before
        self.affine.inertia_target(x_n, self.v, h, self.gravity, y)
        if h_e != h:   # BDF-2 body rows (the adaptive start rows above stay those of x^n, v^n)
            y[N:] = x_hat[N:] + h_e * v_hat[N:]
            y[N::4] += h_e * h_e * self.gravity
            s.dof_map.sync(y)
        target = y.copy()
        if len(s.bc_index):
            target[s.bc_index] = s.bc_target(frame_end)
        qt = self.affine.query_targets(y, target)
        x = x_n.copy()
        AB = self.affine.pack(x, y, target)
        xz, tz, x, y, target = x, target, x[:N], y[:N], target[:N]   # vertex rows: views into z
        ct = self.contact
        dhat = ct.dhat if ct is not None else 0.0
        kappa = ct.kappa if ct is not None else 0.0
        FR = self._friction_pack(x_n[:N], EPS_V * h_e, x_hat[:N])
        x1 = x.copy()
        x2 = x.copy()
        out = np.zeros(6)
        k_cheb, omega = 0, 1.0
        left = self.max_sweeps
        inv_h2 = 1.0 / (h_e * h_e)
        mass = np.ascontiguousarray(s.mass, np.float64)
        big = 0.0
        min_d = float("inf")
        first = True
        with threads_for(self.s.n, SWEEP_PARALLEL_MIN_VERTICES, SWEEP_BUSY_OTHERS):
            if ct is not None and INERTIAL_GUESS:
                # the start: every free vertex as far along its predicted move as CCD allows (inertial_guess.py)
                guess = predicted_positions(x_n[:N], self.v[:N], self.v_prev, h, self.gravity, dyn)
                x[:], _, _ = inertial_guess(x, guess, dyn, ct.mesh, self.EL.tets)
            extra = PRESCRIBED_EXTRA
            detect_next = True
            while left > 0 or (extra > 0 and not self._arrived(xz, tz)):
                if left <= 0:
                    left, extra = min(extra, self.max_sweeps), extra - min(extra, self.max_sweeps)
                if ct is not None and detect_next:
                    if self.carry is not None and self.carry.pending(x, target, PRESCRIBED_TOL):
                        self.carry_passes += self.carry.apply(x, target).passes
                    det = detect(x, ct.mesh, self._query_radius(x, qt), dhat, self.on_surface, self.gamma,
                                 self.pairs)
                    self.detections += 1
                    min_d = min(min_d, det.min_distance)
                    CT = contact_pack(det, s.n, dhat, kappa)
                    BD = det.bounds()
                elif ct is None:
                    CT = no_contact(s.n, 0.0, 0.0)
                    BD = unbounded(x)
                if first:
                    if ct is None or not INERTIAL_GUESS:
                        initial_guess(x, y, self.presc, BD, self.EL)
                    affine_initial_guess(x, target, BD, AB)
                    first = False
                batch = min(left, CORRECTION_EVERY) if self.correction is not None else left
                run_sweeps(batch, x, y, mass, inv_h2, self.presc, self.group, self.n_groups, target, BD, self.EL,
                           self.SH, CT, FR,
                           self.col_start, self.col_verts, self.rho, self.tol, PRESCRIBED_TOL, x1, x2,
                           k_cheb, omega, self.cut_limit, numba.get_num_threads() > 1, out, AB)
                done = int(out[0])
                big = float(out[1])
                k_cheb, omega = int(out[4]), float(out[5])
                st.newton_iterations += done
                left -= done
                if out[3] > 0:
                    break
                if ct is None and out[2] == 0 and left <= 0:
                    break
                # a batch that ended on its budget with no vertex cut keeps its detection: every vertex
                # is still inside its admissible set, and the correction below keeps it there. (Keeping
                # it through CUT_PATIENCE sweeps with a few vertices cut, as run_sweeps does inside a
                # batch, cut the 64^2 drape's detections from ~22 to 8-15 a frame but left a 72 kg block
                # on cloth rocking by 0.9 mm a frame: not kept)
                detect_next = out[2] > 0
                if self.correction is not None and left > 0:
                    if self.correction.apply(x, y, mass, self.EL, self.SH, CT, FR, BD) > 0.0:
                        self.corrections += 1
        if self.free_moves is not None:
            # isolated bodies: the exact minimiser along their common translation (momentum balance)
            self.free_moves.apply(x, y, mass, inv_h2, self.EL, self.SH, CT, FR, BD, self.pairs, dhat)
        st.converged = bool(out[3] > 0) or self._arrived(xz, tz)
        self.v_prev = self.v[:N].copy()
        self.history.push(x_n, self.v)
        self.v = (xz - x_hat) / h_e
        self.x = xz
        if ct is not None and stats:
            ps = self.pairs.near(x, dhat)
            st.contacts, st.min_distance = ct.pair_stats(x, ps)
        st.seconds = time.perf_counter() - t0
        self.last_step_size = big
        return st
