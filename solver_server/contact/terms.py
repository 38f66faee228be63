"""Adapter between the time stepper and the contact library (solver_server/contact/, barrier,
CCD and friction on the scene's collision surface). Keeps the integrator independent of that
library's exact signatures and lets scenes without any possible contact skip it entirely.

All energies returned here are *unscaled* potentials (J); the integrator multiplies them by h^2.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from solver_server.model.system import System

MAJORIZE_STIFF = 10.0  # friction Hessian on stiff-body contacts: the majorizer's curvature f1(y)/y along the slip
                       # for slips y below this many eps (contact/friction.py friction_hessian). Pile of 27 Box
                       # cubes at 1 substep, 12 frames: 825 Newton iterations and 5 steps at the cap with 0 (the
                       # exact projected Hessian), 451 / 415 / 440 / 544 and 0 at the cap with 3 / 10 / 30 / inf
ALL_FRICTION = object()   # the default friction set of ContactTerms.friction_*: every frozen pair (self.fs)
EPS_V = 1.0e-4  # m/s, friction static/dynamic transition speed: static contacts creep below ~EPS_V (book: 1e-3; 1e-4 keeps an incline stick under 1 mm over 2 s)


SKIN = 1.0        # Verlet skin of the Newton iterations' candidate list on scenes of affine bodies, in dhat (0: off)
SKIN_AHEAD = 1.5  # a body's skin when the list is rebuilt for a segment: SKIN dhat + 2 x this x its motion on it
SKIN_MAX = 4.0    # dhat: the largest skin a body gets when the list is rebuilt for a segment


class CandidateList:
    """The contact candidates of one time step's Newton iterations, reused while nothing moved far (a Verlet
    list with a skin per body). Built for a straight move x0 -> x1 (x1 = x0 for a point) with every element's
    swept box (enclosing it at x0 and at x1) inflated by (dhat + s_b) / 2 (s_b the skin of its body b), it holds
    every pair closer than dhat at any x whose every vertex v lies in its own swept box [min(x0_v, x1_v),
    max(x0_v, x1_v)] grown by s_b / 2 on every side (there each element's box inflated by dhat / 2 lies in its
    inflated swept box; two elements closer than dhat have overlapping dhat / 2 boxes), and on any segment whose
    two ends are such points (the grown boxes are convex): the barrier, its derivatives, the active set and the
    CCD of such a segment (a pair reaching distance 0 is closer than dhat) are those of a fresh broad phase.
    Outside, it is rebuilt: at a point with s_b = SKIN dhat; for a segment x0 -> x1 over the segment's swept
    boxes with s_b = min(SKIN dhat + 2 SKIN_AHEAD D_b, SKIN_MAX dhat), D_b the body's largest vertex motion on
    the segment (a falling body gets a wider skin, a resting one a thin one, so a step's later iterations reuse
    the list). One list per step (TimeStepper.step), so a bake resumed at any frame builds the same lists at the
    same iterates (issue 23's determinism)."""

    def __init__(self, contact: "ContactTerms", skin: float):
        self.ct = contact
        self.skin = float(skin)
        m = contact.mesh
        self.vb = np.ascontiguousarray(m.vertex_body, np.int32)
        self.nb = int(m.body_friction.shape[0])
        self.lo = None
        self.hi = None
        self.sb = None
        self.cands = None
        self.builds = 0

    def _within(self, x: np.ndarray) -> bool:
        return bool(self.ct.C.broad_phase.within_boxes(x, self.lo, self.hi, self.vb, 0.5 * self.sb))

    def _build(self, x0: np.ndarray, x1: np.ndarray, sb: np.ndarray):
        self.lo = np.minimum(x0, x1)
        self.hi = np.maximum(x0, x1)
        self.sb = sb
        vpad = 0.5 * (self.ct.dhat + sb[self.vb])
        self.cands = self.ct._filtered(self.ct.C.broad_phase.find_candidates_padded(
            x0, self.ct.mesh, vpad, None if x1 is x0 else x1))
        self.builds += 1
        return self.cands

    def at(self, x: np.ndarray):
        """Candidates valid at x (every pair with s < dhat among them)."""
        x = np.ascontiguousarray(x, np.float64).reshape(-1, 3)
        if self.lo is not None and self._within(x):
            return self.cands
        return self._build(x, x, np.full(self.nb, self.skin))

    def reach(self, x: np.ndarray, p: np.ndarray) -> float:
        """Largest fraction t in [0, 1] of the move p (n, 3) from x on which the list stays valid (every vertex of
        x + t p within its grown box), shrunk by 1e-9 for round-off; 0 without a list or when x is outside it."""
        if self.lo is None:
            return 0.0
        t = float(self.ct.C.broad_phase.exit_time(np.ascontiguousarray(x, np.float64).reshape(-1, 3),
                                                  np.ascontiguousarray(p, np.float64).reshape(-1, 3),
                                                  self.lo, self.hi, self.vb, 0.5 * self.sb))
        return 1.0 if t >= 1.0 else t * (1.0 - 1e-9)

    def segment(self, x0: np.ndarray, x1: np.ndarray):
        """Candidates valid on the whole straight segment x0 -> x1."""
        x0 = np.ascontiguousarray(x0, np.float64).reshape(-1, 3)
        x1 = np.ascontiguousarray(x1, np.float64).reshape(-1, 3)
        if self.lo is not None and self._within(x0) and self._within(x1):
            return self.cands
        D = self.ct.C.broad_phase.body_displacements(x1, x0, self.vb, self.nb)
        return self._build(x0, x1, np.minimum(self.skin + 2.0 * SKIN_AHEAD * D, SKIN_MAX * self.ct.dhat))


class ContactTerms:
    """Barrier + friction potentials and the CCD step bound for one system."""

    def __init__(self, system: System, dhat: float):
        from solver_server import contact as C  # imported lazily: heavy numba module
        self.C = C
        self.dhat = float(dhat)
        s = system
        self.mesh = C.CollisionMesh.build(s.n, s.coll_faces, s.coll_edges, s.vertex_offset, s.vertex_body,
                                          s.body_friction, s.body_self_contact.astype(np.uint8),
                                          s.body_static.astype(np.uint8), rest_positions=s.x0)
        self.kappa = 0.0
        # per collision vertex: the friction majorizer's factor (MAJORIZE_STIFF on affine bodies' vertices,
        # 0 on cloth, soft solids and rods, whose friction Hessian stays the exact projected one)
        slaved = np.asarray(s.dof_map.is_slaved[:s.n], bool) if getattr(s, "dof_map", None) is not None else None
        self.majorize_v = (np.where(slaved, MAJORIZE_STIFF, 0.0) if slaved is not None and slaved.any()
                           else None)
        self.fs = None
        self.x_prev = None
        # pairs an attachment takes out of contact (model/attachments.py, contact/exclusions.py), or None
        att = getattr(s, "attachments", None)
        self.excluded = None
        if att is not None and (len(att.excl_pt) or len(att.excl_ee) or len(att.excl_ef)):
            from solver_server.contact.exclusions import Exclusions
            self.excluded = Exclusions(att.excl_pt, att.excl_ee, att.excl_ef)

    def _filtered(self, cands):
        if self.excluded is None:
            return cands
        from solver_server.contact.exclusions import filter_candidates
        return filter_candidates(cands, self.mesh, self.excluded)

    # --- barrier -------------------------------------------------------------------------------
    def candidates(self, x: np.ndarray, near: Optional[np.ndarray] = None):
        """Candidate pairs at x (near (n,) bool: only those with a vertex in the mask). Those of the last x asked
        without a mask are kept: a step's end (its contact count) and the next step's start (its friction pairs)
        are the same positions, bit for bit, and the same pairs."""
        if near is not None:
            return self._filtered(self.C.find_candidates(x, self.mesh, self.dhat, near=near))
        c = getattr(self, "_cand_cache", None)
        if c is not None and c[0].shape == np.shape(x) and np.array_equal(c[0], x):
            return c[1]
        cands = self._filtered(self.C.find_candidates(x, self.mesh, self.dhat))
        self._cand_cache = (np.array(x), cands)
        return cands

    def candidates_swept(self, x0: np.ndarray, x1: np.ndarray, near: Optional[np.ndarray] = None,
                         dhat: Optional[float] = None):
        """Candidate pairs along the segment x0 -> x1 (near: only those with a vertex in the mask; dhat: the
        query distance, m, default the barrier's)."""
        return self._filtered(self.C.find_candidates_ccd(x0, x1, self.mesh, self.dhat if dhat is None else dhat,
                                                         near=near))

    def energy(self, x: np.ndarray, cands) -> float:
        return float(self.C.barrier_energy(x, cands, self.mesh, self.dhat, self.kappa))

    def gradient(self, x: np.ndarray, cands) -> np.ndarray:
        return self.C.barrier_gradient(x, cands, self.mesh, self.dhat, self.kappa)

    def hessian(self, x: np.ndarray, cands) -> tuple:
        k = getattr(self, "_kept_hessian", None)
        if k is not None:
            self._kept_hessian = None
            if k[0] is cands and k[1].shape == np.shape(x) and k[1].tobytes() == np.ascontiguousarray(x).tobytes():
                return k[2]
        return self.C.barrier_hessian(x, cands, self.mesh, self.dhat, self.kappa)

    def gradient_then_hessian(self, x: np.ndarray, cands) -> np.ndarray:
        """gradient(x, cands), the barrier's Hessian triplets computed in the same pass over the active pairs
        (barrier_derivatives: the same bytes as gradient and hessian) and kept for the hessian(x, cands) that
        follows at the same x (the byte-equal positions) with the same candidates (Newton's iterate: its
        gradient, then its Hessian). Any other hessian call drops them."""
        _, g, trip = self.C.barrier_derivatives(x, cands, self.mesh, self.dhat, self.kappa)
        self._kept_hessian = (cands, np.array(x), trip)
        return g

    def derivatives_bodies(self, x: np.ndarray, cands, info) -> tuple:
        """(vertex gradient (3n,), body gradient (G, 12), (rows, cols, vals) vertex triplets, (blocks, row bodies,
        column bodies)): the barrier's gradient and Hessian in one pass, the pairs between affine bodies (and
        fixed vertices) in body rows and blocks (contact/body_blocks.py)."""
        from solver_server.contact.body_blocks import barrier_derivatives_bodies
        return barrier_derivatives_bodies(x, cands, self.mesh, self.dhat, self.kappa, info)

    def count_active(self, x: np.ndarray, cands) -> int:
        return int(self.C.count_active(x, cands, self.mesh, self.dhat))

    def min_distance(self, x: np.ndarray, cands) -> float:
        return float(self.C.min_distance(x, cands, self.mesh))

    def max_step(self, x: np.ndarray, p: np.ndarray, near: Optional[np.ndarray] = None) -> float:
        """Largest alpha in (0, 1] such that x + t p stays intersection free for t <= alpha (excluded pairs
        left out). near (n,) bool: p is zero outside this vertex mask (only pairs near it are swept)."""
        if self.excluded is not None:
            from solver_server.contact.exclusions import max_step_excluding
            return max_step_excluding(x, p, self.mesh, self.excluded)
        return float(self.C.max_step_size(x, p, self.mesh, self.dhat, near=near))

    def max_step_on(self, x: np.ndarray, p: np.ndarray, cands) -> float:
        """max_step over the candidate pairs cands alone, which must hold every pair that can come within dhat
        on x -> x + p (a CandidateList's segment candidates): the CCD of those pairs only (contact/ccd.py
        max_step_candidates), no broad phase."""
        from solver_server.contact.ccd import max_step_candidates
        return max_step_candidates(x, p, cands, self.mesh)

    def narrowed(self, cands, x0: np.ndarray, x1: np.ndarray):
        """The pairs of cands (which must hold every pair that can come within dhat on x0 -> x1) whose primitives'
        boxes swept over x0 -> x1 come within dhat (1 + 1e-9) + their offset (contact/pairs.py swept_near_mask):
        the same energy, derivatives, active set and CCD on the segment and at any positions whose every vertex
        lies in the box of its own two ends, over fewer pairs (most of a Verlet list's candidates are beyond dhat
        and stay there over a Newton step)."""
        from solver_server.contact.pairs import swept_near_pairs
        from solver_server.contact.potential import FAR_MARGIN
        from solver_server.threads import threads_for
        x0 = np.ascontiguousarray(x0, np.float64).reshape(-1, 3)
        x1 = np.ascontiguousarray(x1, np.float64).reshape(-1, 3)
        with threads_for(len(cands)):
            return swept_near_pairs(cands, self.mesh, x0, x1, self.dhat * (1.0 + FAR_MARGIN))

    # --- friction (lagged: normal forces and tangent bases frozen at x_prev) --------------------
    def friction_setup(self, x: np.ndarray, cands) -> None:
        self.x_prev = x.copy()
        if np.any(self.mesh.body_friction > 0):
            self.fs = self.C.friction_setup(x, cands, self.mesh, self.dhat, self.kappa)
            if len(self.fs) == 0:
                self.fs = None
        else:
            self.fs = None

    def friction_setup_pairs(self, x: np.ndarray, ps) -> None:
        """friction_setup from a flattened PairSet holding every pair with s < dhat at x."""
        self.x_prev = x.copy()
        self.fs = None
        if np.any(self.mesh.body_friction > 0):
            fs = self.C.friction.friction_setup_pairs(x, ps, self.mesh, self.dhat, self.kappa)
            self.fs = fs if len(fs) else None

    def pair_stats(self, x: np.ndarray, ps) -> tuple:
        """(active pairs (s < dhat), smallest contact distance (m), inf if none) over a PairSet
        holding every pair with s < dhat at x."""
        if len(ps) == 0:
            return 0, float("inf")
        s = self.C.pairs.contact_distances(np.ascontiguousarray(x, np.float64), ps.ids, ps.is_ee, ps.off)
        return int(np.count_nonzero(s < self.dhat)), float(s.min())

    def friction_subset(self, near: np.ndarray):
        """The frozen friction pairs with a vertex in the mask near (n,) bool (a FrictionSet, or None)."""
        if self.fs is None:
            return None
        k = near[self.fs.ids].any(axis=1)
        if not k.any():
            return None
        fs = self.fs
        return type(fs)(np.ascontiguousarray(fs.ids[k]), np.ascontiguousarray(fs.coef[k]),
                        np.ascontiguousarray(fs.T[k]), np.ascontiguousarray(fs.mu_lambda[k]))

    def slip_reversals(self, x: np.ndarray, x1: np.ndarray, h: float) -> int:
        """Frozen friction pairs whose slip changes branch of f0 on the move x -> x1 (vertex positions, m;
        contact/friction.py slip_reversals)."""
        if self.fs is None:
            return 0
        from solver_server.contact.friction import slip_reversals
        fs = self.fs
        return int(slip_reversals(np.ascontiguousarray(x, np.float64).reshape(-1, 3),
                                  np.ascontiguousarray(x1, np.float64).reshape(-1, 3),
                                  np.ascontiguousarray(self.x_prev, np.float64).reshape(-1, 3),
                                  fs.ids, fs.coef, fs.T, EPS_V * h))

    def slip_depth_bound(self, x: np.ndarray, x1: np.ndarray, h: float, depth: float):
        """(t, n): the fraction of the move x -> x1 (vertex positions, m) over which every frozen friction pair's slip
        stays on its branch of f0, and the number of pairs that bound it (contact/friction.py slip_depth_bound)."""
        if self.fs is None or len(self.fs) == 0:
            return 1.0, 0
        from solver_server.contact.friction import slip_depth_bound
        fs = self.fs
        t, n = slip_depth_bound(np.ascontiguousarray(x, np.float64).reshape(-1, 3),
                                 np.ascontiguousarray(x1, np.float64).reshape(-1, 3),
                                 np.ascontiguousarray(self.x_prev, np.float64).reshape(-1, 3),
                                 fs.ids, fs.coef, fs.T, EPS_V * h, float(depth))
        return float(t), int(n)

    def friction_energy(self, x: np.ndarray, h: float, fs=ALL_FRICTION) -> float:
        fs = self.fs if fs is ALL_FRICTION else fs
        if fs is None:
            return 0.0
        return float(self.C.friction_energy(x, self.x_prev, fs, EPS_V * h))

    def friction_gradient(self, x: np.ndarray, h: float, fs=ALL_FRICTION) -> Optional[np.ndarray]:
        fs = self.fs if fs is ALL_FRICTION else fs
        if fs is None:
            return None
        return self.C.friction_gradient(x, self.x_prev, fs, EPS_V * h)

    def friction_hessian(self, x: np.ndarray, h: float, fs=ALL_FRICTION, majorize: bool = True):
        """majorize: False for the exact projected Hessian on every pair (f1' along the slip, no majorizer)."""
        fs = self.fs if fs is ALL_FRICTION else fs
        if fs is None:
            return None
        return self.C.friction_hessian(x, self.x_prev, fs, EPS_V * h, majorize=self.majorize_v if majorize else None)

    def friction_hessian_bodies(self, x: np.ndarray, h: float, info, majorize: bool = True):
        """friction_hessian split as hessian_bodies; None without friction pairs (majorize: as friction_hessian)."""
        if self.fs is None:
            return None
        from solver_server.contact.body_blocks import friction_hessian_bodies
        return friction_hessian_bodies(x, self.x_prev, self.fs, EPS_V * h, info,
                                       majorize=self.majorize_v if majorize else None)

    def count_intersections(self, x: np.ndarray) -> int:
        """Edge-triangle intersections of the collision surface at x (excluded pairs left out)."""
        return int(len(self.find_intersections(x)))

    def find_intersections(self, x: np.ndarray) -> np.ndarray:
        """(k, 2) rows (edge, face) of the edge-triangle intersections at x, excluded pairs left out."""
        hits = self.C.find_intersections(x, self.mesh.faces, self.mesh.edges)
        if self.excluded is None:
            return hits
        from solver_server.contact.exclusions import filter_hits
        return filter_hits(hits, self.mesh, self.excluded)
