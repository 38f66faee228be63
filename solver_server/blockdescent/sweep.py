"""The block-descent sweep: Gauss-Seidel over colours, a 3x3 Newton step per vertex, Chebyshev
acceleration across sweeps, inside the displacement bounds of the last contact detection.

Per vertex i (book "Optimization time integrator" restricted to one vertex; VBD Sec. 3):
  g_i = m_i/h^2 (x_i - y_i) + dPsi/dx_i + kappa dB/dx_i + dD/dx_i,   H_i = m_i/h^2 I + blocks,
  x_i <- x_i - H_i^{-1} g_i,
then the new position is projected onto the vertex's ball (centre c_i, radius r_i: bounds.py) and,
when the vertex belongs to tetrahedra, the move is shortened so each of them keeps at least
VOLUME_KEEP of its volume: a tet's volume is affine in one vertex's position, so the test is
exact. Prescribed vertices (colliders, pins) step straight to their targets, bounded the same
way. Everything runs in one numba call per batch of sweeps (no Python per colour or vertex).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .vertex_contact import barrier_vertex, friction_vertex
from .vertex_elastic import bending_vertex, membrane_vertex, rod_stretch_vertex, tet_vertex, tet_volume_moving

VOLUME_KEEP = 0.1      # one vertex move keeps >= 10% of each incident tet's volume
TRUNC_SLACK = 1.0e-9   # relative: a step cut by more than this counts as truncated


@njit(cache=True, fastmath=False)
def _solve3(H, g, out):
    """out = H^{-1} g for a symmetric positive definite 3x3 H (adjugate; det > 0)."""
    a, b, c = H[0, 0], H[0, 1], H[0, 2]
    d, e, f = H[1, 1], H[1, 2], H[2, 2]
    A = d * f - e * e
    B = c * e - b * f
    C = b * e - c * d
    det = a * A + b * B + c * C
    if not (det > 0.0) or not math.isfinite(det):
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
        return False
    D = a * f - c * c
    E = b * c - a * e
    Fv = a * d - b * b
    out[0] = (A * g[0] + B * g[1] + C * g[2]) / det
    out[1] = (B * g[0] + D * g[1] + E * g[2]) / det
    out[2] = (C * g[0] + E * g[1] + Fv * g[2]) / det
    return True


@njit(cache=True, fastmath=False)
def _vertex_step(v, x, y, mass, inv_h2, EL, CT, FR, g, H, J, s5, dv, r, X, p):
    """Newton target p (3,) of free vertex v; returns False when the local system is singular."""
    (tris, tri_Dm, tri_w, tri_mu, tri_lam, vt_s, vt_e, vt_k,
     hin, hin_kw, hin_d0, vh_s, vh_e, vh_k,
     tets, tet_Dm, tet_vol, tet_mu, tet_lam, tet_model, vT_s, vT_e, vT_k,
     rods, rod_rest, rod_k, vr_s, vr_e, vr_k,
     rb, rb_kw, rb_d0, vb_s, vb_e, vb_k) = EL
    mh = mass[v] * inv_h2
    for a in range(3):
        g[a] = mh * (x[v, a] - y[v, a])
        for b in range(3):
            H[a, b] = mh if a == b else 0.0
    for j in range(vt_s[v], vt_s[v + 1]):
        e = vt_e[j]
        membrane_vertex(x, tris[e], tri_Dm[e], tri_w[e], tri_mu[e], tri_lam[e], vt_k[j], g, H, True)
    for j in range(vh_s[v], vh_s[v + 1]):
        e = vh_e[j]
        bending_vertex(0, x, hin[e], hin_kw[e], hin_d0[e], vh_k[j], g, H, J, s5, dv, r)
    for j in range(vT_s[v], vT_s[v + 1]):
        e = vT_e[j]
        tet_vertex(x, tets[e], tet_Dm[e], tet_vol[e], tet_mu[e], tet_lam[e], tet_model[e], vT_k[j], g, H, True)
    for j in range(vr_s[v], vr_s[v + 1]):
        e = vr_e[j]
        rod_stretch_vertex(x, rods[e], rod_rest[e], rod_k[e], vr_k[j], g, H)
    for j in range(vb_s[v], vb_s[v + 1]):
        e = vb_e[j]
        bending_vertex(1, x, rb[e], rb_kw[e], rb_d0[e], vb_k[j], g, H, J, s5, dv, r)
    (pids, pee, poff, peps, vp_s, vp_e, vp_k, dhat, kappa) = CT
    for j in range(vp_s[v], vp_s[v + 1]):
        barrier_vertex(x, pids, pee, poff, peps, vp_e[j], vp_k[j], dhat, kappa, g, H, X)
    (fids, fcoef, fT, fml, vf_s, vf_e, vf_k, x_fr, eps_f) = FR
    for j in range(vf_s[v], vf_s[v + 1]):
        friction_vertex(x, x_fr, fids, fcoef, fT, fml, vf_e[j], vf_k[j], eps_f, g, H)
    ok = _solve3(H, g, dv)
    for a in range(3):
        p[a] = x[v, a] - dv[a]
    return ok


@njit(cache=True, fastmath=False)
def _bound_and_keep_tets(v, x, p, center, radius, EL):
    """Project p onto v's ball and shorten the move x_v -> p so incident tets keep VOLUME_KEEP of
    their volume; returns 1 if the ball cut the step."""
    cut = 0
    d0 = p[0] - center[v, 0]
    d1 = p[1] - center[v, 1]
    d2 = p[2] - center[v, 2]
    dn = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    rv = radius[v]
    if dn > rv * (1.0 + TRUNC_SLACK):
        sc = rv / dn
        p[0] = center[v, 0] + d0 * sc
        p[1] = center[v, 1] + d1 * sc
        p[2] = center[v, 2] + d2 * sc
        cut = 1
    tets = EL[14]
    vT_s, vT_e, vT_k = EL[20], EL[21], EL[22]
    t = 1.0
    for j in range(vT_s[v], vT_s[v + 1]):
        e = vT_e[j]
        V0 = tet_volume_moving(x, tets[e], vT_k[j], x[v])
        V1 = tet_volume_moving(x, tets[e], vT_k[j], p)
        floor = VOLUME_KEEP * V0
        if V1 < floor and V0 > V1:
            t = min(t, (V0 - floor) / (V0 - V1))
    if t < 1.0:
        t = max(t, 0.0)
        for a in range(3):
            p[a] = x[v, a] + t * (p[a] - x[v, a])
    return cut


@njit(cache=True, fastmath=False, parallel=True)
def _sweep_color(verts, x, y, mass, inv_h2, presc, target, center, radius, EL, CT, FR, newp, stat):
    """New positions of one colour's vertices into newp (len, 3); stat[j] = (residual length (m), cut):
    the residual length is |g_i| h^2 / m_i, the move the vertex's force would cause on its inertia alone."""
    nv = verts.shape[0]
    nch = max(1, min(nv, 32))
    for ch in prange(nch):
        g = np.empty(3)
        H = np.empty((3, 3))
        J = np.zeros((3, 12))
        s5 = np.empty((5, 3))
        dv = np.empty(3)
        r = np.empty(3)
        X = np.empty(12)
        p = np.empty(3)
        for j in range(ch * nv // nch, (ch + 1) * nv // nch):
            v = verts[j]
            res = 0.0
            if presc[v]:
                for a in range(3):
                    p[a] = target[v, a]
            else:
                if not _vertex_step(v, x, y, mass, inv_h2, EL, CT, FR, g, H, J, s5, dv, r, X, p):
                    for a in range(3):
                        p[a] = x[v, a]
                # residual as a length: the move the force g would cause on the vertex's inertia alone
                res = math.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]) / (mass[v] * inv_h2)
            cut = _bound_and_keep_tets(v, x, p, center, radius, EL)
            for a in range(3):
                newp[j, a] = p[a]
            stat[j, 0] = res
            stat[j, 1] = cut
    for j in range(nv):
        v = verts[j]
        for a in range(3):
            x[v, a] = newp[j, a]


