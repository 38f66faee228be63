"""Attachments: a vertex tied to a point carried by a triangle of another body (model/attachments.py).

Attachment a holds vertex v_a at the target point

    y_a(x) = sum_j b_aj x_{t_aj} + gamma_a n_a(x)        (m)

of triangle t_a = (t_a0, t_a1, t_a2): barycentric coordinates b_a and height gamma_a fixed at the start frame,
n_a(x) = c / |c|, c = (x_t1 - x_t0) x (x_t2 - x_t0), the triangle's current unit normal (so a vertex held
above a turning surface turns with it, with no lag). The coupling energy of one implicit step is the stiff
quadratic in the residual

    E(x) = sum_a c_a / 2 |r_a|^2,   r_a = x_{v_a} - y_a(x)   (m),   c_a in kg (already h^2 k_a).

With J_a = dr_a/dx over (v_a, t_a0, t_a1, t_a2) = [I, -b_0 I - gamma N_0, -b_1 I - gamma N_1, -b_2 I - gamma N_2],
N_j = dn/dx_tj = (I - n n^T) / |c| dc/dx_tj (dc/dx_t0 = [e2 - e1]_x, dc/dx_t1 = -[e2]_x, dc/dx_t2 = [e1]_x,
e1 = x_t1 - x_t0, e2 = x_t2 - x_t0, [a]_x b = a x b), the gradient is c_a J_a^T r_a (exact) and the Hessian
returned is the Gauss-Newton matrix c_a J_a^T J_a: PSD, and exact wherever r_a = 0 (what the stiff coupling
holds to micrometres) or gamma_a = 0 (then J_a is constant: (1, -b) (x) I_3). The neglected term is
c_a gamma_a sum_k r_ak d^2 n_k, of the order of the residual. Units: SI.
"""
from __future__ import annotations

import numpy as np
from numba import njit


def elements(verts: np.ndarray, tris: np.ndarray) -> np.ndarray:
    """(A, 4) int32 rows (v_a, t_a0, t_a1, t_a2): the vertices each attachment couples."""
    return np.ascontiguousarray(np.concatenate([np.asarray(verts, np.int32)[:, None], tris], axis=1), np.int32)


@njit(cache=True)
def _skew(a, out, sign):
    """out += sign [a]_x (the matrix of b -> a x b)."""
    out[0, 1] -= sign * a[2]
    out[0, 2] += sign * a[1]
    out[1, 0] += sign * a[2]
    out[1, 2] -= sign * a[0]
    out[2, 0] -= sign * a[1]
    out[2, 1] += sign * a[0]


@njit(cache=True)
def residual_jacobian(x, elem, bary, height, r, J):
    """Fill r (3,) = r_a and J (3, 12) = dr_a/d(x_v, x_t0, x_t1, x_t2) of one attachment (module doc)."""
    t0, t1, t2 = elem[1], elem[2], elem[3]
    e1 = x[t1] - x[t0]
    e2 = x[t2] - x[t0]
    c = np.cross(e1, e2)
    ln = np.sqrt(c @ c)
    n = c / ln if ln > 1e-300 else np.zeros(3)
    for k in range(3):
        r[k] = (x[elem[0], k] - bary[0] * x[t0, k] - bary[1] * x[t1, k] - bary[2] * x[t2, k] - height * n[k])
    J[:, :] = 0.0
    for k in range(3):
        J[k, k] = 1.0
        for j in range(3):
            J[k, 3 + 3 * j + k] = -bary[j]
    if height != 0.0 and ln > 1e-300:
        D = np.zeros((3, 3, 3))          # dc/dx_tj
        _skew(e2 - e1, D[0], 1.0)
        _skew(e2, D[1], -1.0)
        _skew(e1, D[2], 1.0)
        P = (np.eye(3) - np.outer(n, n)) / ln
        for j in range(3):
            N = P @ D[j]
            for k in range(3):
                for m in range(3):
                    J[k, 3 + 3 * j + m] -= height * N[k, m]


@njit(cache=True)
def residuals(x, elems, bary, height):
    """r_a (A, 3) in m."""
    A = elems.shape[0]
    out = np.empty((A, 3))
    r = np.empty(3)
    J = np.empty((3, 12))
    for a in range(A):
        residual_jacobian(x, elems[a], bary[a], height[a], r, J)
        out[a] = r
    return out


@njit(cache=True)
def attach_energy(x, elems, bary, height, coef):
    """sum_a coef_a / 2 |r_a|^2 (coef in kg: the step's h^2 k_a; result in kg m^2)."""
    rr = residuals(x, elems, bary, height)
    e = 0.0
    for a in range(elems.shape[0]):
        e += 0.5 * coef[a] * (rr[a, 0] * rr[a, 0] + rr[a, 1] * rr[a, 1] + rr[a, 2] * rr[a, 2])
    return e


@njit(cache=True)
def attach_gradient(x, elems, bary, height, coef, n_verts):
    """dE/dx (3 n_verts,): coef_a J_a^T r_a."""
    g = np.zeros(3 * n_verts)
    r = np.empty(3)
    J = np.empty((3, 12))
    for a in range(elems.shape[0]):
        residual_jacobian(x, elems[a], bary[a], height[a], r, J)
        for i in range(4):
            v = elems[a, i]
            for m in range(3):
                s = 0.0
                for k in range(3):
                    s += J[k, 3 * i + m] * r[k]
                g[3 * v + m] += coef[a] * s
    return g


@njit(cache=True)
def attach_hessian_elems(x, elems, bary, height, coef):
    """(A, 12, 12) Gauss-Newton element Hessians coef_a J_a^T J_a (N/m ... kg in the step's units), in
    fem_common.hessian_pattern order of :func:`elements`."""
    A = elems.shape[0]
    H = np.zeros((A, 12, 12))
    r = np.empty(3)
    J = np.empty((3, 12))
    for a in range(A):
        residual_jacobian(x, elems[a], bary[a], height[a], r, J)
        H[a] = coef[a] * (J.T @ J)
    return H
