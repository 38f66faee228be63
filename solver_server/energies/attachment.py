"""Attachments: a vertex tied to a point carried by a triangle of another body (model/attachments.py).

Attachment a holds vertex v_a at the target point

    y_a(x) = sum_j b_aj x_{t_aj} + o_a        (m)

of triangle t_a = (t_a0, t_a1, t_a2) with barycentric coordinates b_a (fixed at the start frame) and the offset
o_a = gamma_a n_a (gamma_a the vertex's signed height above the triangle at the start frame, n_a the triangle's
unit normal lagged at the step start). The coupling energy of one implicit step is the stiff quadratic

    E(x) = sum_a c_a / 2 |r_a|^2,   r_a = x_{v_a} - y_a(x)   (m),   c_a in kg (already multiplied by h^2 k_a)

with gradient c_a r_a on v_a and -c_a b_aj r_a on t_aj, and Hessian c_a (w w^T) (x) I_3, w = (1, -b_a0, -b_a1,
-b_a2): constant within a step and PSD (rank 3). Units: SI.
"""
from __future__ import annotations

import numpy as np
from numba import njit


def elements(verts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """(A, 4) int32 rows (v_a, t_a0, t_a1, t_a2): the vertices each attachment couples."""
    return np.ascontiguousarray(np.concatenate([np.asarray(verts, np.int32)[:, None], tris], axis=1), np.int32)


@njit(cache=True)
def residuals(x, elems, bary, offset):
    """r_a = x_v - sum_j b_j x_tj - o_a, (A, 3) in m."""
    A = elems.shape[0]
    r = np.empty((A, 3))
    for a in range(A):
        for c in range(3):
            r[a, c] = (x[elems[a, 0], c] - bary[a, 0] * x[elems[a, 1], c] - bary[a, 1] * x[elems[a, 2], c]
                       - bary[a, 2] * x[elems[a, 3], c] - offset[a, c])
    return r


@njit(cache=True)
def attach_energy(x, elems, bary, offset, coef):
    """sum_a coef_a / 2 |r_a|^2 (coef in kg: the step's h^2 k_a; result in kg m^2)."""
    r = residuals(x, elems, bary, offset)
    e = 0.0
    for a in range(elems.shape[0]):
        e += 0.5 * coef[a] * (r[a, 0] * r[a, 0] + r[a, 1] * r[a, 1] + r[a, 2] * r[a, 2])
    return e


@njit(cache=True)
def attach_gradient(x, elems, bary, offset, coef, n_verts):
    """dE/dx (3 n_verts,): coef_a r_a on v_a, -coef_a b_aj r_a on t_aj."""
    r = residuals(x, elems, bary, offset)
    g = np.zeros(3 * n_verts)
    for a in range(elems.shape[0]):
        for c in range(3):
            f = coef[a] * r[a, c]
            g[3 * elems[a, 0] + c] += f
            for j in range(3):
                g[3 * elems[a, 1 + j] + c] -= bary[a, j] * f
    return g


@njit(cache=True)
def attach_hessian_elems(bary, coef):
    """(A, 12, 12) element Hessians coef_a (w w^T) (x) I_3, w = (1, -b_0, -b_1, -b_2), in
    fem_common.hessian_pattern order of :func:`elements`."""
    A = bary.shape[0]
    H = np.zeros((A, 12, 12))
    w = np.empty(4)
    for a in range(A):
        w[0] = 1.0
        w[1] = -bary[a, 0]
        w[2] = -bary[a, 1]
        w[3] = -bary[a, 2]
        for i in range(4):
            for j in range(4):
                v = coef[a] * w[i] * w[j]
                for c in range(3):
                    H[a, 3 * i + c, 3 * j + c] = v
    return H
