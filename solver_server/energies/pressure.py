"""Internal pressure of a closed cloth: the energy -p V(x) with V the enclosed volume.

V = sum_t x_a . (x_b x x_c) / 6 over the triangles (a, b, c) of an outward-oriented closed surface (the
divergence theorem), so a per-triangle pressure p_t gives E = -sum_t p_t x_a . (x_b x x_c) / 6 (J, p in Pa,
x in m). Gradient on vertex a of t: -p_t (x_b x x_c) / 6 (the pressure force p A n / 3 on each vertex,
exactly), cyclically for b, c. Hessian blocks: d2V/dx_a dx_b = -[x_c]_x / 6, d2V/dx_a dx_c = [x_b]_x / 6,
d2V/dx_b dx_c = -[x_a]_x / 6 (skew, zero diagonal blocks): indefinite, so the solver gets each element's
9x9 block projected to PSD (negative eigenvalues clamped); ``project=False`` gives the exact one (tests).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def enclosed_volume(x, tris):
    """sum_t x_a . (x_b x x_c) / 6 (m^3) over the triangles (outward orientation: positive)."""
    v = 0.0
    for t in range(tris.shape[0]):
        a, b, c = x[tris[t, 0]], x[tris[t, 1]], x[tris[t, 2]]
        v += (a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2])
              + a[2] * (b[0] * c[1] - b[1] * c[0])) / 6.0
    return v


@njit(cache=True)
def pressure_energy(x, tris, p):
    """-sum_t p_t x_a . (x_b x x_c) / 6 (J)."""
    e = 0.0
    for t in range(tris.shape[0]):
        a, b, c = x[tris[t, 0]], x[tris[t, 1]], x[tris[t, 2]]
        e -= p[t] * (a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2])
                     + a[2] * (b[0] * c[1] - b[1] * c[0])) / 6.0
    return e


@njit(cache=True)
def _cross(u, v):
    return np.array([u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]])


@njit(cache=True)
def pressure_gradient(x, tris, p, n_verts):
    """dE/dx (3 n_verts,) in N."""
    g = np.zeros(3 * n_verts)
    for t in range(tris.shape[0]):
        for k in range(3):
            a = tris[t, k]
            gb = _cross(x[tris[t, (k + 1) % 3]], x[tris[t, (k + 2) % 3]])
            for c in range(3):
                g[3 * a + c] -= p[t] * gb[c] / 6.0
    return g


@njit(cache=True)
def _skew(w):
    S = np.zeros((3, 3))
    S[0, 1], S[0, 2], S[1, 2] = -w[2], w[1], -w[0]
    S[1, 0], S[2, 0], S[2, 1] = w[2], -w[1], w[0]
    return S


@njit(cache=True, parallel=True)
def pressure_hessian_elems(x, tris, p, project):
    """(T, 9, 9) element Hessians of -p_t V_t (N/m), PSD-projected when ``project``."""
    T = tris.shape[0]
    H = np.zeros((T, 9, 9))
    for t in prange(T):
        xa, xb, xc = x[tris[t, 0]], x[tris[t, 1]], x[tris[t, 2]]
        s = -p[t] / 6.0
        Hab = -_skew(xc) * s
        Hac = _skew(xb) * s
        Hbc = -_skew(xa) * s
        h = np.zeros((9, 9))
        for i in range(3):
            for j in range(3):
                h[i, 3 + j] = Hab[i, j]
                h[3 + j, i] = Hab[i, j]
                h[i, 6 + j] = Hac[i, j]
                h[6 + j, i] = Hac[i, j]
                h[3 + i, 6 + j] = Hbc[i, j]
                h[6 + j, 3 + i] = Hbc[i, j]
        if project:
            w, Q = np.linalg.eigh(h)
            for k in range(9):
                w[k] = max(w[k], 0.0)
            h = (Q * w) @ Q.T
        H[t] = h
    return H
