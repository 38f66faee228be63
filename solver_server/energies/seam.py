"""Sewing: each seam (a loose edge of a cloth mesh, Blender's convention) is a zero-rest-length spring
E = k / 2 |x_a - x_b|^2 (J; k in N/m, x in m) pulling its two vertices together. Gradient k (x_a - x_b) on a,
the opposite on b; Hessian k [[I, -I], [-I, I]] (PSD, constant). The contact barrier keeps the two panels
apart by the contact gap, so a closed seam holds at a gap below d_hat, never crossing."""
from __future__ import annotations

import numpy as np
from numba import njit


def loose_edges(edges: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """(S, 2) int32: the edges of ``edges`` that are no edge of any triangle of ``tris`` (seams)."""
    if not len(edges):
        return np.zeros((0, 2), np.int32)
    e = np.sort(np.asarray(edges, np.int64), axis=1)
    t = np.asarray(tris, np.int64)
    fe = np.sort(np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]), axis=1) if len(t) else np.zeros((0, 2))
    n = int(max(e.max(), fe.max() if len(fe) else 0)) + 1
    loose = ~np.isin(e[:, 0] * n + e[:, 1], fe[:, 0] * n + fe[:, 1])
    return np.ascontiguousarray(e[loose], np.int32)


@njit(cache=True)
def seam_energy(x, seams, k):
    """sum_s k_s / 2 |x_a - x_b|^2 (J)."""
    e = 0.0
    for s in range(seams.shape[0]):
        d2 = 0.0
        for c in range(3):
            d = x[seams[s, 0], c] - x[seams[s, 1], c]
            d2 += d * d
        e += 0.5 * k[s] * d2
    return e


@njit(cache=True)
def seam_gradient(x, seams, k, n_verts):
    """dE/dx (3 n_verts,) in N."""
    g = np.zeros(3 * n_verts)
    for s in range(seams.shape[0]):
        a, b = seams[s, 0], seams[s, 1]
        for c in range(3):
            f = k[s] * (x[a, c] - x[b, c])
            g[3 * a + c] += f
            g[3 * b + c] -= f
    return g


@njit(cache=True)
def seam_hessian_elems(k):
    """(S, 6, 6) element Hessians k_s [[I, -I], [-I, I]] (N/m), fem_common.hessian_pattern order."""
    S = k.shape[0]
    H = np.zeros((S, 6, 6))
    for s in range(S):
        for c in range(3):
            H[s, c, c] = k[s]
            H[s, 3 + c, 3 + c] = k[s]
            H[s, c, 3 + c] = -k[s]
            H[s, 3 + c, c] = -k[s]
    return H