@njit(cache=True, fastmath=False)
def _accelerate(x, xbar, x_prev2, omega, presc, center, radius, tets, vol_before):
    """x = omega (xbar - x_prev2) + x_prev2 for free vertices, projected onto the balls; falls back to
    xbar (returns False) if any tet would keep less than VOLUME_KEEP of its volume at xbar."""
    n = x.shape[0]
    for v in range(n):
        if presc[v]:
            for a in range(3):
                x[v, a] = xbar[v, a]
            continue
        d = 0.0
        for a in range(3):
            x[v, a] = omega * (xbar[v, a] - x_prev2[v, a]) + x_prev2[v, a]
            d += (x[v, a] - center[v, a]) ** 2
        d = math.sqrt(d)
        if d > radius[v]:
            sc = radius[v] / d
            for a in range(3):
                x[v, a] = center[v, a] + (x[v, a] - center[v, a]) * sc
    for e in range(tets.shape[0]):
        V = tet_volume_moving(x, tets[e], 0, x[tets[e, 0]])
        if V < VOLUME_KEEP * vol_before[e]:
            for v in range(n):
                for a in range(3):
                    x[v, a] = xbar[v, a]
            return False
    return True


@njit(cache=True, fastmath=False)
def _tet_volumes(x, tets, out):
    for e in range(tets.shape[0]):
        out[e] = tet_volume_moving(x, tets[e], 0, x[tets[e, 0]])


