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
  search_direction(x, p) (optional) -> a bent full step for the Newton step p, taken whole when its straight
                            path is collision free and it does not raise the energy; else the ordinary
                            backtracking line search on p runs (the stop test always reads p itself)
  mass_dofs              -> (f,) lumped mass of each free DOF (kg; 0 where there is no inertia)
  dof_group  (optional)  -> (f,) int64 body of each free DOF (one group for all when absent)

Stopping rule: the shared stop test of every solver path (integrators/stop_test.py): the Newton
step |p|_inf / h and the per-body net force, both in m/s, below the tolerance.
"""
from __future__ import annotations

from dataclasses import dataclass

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


def _bent_step_accepted(obj, x: np.ndarray, p: np.ndarray) -> bool:
    """True when the objective offers a bent full step (``search_direction``, different from p) that is
    collision free over its whole straight path, valid, and does not raise the energy: the iteration then
    takes it; otherwise the ordinary backtracking line search on p runs."""
    if not hasattr(obj, "search_direction"):
        return False
    q = obj.search_direction(x, p)
    if q is p or obj.max_step(x, q) < 1.0:
        return False
    xn = x + q
    if not obj.valid(xn):
        return False
    E = obj.line_search_energy(x, xn)
    return E(xn) <= E(x)


def projected_newton(obj, x: np.ndarray, h: float, tol: float, max_iter: int,
                     linear_solver="direct") -> NewtonResult:
    """Minimise obj from x (N, 3). Returns the last iterate (never one rejected by the filters).
    linear_solver: a method name or a LinearSolver (kept across calls for its warm start)."""
    solver = linear_solver if isinstance(linear_solver, LinearSolver) else LinearSolver(linear_solver)
    x = x.copy()
    free = obj.free_dofs
    res = np.inf
    res_g = np.inf
    fails = 0
    it = 0
    if free.size == 0:
        return NewtonResult(x, 0, True, 0.0, 0, 0.0)
    for it in range(1, max_iter + 1):
        obj.prepare(x)
        g = obj.gradient(x)[free]
        H = obj.hessian(x)
        pf = solver.solve(H, -g)
        p = np.zeros(x.size)
        p[free] = pf
        p = p.reshape(-1, 3)
        res = stop_test.step_residual(pf, h)
        res_g = stop_test.net_force_residual(g, obj.mass_dofs, getattr(obj, "dof_group", None), h)
        if stop_test.converged(res, res_g, tol):
            alpha_max = obj.max_step(x, p)
            if alpha_max >= 1.0:
                E = obj.line_search_energy(x, x + p)
                xn = x + p
                if obj.valid(xn) and E(xn) <= E(x):
                    x = xn
            return NewtonResult(x, it, True, res, fails, res_g)
        if _bent_step_accepted(obj, x, p):   # e.g. affine bodies' full steps bent towards rotations
            x = x + obj.search_direction(x, p)
            obj.accepted(x)
            continue
        alpha = min(1.0, obj.max_step(x, p))
        E = obj.line_search_energy(x, x + alpha * p)
        E0 = E(x)
        accepted = False
        while alpha > 1e-12:
            xn = x + alpha * p
            if obj.valid(xn):
                En = E(xn)
                if En <= E0 + 1e-12 * abs(E0):
                    accepted = True
                    break
            alpha *= 0.5
        if not accepted:
            fails += 1
            return NewtonResult(x, it, False, res, fails, res_g)
        x = xn
        obj.accepted(x)
    return NewtonResult(x, it, False, res, fails, res_g)
