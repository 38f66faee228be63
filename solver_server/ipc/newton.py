"""Projected Newton with a filtered backtracking line search (book: "Optimization time integrator",
Alg. "Projected Newton"; "Filter line search").

The objective is any object with
  prepare(x)             -> called once per iteration at the current iterate (contact candidates ...)
  gradient(x)            -> (3N,) full gradient (fixed DOFs are ignored)
  hessian(x)             -> scipy.sparse CSR over the free DOFs (PSD-projected, SPD with inertia)
  free_dofs              -> (f,) int64 indices into the flattened 3N vector
  max_step(x, p)         -> alpha bound in (0, 1] from CCD / inversion filters
  line_search_energy(x0, x1) -> a callable E(x) valid on the segment [x0, x1] (shared candidate set)
  valid(x)               -> False if x must be rejected (inverted tet ...)
  mass_dofs              -> (f,) lumped mass of each free DOF (kg; 0 where there is no inertia)
Stop when ||p||_inf / h < tol (m/s) AND the force residual ||M^{-1} g||_inf / h < tol (m/s) over the DOFs
with mass. The second test matters with lagged friction: in the sticking regime the friction Hessian
mu lambda / (eps_v h) is so stiff that p is tiny although the net force is not; g / m / h is the
velocity error of the step in the same units, so a tiny p alone must not end the solve.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spla


@dataclass
class NewtonResult:
    x: np.ndarray
    iterations: int
    converged: bool
    residual: float      # last ||p||_inf / h, m/s
    line_search_failures: int


def solve_linear(H, rhs: np.ndarray, method: str = "direct") -> np.ndarray:
    """Solve H p = rhs for SPD H: sparse LU (SuperLU) or Jacobi-preconditioned CG."""
    if method == "cg":
        d = H.diagonal()
        M = spla.LinearOperator(H.shape, matvec=lambda v: v / d)
        p, info = spla.cg(H, rhs, M=M, rtol=1e-6, maxiter=2000)
        if info == 0:
            return p
    return spla.spsolve(H.tocsc(), rhs, permc_spec="MMD_AT_PLUS_A")


def projected_newton(obj, x: np.ndarray, h: float, tol: float, max_iter: int,
                     linear_solver: str = "direct") -> NewtonResult:
    """Minimise obj from x (N, 3). Returns the last iterate (never one rejected by the filters)."""
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
        pf = solve_linear(H, -g, linear_solver)
        p = np.zeros(x.size)
        p[free] = pf
        p = p.reshape(-1, 3)
        res = float(np.abs(pf).max()) / h if pf.size else 0.0
        md = obj.mass_dofs
        has_m = md > 0
        res_g = float(np.abs(g[has_m] / md[has_m]).max()) / h if has_m.any() else 0.0
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
    return NewtonResult(x, it, False, res, fails)
