"""Air on surfaces and rods: normal drag against the relative air velocity of each triangle (cloth, and the
boundary triangles of solid and stiff bodies) and cross drag on each rod segment (below), as convex quadratics of
one implicit step (lagged normal / tangent, area / length and air velocity).

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


# --- rods: drag across each segment -----------------------------------------------------------------------------
# A segment s = (a, b) of length l_s, width d_s (the rod's thickness) and unit tangent tau_s (both lagged at the
# step start) moving at vbar_s = (xbar_s - xhatbar_s) / h (xbar the mean of its two vertices) through air at u_s
# feels f_s = -k_s d_s l_s P_s (vbar_s - u_s), P_s = I - tau_s tau_s^T: the velocity across the segment is
# resisted, the velocity along it is not. Step energy h c_s / 2 |P_s (xbar_s - xhatbar_s - h u_s)|^2 with
# c_s = k_s d_s l_s; gradient h c_s q_s / 2 on each vertex (q_s = P_s(...), P_s q_s = q_s), Hessian blocks
# h c_s P_s / 4 (PSD). A horizontal rod of linear density rho pi d^2 / 4 falls at most rho pi d g / (4 k).

def lagged_tangents(x: np.ndarray, segs: np.ndarray) -> tuple:
    """(tau (S, 3) unit tangents, l (S,) lengths in m) of segments ``segs`` at positions ``x``."""
    e = x[segs[:, 1]] - x[segs[:, 0]]
    ln = np.linalg.norm(e, axis=1)
    tau = np.where(ln[:, None] > 0.0, e / np.maximum(ln, 1e-300)[:, None], 0.0)
    return np.ascontiguousarray(tau), ln


@njit(cache=True)
def segment_offsets(x, x_hat, segs, tau, air_disp):
    """q_s = P_s (xbar_s - xhatbar_s - air_disp_s) (S, 3) in m."""
    S = segs.shape[0]
    q = np.empty((S, 3))
    d = np.empty(3)
    for s in range(S):
        a, b = segs[s, 0], segs[s, 1]
        dot = 0.0
        for c in range(3):
            d[c] = 0.5 * (x[a, c] + x[b, c] - x_hat[a, c] - x_hat[b, c]) - air_disp[s, c]
            dot += tau[s, c] * d[c]
        for c in range(3):
            q[s, c] = d[c] - dot * tau[s, c]
    return q


@njit(cache=True)
def segment_energy(x, x_hat, segs, tau, air_disp, hc):
    """sum_s hc_s / 2 |q_s|^2 (J); hc = h k_s d_s l_s (kg)."""
    q = segment_offsets(x, x_hat, segs, tau, air_disp)
    e = 0.0
    for s in range(segs.shape[0]):
        e += 0.5 * hc[s] * (q[s, 0] * q[s, 0] + q[s, 1] * q[s, 1] + q[s, 2] * q[s, 2])
    return e


@njit(cache=True)
def segment_gradient(x, x_hat, segs, tau, air_disp, hc, n_verts):
    """dE/dx (3 n_verts,) in N: hc_s q_s / 2 on both vertices of segment s."""
    q = segment_offsets(x, x_hat, segs, tau, air_disp)
    g = np.zeros(3 * n_verts)
    for s in range(segs.shape[0]):
        for k in range(2):
            v = segs[s, k]
            for c in range(3):
                g[3 * v + c] += 0.5 * hc[s] * q[s, c]
    return g


@njit(cache=True)
def segment_hessian_elems(tau, hc):
    """(S, 6, 6) element Hessians hc_s / 4 [[P, P], [P, P]], P = I - tau tau^T (N/m), hessian_pattern order."""
    S = tau.shape[0]
    H = np.zeros((S, 6, 6))
    for s in range(S):
        w = 0.25 * hc[s]
        for i in range(3):
            for j in range(3):
                p = (1.0 if i == j else 0.0) - tau[s, i] * tau[s, j]
                for a in range(2):
                    for b in range(2):
                        H[s, 3 * a + i, 3 * b + j] = w * p
    return H
