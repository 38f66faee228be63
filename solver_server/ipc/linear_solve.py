"""Linear solves of the Newton system H p = -g (H sparse SPD over the free DOFs, N/m; p in metres).

Measured on Newton systems of the cloth drape (docs/solver.md, "Linear solver"): SuperLU through
``splu`` with ``SymmetricMode``, the MMD_AT_PLUS_A ordering and diagonal pivots (H is SPD, no row
interchanges needed) takes 0.2 s on the 64^2 drape's 12,675-DOF system where ``spsolve`` (same ordering
but partial pivoting, which destroys the symmetric ordering's fill bound) took 49 s; COLAMD in
symmetric mode is 1.5x slower, Jacobi / 3x3 block-Jacobi CG at rtol 1e-6 needs ~700 iterations and
is no faster, CHOLMOD (cholespy) is on par. ``"direct"`` is therefore the default; ``"cg"`` (3x3 block-Jacobi PCG, warm
started from the previous direction) is kept for comparison in scripts/bench_ipc.py.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

METHODS = ("direct", "cg")


def _block_jacobi_inverse(H: sp.csr_matrix) -> np.ndarray:
    """Inverses (n, 3, 3) of the 3x3 diagonal blocks of H (one block per vertex)."""
    C = H.tocoo()
    m = (C.row // 3) == (C.col // 3)
    B = np.zeros((H.shape[0] // 3, 3, 3))
    np.add.at(B, (C.row[m] // 3, C.row[m] % 3, C.col[m] % 3), C.data[m])
    return np.linalg.inv(B)


class LinearSolver:
    """Solves H p = rhs for SPD H; keeps the previous solution as the CG warm start."""

    def __init__(self, method: str = "direct", rtol: float = 1e-6):
        if method not in METHODS:
            raise ValueError(f"linear solver must be one of {METHODS}, got {method!r}")
        self.method = method
        self.rtol = float(rtol)
        self._prev = None
        self.cg_iterations = 0

    def solve(self, H: sp.csr_matrix, rhs: np.ndarray) -> np.ndarray:
        if self.method == "cg" and H.shape[0] % 3 == 0:
            p = self._cg(H, rhs)
            if p is not None:
                return p
        return solve_direct(H, rhs)

    def _cg(self, H, rhs):
        Binv = _block_jacobi_inverse(H)
        M = spla.LinearOperator(H.shape, matvec=lambda v: np.einsum("nij,nj->ni", Binv, v.reshape(-1, 3)).ravel())
        x0 = self._prev if (self._prev is not None and self._prev.shape == rhs.shape) else None
        count = [0]
        p, info = spla.cg(H, rhs, x0=x0, M=M, rtol=self.rtol, maxiter=5000,
                          callback=lambda _x: count.__setitem__(0, count[0] + 1))
        self.cg_iterations += count[0]
        if info != 0:
            return None
        self._prev = p
        return p


def solve_direct(H: sp.spmatrix, rhs: np.ndarray) -> np.ndarray:
    """Sparse LU (SuperLU) in symmetric mode, MMD on A^T + A, diagonal pivots; H must be SPD."""
    lu = spla.splu(sp.csc_matrix(H), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                   options=dict(SymmetricMode=True))
    return lu.solve(rhs)
