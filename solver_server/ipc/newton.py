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
  mass_dofs              -> (f,) lumped mass of each free DOF (kg; 0 where there is no inertia)
Stop when ||p||_inf / h < tol (m/s) AND the mass-weighted RMS force residual
sqrt(sum_i g_i^2 / m_i / sum_i m_i) / h < tol (m/s) over the DOFs with mass. g_i / m_i / h is the velocity
error of DOF i in the same units. The second test matters with lagged friction: in the sticking regime
the friction Hessian mu lambda / (eps_v h) is so stiff that p is tiny although the net force is not, so
a tiny p alone must not end the solve (a sliding block would stop after one iteration). It is an RMS
and not a max: a cloth resting on a collider has a few vertices whose static friction flips at the
eps_v h kink from one iterate to the next, and a max-norm test kept the whole sheet iterating on them
(2-3x more Newton iterations) while the rigid-motion errors it exists for are the same in both norms.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .linear_solve import LinearSolver, solve_direct


@dataclass
class NewtonResult:
    x: np.ndarray
    iterations: int
    converged: bool
    residual: float      # last ||p||_inf / h, m/s
    line_search_failures: int


def solve_linear(H, rhs: np.ndarray, method: str = "direct") -> np.ndarray:
    """Solve H p = rhs for SPD H (see linear_solve.py)."""
    if method == "direct":
        return solve_direct(H, rhs)
    return LinearSolver(method).solve(H, rhs)


def force_residual(g: np.ndarray, mass: np.ndarray, h: float) -> float:
    """Mass-weighted RMS velocity error sqrt(sum g^2 / m / sum m) / h (m/s) over the DOFs with mass."""
    has_m = mass > 0
    if not has_m.any():
        return 0.0
    m = mass[has_m]
    return float(np.sqrt((g[has_m] ** 2 / m).sum() / m.sum())) / h


def projected_newton(obj, x: np.ndarray, h: float, tol: float, max_iter: int,
                     linear_solver="direct") -> NewtonResult:
    """Minimise obj from x (N, 3). Returns the last iterate (never one rejected by the filters).
    linear_solver: a method name or a LinearSolver (kept across calls for its warm start)."""
    solver = linear_solver if isinstance(linear_solver, LinearSolver) else LinearSolver(linear_solver)
    x = x.copy()
    free = obj.free_dofs
    res = np.inf
    fails = 0
    it = 0
    if free.size == 0:
        return NewtonResult(x, 0, True, 0.0, 0)
    for it in range(1, max_iter + 1):
        obj.prepare(x)
        g = obj.gradient(x)[free]
        H = obj.hessian(x)
        pf = solver.solve(H, -g)
        p = np.zeros(x.size)
        p[free] = pf
        p = p.reshape(-1, 3)
        res = float(np.abs(pf).max()) / h if pf.size else 0.0
        res_g = force_residual(g, obj.mass_dofs, h)
        if res < tol and res_g < tol:
            alpha_max = obj.max_step(x, p)
            if alpha_max >= 1.0:
                E = obj.line_search_energy(x, x + p)
                xn = x + p
                if obj.valid(xn) and E(xn) <= E(x):
                    x = xn
            return NewtonResult(x, it, True, res, fails)
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
            return NewtonResult(x, it, False, res, fails)
        x = xn
        obj.accepted(x)
    return NewtonResult(x, it, False, res, fails)
