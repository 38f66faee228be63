"""Rod stretching: per edge E = (k l / 8) (|e|^2 / l^2 - 1)^2 with k = Young's modulus x cross-section
area (N), l the rest length (m): to first order (k l / 2) strain^2, without a square root (the book's
"mass-spring" form). Hessian block H = (k / (2l)) [(q - 1) I + 2 e e^T / l^2], q = |e|^2 / l^2, projected
by clamping its two eigenvalues (k/(2l))(3q - 1) along e and (k/(2l))(q - 1) across."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver_server.threads import ordered_sum


@njit(cache=True, fastmath=False, parallel=True)
def stretch_energy(x, edges, rest, k):
    out = np.empty(edges.shape[0])
    for i in prange(edges.shape[0]):
        e = x[edges[i, 1]] - x[edges[i, 0]]
        q = (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]) / rest[i] ** 2
        out[i] = k[i] * rest[i] / 8.0 * (q - 1.0) ** 2
    return ordered_sum(out)


@njit(cache=True, fastmath=False, parallel=True)
def stretch_gradient_elems(x, edges, rest, k):
    out = np.empty((edges.shape[0], 6))
    for i in prange(edges.shape[0]):
        e = x[edges[i, 1]] - x[edges[i, 0]]
        q = (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]) / rest[i] ** 2
        g = k[i] / (2.0 * rest[i]) * (q - 1.0) * e
        for a in range(3):
            out[i, a] = -g[a]
            out[i, 3 + a] = g[a]
    return out


@njit(cache=True, fastmath=False, parallel=True)
def stretch_hessian_elems(x, edges, rest, k, project):
    out = np.empty((edges.shape[0], 6, 6))
    for i in prange(edges.shape[0]):
        e = x[edges[i, 1]] - x[edges[i, 0]]
        l2 = rest[i] ** 2
        q = (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]) / l2
        c = k[i] / (2.0 * rest[i])
        ee = np.outer(e, e) / (q * l2) if q > 0 else np.zeros((3, 3))
        lam_par = c * (3.0 * q - 1.0)
        lam_perp = c * (q - 1.0)
        if project:
            lam_par = max(lam_par, 0.0)
            lam_perp = max(lam_perp, 0.0)
        H = lam_perp * (np.eye(3) - ee) + lam_par * ee
        for a in range(3):
            for b in range(3):
                out[i, a, b] = H[a, b]
                out[i, 3 + a, 3 + b] = H[a, b]
                out[i, a, 3 + b] = -H[a, b]
                out[i, 3 + a, b] = -H[a, b]
    return out
