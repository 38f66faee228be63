"""Air on cloth: normal drag against the relative air velocity of each triangle, as a convex quadratic of one
implicit step (lagged normal, area and air velocity).

Each triangle t with area A_t and unit normal n_t (both taken at the step start x^n) moving at the mean
velocity vbar_t = (xbar_t - xhatbar_t) / h of its three vertices through air moving at u_t feels the force

    f_t = -k_t A_t n_t (n_t . (vbar_t - u_t))            (N; k_t the drag coefficient, Pa s / m),

spread equally over its vertices: a sheet falling flat at speed v feels k A v, edge-on nothing, and a
sheet at rest in wind of speed u across it is pushed with k A u. The force derives from the dissipation
potential Phi_t(v) = k_t A_t / 2 (n_t . (vbar_t - u_t))^2; the incremental potential adds h^3 Phi_t((x - x_hat)/h)
(the same h-scaling as Rayleigh damping, integrators/damping.py), i.e. per triangle

    E_t(x) = h c_t / 2 s_t(x)^2,   s_t = n_t . (xbar_t - xhatbar_t - h u_t)   (m),   c_t = k_t A_t  (N s / m),

with gradient h c_t s_t n_t / 3 on each vertex and Hessian blocks h c_t n_t n_t^T / 9 (PSD, rank one).
Terminal speed of a flat sheet of areal density rho_A in gravity g: v_t = rho_A g / k (exact fixed point
of the implicit step). Units: SI.
"""
from __future__ import annotations

import numpy as np
from numba import njit


def lagged_frame(x: np.ndarray, tris: np.ndarray) -> tuple:
    """(n (T, 3) unit normals, A (T,) areas in m^2) of triangles ``tris`` at positions ``x``; a degenerate
    triangle gets a zero normal (it then feels no air)."""
    c = np.cross(x[tris[:, 1]] - x[tris[:, 0]], x[tris[:, 2]] - x[tris[:, 0]])
    two_a = np.linalg.norm(c, axis=1)
    n = np.where(two_a[:, None] > 0.0, c / np.maximum(two_a, 1e-300)[:, None], 0.0)
    return np.ascontiguousarray(n), 0.5 * two_a


@njit(cache=True)
def drag_offsets(x, x_hat, tris, normal, air_disp):
    """s_t = n_t . (xbar_t - xhatbar_t - air_disp_t) (T,) in m; air_disp = h u_t (T, 3) m."""
    T = tris.shape[0]
    s = np.empty(T)
    for t in range(T):
        acc = 0.0
        for c in range(3):
            d = (x[tris[t, 0], c] + x[tris[t, 1], c] + x[tris[t, 2], c]
                 - x_hat[tris[t, 0], c] - x_hat[tris[t, 1], c] - x_hat[tris[t, 2], c]) / 3.0
            acc += normal[t, c] * (d - air_disp[t, c])
        s[t] = acc
    return s


@njit(cache=True)
def drag_energy(x, x_hat, tris, normal, air_disp, hc):
    """sum_t hc_t / 2 s_t^2 (J); hc = h k_t A_t (N s^2/m... i.e. kg, per triangle)."""
    s = drag_offsets(x, x_hat, tris, normal, air_disp)
    e = 0.0
    for t in range(tris.shape[0]):
        e += 0.5 * hc[t] * s[t] * s[t]
    return e


@njit(cache=True)
def drag_gradient(x, x_hat, tris, normal, air_disp, hc, n_verts):
    """dE/dx (3 n_verts,) in N: hc_t s_t n_t / 3 on each vertex of triangle t."""
    s = drag_offsets(x, x_hat, tris, normal, air_disp)
    g = np.zeros(3 * n_verts)
    for t in range(tris.shape[0]):
        w = hc[t] * s[t] / 3.0
        for a in range(3):
            v = tris[t, a]
            for c in range(3):
                g[3 * v + c] += w * normal[t, c]
    return g


@njit(cache=True)
def drag_hessian_elems(tris, normal, hc):
    """(T, 9, 9) element Hessians hc_t / 9 (1 1^T) (x) n_t n_t^T, N/m, in fem_common.hessian_pattern order."""
    T = tris.shape[0]
    H = np.zeros((T, 9, 9))
    for t in range(T):
        w = hc[t] / 9.0
        for a in range(3):
            for b in range(3):
                for i in range(3):
                    for j in range(3):
                        H[t, 3 * a + i, 3 * b + j] = w * normal[t, i] * normal[t, j]
    return H
