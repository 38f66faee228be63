"""Small helpers shared by the element kernels: polar SVD, scatter of per-element
gradients into the global vector and COO index patterns of per-element Hessians."""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, fastmath=False)
def polar_svd(F):
    """F = U diag(s) V^T with U, V rotations (det +1); s[2] may be negative (inverted element).
    The book's "Polar SVD" algorithm."""
    U, s, Vt = np.linalg.svd(F)
    U = U.copy()
    V = Vt.T.copy()
    s = s.copy()
    if np.linalg.det(U) < 0.0:
        U[:, 2] *= -1.0
        s[2] *= -1.0
    if np.linalg.det(V) < 0.0:
        V[:, 2] *= -1.0
        s[2] *= -1.0
    return U, s, V


@njit(cache=True, fastmath=False)
def scatter_gradient(elem_grad, elems, n_verts):
    """Sum per-element gradients (E, k*3) of elements (E, k) into a (n_verts*3,) vector."""
    g = np.zeros(n_verts * 3)
    k = elems.shape[1]
    for e in range(elems.shape[0]):
        for a in range(k):
            v = elems[e, a]
            for c in range(3):
                g[3 * v + c] += elem_grad[e, 3 * a + c]
    return g


@njit(cache=True, fastmath=False, parallel=True)
def hessian_pattern(elems):
    """COO (rows, cols) of the dense (3k x 3k) blocks of every element, flattened element by element
    in row-major order: matches ``elem_hess.reshape(-1)`` for elem_hess of shape (E, 3k, 3k)."""
    E, k = elems.shape
    m = 3 * k
    rows = np.empty(E * m * m, np.int64)
    cols = np.empty(E * m * m, np.int64)
    for e in prange(E):
        base = e * m * m
        for a in range(m):
            ra = 3 * elems[e, a // 3] + a % 3
            for b in range(m):
                rows[base + a * m + b] = ra
                cols[base + a * m + b] = 3 * elems[e, b // 3] + b % 3
    return rows, cols