@njit(cache=True, fastmath=False)
def run_sweeps(max_sweeps, x, y, mass, inv_h2, presc, target, center, radius, EL, CT, FR,
               col_start, col_verts, rho, tol, presc_tol, x_prev1, x_prev2, k_cheb, omega, out):
    """Up to max_sweeps Gauss-Seidel sweeps over all colours, with Chebyshev acceleration
    (spectral-radius estimate rho; 0 switches it off). Stops early when the largest free-vertex
    step is below tol (m) and every prescribed vertex is within presc_tol (m) of its target
    (out[3] = 1), or when a step was cut by a ball (out[2] = 1: the caller re-detects contact).
    x_prev1/x_prev2, the sweep count k_cheb and omega carry the acceleration across calls.
    out = (sweeps done, largest free residual length (m), cut, converged, Chebyshev count, omega after)."""
    n = x.shape[0]
    tets = EL[14]
    vol_before = np.empty(tets.shape[0])
    ncol = col_start.shape[0] - 1
    maxlen = 0
    for c in range(ncol):
        maxlen = max(maxlen, col_start[c + 1] - col_start[c])
    newp = np.empty((maxlen, 3))
    stat = np.empty((maxlen, 2))
    xbar = np.empty_like(x)
    done = 0
    big = 0.0
    cut = 0
    conv = 0
    for it in range(max_sweeps):
        for v in range(n):
            for a in range(3):
                x_prev2[v, a] = x_prev1[v, a]
                x_prev1[v, a] = x[v, a]
        big = 0.0
        cut = 0
        for c in range(ncol):
            verts = col_verts[col_start[c]:col_start[c + 1]]
            nv = verts.shape[0]
            _sweep_color(verts, x, y, mass, inv_h2, presc, target, center, radius, EL, CT, FR, newp[:nv],
                         stat[:nv])
            for j in range(nv):
                if stat[j, 1] > 0:
                    cut = 1
                if not presc[verts[j]] and stat[j, 0] > big:
                    big = stat[j, 0]
        done += 1
        k_cheb += 1
        if rho > 0.0 and cut == 0:
            if k_cheb == 1:
                omega = 1.0
            elif k_cheb == 2:
                omega = 2.0 / (2.0 - rho * rho)
            else:
                omega = 4.0 / (4.0 - rho * rho * omega)
            if k_cheb >= 2:
                for v in range(n):
                    for a in range(3):
                        xbar[v, a] = x[v, a]
                _tet_volumes(x, tets, vol_before)
                if not _accelerate(x, xbar, x_prev2, omega, presc, center, radius, tets, vol_before):
                    k_cheb = 0
        else:
            k_cheb = 0
        reached = True
        for v in range(n):
            if presc[v]:
                d = 0.0
                for a in range(3):
                    d += (x[v, a] - target[v, a]) ** 2
                if d > presc_tol * presc_tol:
                    reached = False
                    break
        if big < tol and reached:
            conv = 1
            break
        if cut:
            break
    out[0] = done
    out[1] = big
    out[2] = cut
    out[3] = conv
    out[4] = k_cheb
    out[5] = omega
