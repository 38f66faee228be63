"""Projected Newton with a filtered backtracking line search (book: "Optimization time integrator",
Alg. "Projected Newton"; "Filter line search").

The objective is any object with
  prepare(x)             -> called once per iteration at the current iterate (contact candidates ...)
  accepted(x)            -> called with the accepted line-search point (it lies on the searched segment,
                            so the segment's contact candidates stay valid there: no new broad phase)
  gradient(x)            -> (3N,) full gradient (fixed DOFs are ignored)
  hessian(x)             -> scipy.sparse CSR over the free DOFs (PSD-projected, SPD with inertia)
  free_dofs              -> (f,) int64 indices into the flattened 3N vector
  max_step(x, p)         -> alpha bound in (0, 1] from CCD / inversion filters
  line_search_energy(x0, x1) -> a callable E(x) valid on the segment [x0, x1] (shared candidate set)
  valid(x)               -> False if x must be rejected (inverted tet ...)
  search_direction(x, p) (optional) -> a bent step for the Newton step p, taken when its straight path is
                            collision free and it does not raise the energy (tried for p and shorter
                            multiples, _bent_step); else the ordinary backtracking line search on p runs
                            (the stop test always reads p itself)
  step_groups (optional)  -> (n_z,) body of each row, or None: with it (affine bodies) the bent step is first
                            tried per island, each island of touching or approaching bodies its own fraction
                            of the step (body_step.py; needs n_groups, group_static, energy_on, contact)
  mass_dofs              -> (f,) lumped mass of each free DOF (kg; 0 where there is no inertia)
  dof_group  (optional)  -> (f,) int64 body of each free DOF (one group for all when absent)
  local_refinement (optional) -> False to skip the local refinement (default True)
  region_hessian(x, R) (optional) -> the R x R block of hessian(x) over the free-DOF indices R, computed from
                            the elements and pairs that reach it (local refinement; else hessian(x) is sliced)

Stopping rule: the shared stop test of every solver path (integrators/stop_test.py): the Newton
step |p|_inf / h and the per-body net force, both in m/s, below the tolerance. An iteration whose system was
solved with a diagonal shift (linear_solve.py: H failed its factorisation in floating point) does not stop.

Local refinement (``local_refine``): in the tail of a step, when the global step still moves only a few
vertices by more than tol / 2, Newton iterations on those vertices and three rings of neighbours alone
(the exact block of the projected Hessian, a small Cholesky, the same CCD, validity and energy filters)
follow the global iteration; the next global iteration is the stop test, so a step is still returned
only when the true Newton step at the returned x passes it (docs/solver.md, "Local refinement").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from solver_server.integrators import stop_test
from .linear_solve import LinearSolver


@dataclass
class NewtonResult:
    x: np.ndarray
    iterations: int
    converged: bool
    residual: float      # last step residual |p|_inf / h (m/s), integrators/stop_test.py
    line_search_failures: int
    force_residual: float = 0.0   # last per-body net-force residual (m/s)
    local_solves: int = 0         # local-refinement Newton solves (small factorisations; local_refine)


BENT_TRIES = 4   # bent steps tried per iteration: the full one, then shorter ones (see _bent_step)
BODY_STEP = True
"""When the full bent step is not collision free, first try the per-island scaled step (body_step.py: each
island of touching or approaching bodies its own fraction of the step) before the uniform shorter tries."""


EXACT_TAIL = False
"""Off by default (an experiment of issue 19, docs/solver.md "The body step", item 10). On: once the Newton step is below
the tolerance but the per-body net force is not (the stop test's two residuals), the objective's friction Hessian drops
the stiff-body majorizer (``exact_friction``) for the rest of the solve, except in an iteration whose exact step would
move a friction pair's slip to another branch of f0 (``slip_reversals``): that iteration solves with the majorized
Hessian as before. Measured: it ends the majorizer's linear crawl of the force residual (bin of 100 props, frame 5:
step residual 5e-6 m/s, force residual 0.1 -> 0.027 m/s over 40 iterations, at the cap; converged in 60 with it),
but on the 1,000-prop bin the exact tail of frame 4 drifts (step residual 0.004 -> 0.02 m/s over 12 iterations)."""


SLIP_TAIL = True
"""The exact friction curvature in the tail of a step, each step bounded by a CCD on the friction slips (issue 19,
docs/solver.md "The body step", item 16). Once the Newton step has passed the tolerance while the force residual has
not (the majorizer's crawl of item 12), or the force residual has crawled (fallen by less than 1 - SLIP_STALL[1] over
SLIP_STALL[0] iterations without a rise of more than SLIP_STALL_RISE in any), the friction Hessian is the exact one for
the rest of the solve (``exact_friction``: f1'(y) along each slip instead of the majorizer's f1(y) / y). f0 is C^2 and
convex, so that Hessian is PSD and continuous, but its curvature along a slip runs from 2 / eps at rest to 0 at eps:
a sliding pair's step sees no curvature and overshoots into the stiff sticking zone. So the step taken is the Newton
step cut to the largest fraction over which no pair's slip falls more than SLIP_DEPTH eps below min(|u|, eps)
(``slip_depth_bound``; outward moves are free: there the exact model lies above f0), then re-linearised. The bounded
step goes through the bent / per-island step and, if that takes nothing, a backtracking down to SLIP_ALPHA_MIN; when
the bound is below SLIP_MIN or nothing is taken, the iteration solves again with the majorized Hessian and goes on as
before (energy descent, CCD and validity as always). The stop test reads the iteration's own Newton step. Only where the
objective's ``slip_tail`` is true (IncrementalPotential: the per-island body step runs, i.e. affine bodies with collision
shapes of at most BODY_STEP_MAX_VERTICES vertices on average): on 100 Mesh cubes of 1,016 vertices (faces of ~1,000
pairs coming to rest together) the bound cut the tail's steps to 3-7% for 10-20 iterations and the pile took more
iterations than under the majorizer (item 16)."""
SLIP_DEPTH = 0.25   # x eps: how far into the sticking zone a slip may travel in one exact step
SLIP_MIN = 1e-3     # smallest bounded fraction worth taking (else the majorized step)
SLIP_ALPHA_MIN = 0.1   # the bounded exact step's backtracking stops below this fraction (then the majorized step)
SLIP_ALWAYS = False  # experiment (not kept): the bounded exact friction from the first iteration on
SLIP_STALL_RISE = 1.1   # x: a rise of the force residual by more than this in one iteration is no crawl
SLIP_STALL = (20, 0.7)   # also switch when the force residual fell by < 30% over the last 20 iterations, rising by at most SLIP_STALL_RISE in any
SLIP_STATS = {"exact": 0, "bounded": 0, "fallback": 0}


def _solve_step(obj, solver, H, g, free, shape):
    pf = solver.solve(H, -g)
    p = np.zeros(shape[0] * shape[1])
    p[free] = pf
    return pf, p.reshape(shape)


def _majorized_step(obj, solver, x, g, free):
    obj.exact_friction = False
    try:
        H = obj.hessian(x)
    finally:
        obj.exact_friction = True
    return (H,) + _solve_step(obj, solver, H, g, free, x.shape)


def _bent_step(obj, x: np.ndarray, p: np.ndarray):
    """The bent step to take for the Newton step p, or None. The objective's ``search_direction`` bends a
    step onto the bodies' rotations (for p itself: None when it offers no bend, i.e. returns p). Tried for
    a p, then for shorter a p: a shortened to 0.9 of the CCD bound of the last try when its straight path
    is not collision free, halved when it raises the energy or is invalid, at most BENT_TRIES tries. A try
    is taken when its whole straight path is collision free, it is valid and the energy does not rise;
    otherwise the ordinary backtracking line search on p runs. Shortening along the bent path instead of
    along p matters for a body the Newton step turns far (0.3-0.5 rad): the straight step's line search
    cuts it to a sliver (stretch W^2), while a shorter bent step stays on the rotation (pile of 60 Convex
    Hull cubes, issue 19)."""
    if not hasattr(obj, "search_direction"):
        return None
    q = obj.search_direction(x, p)
    if q is p:
        return None
    if BODY_STEP and getattr(obj, "step_groups", None) is not None:
        from .body_step import scaled_step
        qs = scaled_step(obj, x, p, q)   # the full step, or each island of bodies its own fraction of it
        if qs is not None:
            return qs
    a = 1.0
    for k in range(BENT_TRIES):
        if k > 0:
            q = obj.search_direction(x, a * p)
        am = obj.max_step(x, q)
        if am < 1.0:
            a *= 0.9 * am
            continue
        xn = x + q
        if obj.valid(xn):
            E = obj.line_search_energy(x, xn)
            if E(xn) <= E(x):
                return q
        a *= 0.5
    return None


def _backtrack(obj, x: np.ndarray, p: np.ndarray, alpha_min: float):
    """The filtered backtracking line search along p from x: alpha from min(1, CCD bound), halved until x + alpha p
    is valid (no inverted element) and does not raise the energy (to 1e-12 relative); None below alpha_min."""
    alpha = min(1.0, obj.max_step(x, p))
    E = obj.line_search_energy(x, x + alpha * p)
    E0 = E(x)
    while alpha > alpha_min:
        xn = x + alpha * p
        if obj.valid(xn) and E(xn) <= E0 + 1e-12 * abs(E0):
            return xn
        alpha *= 0.5
    return None


# Local refinement (docs/solver.md, "Local refinement"): after a global iteration whose step residual was
# below LOCAL_RES x tol and moved at most LOCAL_SEEDS vertices by more than tol / 2 (m/s), Newton runs on
# those vertices and LOCAL_RINGS rings of their neighbours in H's pattern alone, every other DOF held.
# 1,000 / 30 since local iterations run on the region's own objective (region.py): 64^2 drape, 48 frames,
# 515 -> 433 global iterations, 2.94 -> 2.74 CPU s / frame; 32^2, 30 frames 379 -> 247, 1.07 -> 0.98
# (200 / 10 before; 400 / 30: 481 and 2.75 at 64^2)
LOCAL_SEEDS = 1000        # vertices; 0 switches the refinement off
LOCAL_RINGS = 3
LOCAL_RES = 30.0          # x tol: only in the tail of a step (the step residual within 30 x the tolerance)
LOCAL_ITERS = 3           # local Newton iterations per refinement, at most
LOCAL_MAX_REGION = 3000   # vertices: a larger region is left to the global iterations


def _region(H, pf: np.ndarray, h: float, tol: float):
    """Sorted free-DOF indices (whole vertices) of the vertices whose step pf (m, over the free DOFs, x, y, z
    triples) exceeds tol / 2 (m/s) times h, grown by LOCAL_RINGS rings in H's pattern (elastic stencils and
    contact pairs); None when there is no such vertex, more than LOCAL_SEEDS of them, or the region
    exceeds LOCAL_MAX_REGION vertices."""
    pv = np.abs(pf.reshape(-1, 3)).max(axis=1) / h
    seed = pv > 0.5 * tol
    ns = int(seed.sum())
    if ns == 0 or ns > LOCAL_SEEDS:
        return None
    B = H.tocsr()
    B = type(B)((np.ones_like(B.data), B.indices, B.indptr), shape=B.shape)
    m = np.repeat(seed, 3).astype(np.float64)
    for _ in range(LOCAL_RINGS):
        m = (B @ m > 0).astype(np.float64)
    v = (m.reshape(-1, 3) > 0).any(axis=1)
    if v.sum() > LOCAL_MAX_REGION:
        return None
    return np.nonzero(np.repeat(v, 3))[0]


def local_refine(obj, x: np.ndarray, R: np.ndarray, h: float, tol: float, solver: Optional[LinearSolver] = None):
    """Projected Newton on the subproblem min E(x) over the free DOFs R (indices into obj.free_dofs), every
    other DOF held: the exact R x R block of the projected Hessian (obj.region_hessian, or the whole
    Hessian sliced), a sparse Cholesky of that block, the same CCD bound, validity filter and energy
    test as the global line search, at most LOCAL_ITERS iterations, stopping once the local step is below
    tol / 2 (m/s). Every accepted point lowers E, is intersection free and inverts nothing; the caller's
    next global iteration is the stop test. When the objective offers ``region(R)`` (an objective of the
    region's terms alone: gradient over R, Hessian block, and the same filters over the pairs near R;
    region.py) the iterations run on it, else on the whole objective. ``solver``: a direct LinearSolver kept
    for the region blocks (its symbolic analysis is reused while a block's pattern repeats, which gives the
    same factor as a fresh analysis); default a new one. Returns (x, local solves)."""
    solver = LinearSolver("direct") if solver is None else solver
    free = obj.free_dofs
    sub = obj.region(R) if hasattr(obj, "region") else None
    target = obj if sub is None else sub
    solves = 0
    for _ in range(LOCAL_ITERS):
        target.prepare(x)
        if sub is not None:
            gr = sub.gradient(x)
            A = sub.hessian(x)
        else:
            gr = obj.gradient(x)[free][R]
            A = obj.region_hessian(x, R) if hasattr(obj, "region_hessian") else obj.hessian(x).tocsc()[R][:, R]
        pr = solver.solve(A, -gr)
        solves += 1
        if np.abs(pr).max() / h < 0.5 * tol:
            break
        p = np.zeros(x.size)
        p[free[R]] = pr
        p = p.reshape(-1, 3)
        xn = _backtrack(target, x, p, 1e-3)
        if xn is None:
            break
        x = xn
        target.accepted(x)
    return x, solves


def projected_newton(obj, x: np.ndarray, h: float, tol: float, max_iter: int,
                     linear_solver="direct") -> NewtonResult:
    """Minimise obj from x (N, 3). Returns the last iterate (never one rejected by the filters).
    linear_solver: a method name or a LinearSolver (kept across calls for its warm start)."""
    solver = linear_solver if isinstance(linear_solver, LinearSolver) else LinearSolver(linear_solver)
    local_solver = LinearSolver("direct")   # the region blocks' own analysis, apart from the global one's
    x = x.copy()
    free = obj.free_dofs
    res = np.inf
    res_g = np.inf
    fails = 0
    it = 0
    local = 0
    if free.size == 0:
        return NewtonResult(x, 0, True, 0.0, 0, 0.0)
    hist = []
    slip = SLIP_TAIL and getattr(obj, "slip_tail", True)
    if slip and SLIP_ALWAYS and hasattr(obj, "exact_friction"):
        obj.exact_friction = True
    for it in range(1, max_iter + 1):
        obj.prepare(x)
        g = obj.gradient(x)[free]
        H = obj.hessian(x)
        pf = solver.solve(H, -g)
        p = np.zeros(x.size)
        p[free] = pf
        p = p.reshape(-1, 3)
        exact = slip and getattr(obj, "exact_friction", False)
        slip_a = 1.0
        if exact:
            SLIP_STATS["exact"] += 1
            slip_a, _ = obj.slip_depth_bound(x, p, SLIP_DEPTH)
            if slip_a < SLIP_MIN:
                SLIP_STATS["fallback"] += 1
                H, pf, p = _majorized_step(obj, solver, x, g, free)
                exact = False
                slip_a = 1.0
            elif slip_a < 1.0:
                SLIP_STATS["bounded"] += 1
        elif getattr(obj, "exact_friction", False) and obj.slip_reversals(x, p) > 0:
            # the exact step turns a slip back across the kink: this iteration takes the majorized one
            obj.exact_friction = False
            H = obj.hessian(x)
            obj.exact_friction = True
            pf = solver.solve(H, -g)
            p = np.zeros(x.size)
            p[free] = pf
            p = p.reshape(-1, 3)
        res = stop_test.step_residual(pf, h)
        res_g = stop_test.net_force_residual(g, obj.mass_dofs, getattr(obj, "dof_group", None), h)
        hist.append(res_g)
        stall = (slip and SLIP_STALL is not None and len(hist) > SLIP_STALL[0]
                 and hist[-1] > SLIP_STALL[1] * hist[-1 - SLIP_STALL[0]]
                 and all(hist[i] <= SLIP_STALL_RISE * hist[i - 1] for i in range(len(hist) - SLIP_STALL[0], len(hist))))
        if (EXACT_TAIL or slip) and (res < tol or stall) and hasattr(obj, "exact_friction"):
            obj.exact_friction = True   # from the next iteration on (see EXACT_TAIL)
        # a step solved with a diagonal shift (linear_solve.py: H failed its factorisation) is a descent
        # direction but not the Newton step of H: the stop test does not read it
        if stop_test.converged(res, res_g, tol) and solver.last_shift == 0.0:
            alpha_max = obj.max_step(x, p)
            if alpha_max >= 1.0:
                E = obj.line_search_energy(x, x + p)
                xn = x + p
                if obj.valid(xn) and E(xn) <= E(x):
                    x = xn
            return NewtonResult(x, it, True, res, fails, res_g, local)
        pt = p if slip_a >= 1.0 else slip_a * p
        q = _bent_step(obj, x, pt)   # e.g. affine bodies' steps bent onto rotations
        if q is None and exact:
            xn = _backtrack(obj, x, pt, SLIP_ALPHA_MIN)   # the bounded exact step, halved at most a few times
            if xn is not None:
                q = xn - x
        if q is None and exact:
            # the bounded exact step was not taken: this iteration goes on with the majorized step
            SLIP_STATS["fallback"] += 1
            H, pf, p = _majorized_step(obj, solver, x, g, free)
            q = _bent_step(obj, x, p)
        if q is not None:
            x = x + q
            obj.accepted(x)
            continue
        xn = _backtrack(obj, x, p, 1e-12)
        if xn is None:
            fails += 1
            return NewtonResult(x, it, False, res, fails, res_g, local)
        x = xn
        obj.accepted(x)
        if LOCAL_SEEDS and res < LOCAL_RES * tol and getattr(obj, "local_refinement", True):
            R = _region(H, pf, h, tol)
            if R is not None:
                x, n = local_refine(obj, x, R, h, tol, local_solver)
                local += n
    return NewtonResult(x, it, False, res, fails, res_g, local)
