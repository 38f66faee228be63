"""Per-body kernels of the affine (stiff) bodies in block descent: slot positions x_i = sum_r w_ir q_r,
the orthogonality term on a body's L A^T rows, the body's energy, gradient and 12 x 12 Hessian on the
block-descent objective (divided by h^2), an in-place 12 x 12 Cholesky solve, the largest admissible
fraction of a body step (every vertex of the body inside its displacement-bound set, bounds.py) and
the write-back of a body's rows to its vertices.

Used by the per-body sweep (affine_block.py) and the coupled step of all free bodies (joint_bodies.py).
AB, CT, FR, BL, BD are the named argument packs AffinePack (affine_block.py), ContactPack and FrictionPack
(vertex_contact.py), BodyPairs (body_plan.py) and Bounds (bounds.py).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from solver_server.contact.barrier_pair import pair_energy, pair_terms
from .body_terms import friction_block, friction_energy, friction_u, friction_u_hessian, slot_positions
from .bounds import ray_fraction

TRUNC_SLACK = 1.0e-9  # a step cut below 1 - this counts as cut


@njit(cache=True, fastmath=False, inline="always")
def vertex_pos(v, x, q, b, vbody, voff, xh, xh_start, out):
    """Position (3,) of vertex v into out: from the body rows q (4, 3) if v is on body b, else x[v]."""
    if vbody[v] == b:
        i = xh_start[b] + v - voff[b]
        for a in range(3):
            out[a] = q[0, a] + xh[i, 0] * q[1, a] + xh[i, 1] * q[2, a] + xh[i, 2] * q[3, a]
    else:
        for a in range(3):
            out[a] = x[v, a]


@njit(cache=True, fastmath=False, inline="always")
def body_slots(ids, k, x, q, b, vbody, voff, xh, xh_start, pos, X):
    """X (12,) = positions of the four slots of pair k (ids (K, 4)), body b's vertices from its rows q."""
    for i in range(4):
        vertex_pos(ids[k, i], x, q, b, vbody, voff, xh, xh_start, pos)
        for c in range(3):
            X[3 * i + c] = pos[c]


@njit(cache=True, fastmath=False, inline="always")
def slot_weights(v, b, voff, xh, xh_start, w):
    i = xh_start[b] + v - voff[b]
    w[0] = 1.0
    w[1] = xh[i, 0]
    w[2] = xh[i, 1]
    w[3] = xh[i, 2]


@njit(cache=True, fastmath=False, inline="always")
def orth_constraint(q, Lb, a):
    """A (into a (9,), row-major, A[k, j] = q[1 + j, k] / L) and the six entries of C = A A^T - I."""
    for k in range(3):
        for j in range(3):
            a[3 * k + j] = q[1 + j, k] / Lb
    c00 = a[0] * a[0] + a[1] * a[1] + a[2] * a[2] - 1.0
    c11 = a[3] * a[3] + a[4] * a[4] + a[5] * a[5] - 1.0
    c22 = a[6] * a[6] + a[7] * a[7] + a[8] * a[8] - 1.0
    c01 = a[0] * a[3] + a[1] * a[4] + a[2] * a[5]
    c02 = a[0] * a[6] + a[1] * a[7] + a[2] * a[8]
    c12 = a[3] * a[6] + a[4] * a[7] + a[5] * a[8]
    return c00, c11, c22, c01, c02, c12


@njit(cache=True, fastmath=False, inline="always")
def orth_energy_rows(q, Lb, kV, a):
    """kappa_A V |A A^T - I|_F^2 (J) at rows q."""
    c00, c11, c22, c01, c02, c12 = orth_constraint(q, Lb, a)
    return kV * (c00 * c00 + c11 * c11 + c22 * c22 + 2.0 * (c01 * c01 + c02 * c02 + c12 * c12))


@njit(cache=True, fastmath=False, inline="always")
def orth_add_rows(q, Lb, kV, a, g, H):
    """Add the orthogonality energy's gradient 4 kappa_A V C A and its Gauss-Newton Hessian
    4 kappa_A V (delta_kl (A^T A)_mj + A_km A_lj) (index pairs (kj), (lm)), both mapped to the L A^T
    rows, into g (12,), H (12, 12). The Gauss-Newton Hessian is the exact one (abd/orthogonality.py)
    without its C_kl delta_jm term (C = A A^T - I, |C| < 1e-3 on a rigid body): PSD in closed form,
    no 9 x 9 eigen-clamp."""
    c00, c11, c22, c01, c02, c12 = orth_constraint(q, Lb, a)
    C = ((c00, c01, c02), (c01, c11, c12), (c02, c12, c22))
    f = 4.0 * kV / Lb
    f2 = 4.0 * kV / (Lb * Lb)
    for k in range(3):
        for j in range(3):
            acc = 0.0
            for l in range(3):
                acc += C[k][l] * a[3 * l + j]
            g[3 * (1 + j) + k] += f * acc
    for j in range(3):
        for m in range(3):
            ata = a[j] * a[m] + a[3 + j] * a[3 + m] + a[6 + j] * a[6 + m]   # (A^T A)_jm
            for k in range(3):
                H[3 * (1 + j) + k, 3 * (1 + m) + k] += f2 * ata
                for l in range(3):
                    H[3 * (1 + j) + k, 3 * (1 + m) + l] += f2 * a[3 * k + m] * a[3 * l + j]


@njit(cache=True, fastmath=False)
def body_energy(b, q, x, y, inv_h2, AB, CT, FR, BL, X, pos, a):
    """E_b(q) (J / s^2 ... the sweep's units: the step objective divided by h^2) of body b at rows q
    (4, 3). BL: the barrier and friction pairs of each body (body_plan.BodyPairs)."""
    L, kV, mbar, voff, xh, xh_start, vbody = AB.L, AB.kV, AB.mbar, AB.voff, AB.xhat, AB.xh_start, AB.vbody
    e = 0.0
    for c in range(3):
        for s in range(4):
            for t in range(4):
                e += 0.5 * inv_h2 * mbar[b, s, t] * (q[s, c] - y[s, c]) * (q[t, c] - y[t, c])
    e += orth_energy_rows(q, L[b], kV[b], a)
    pids, pee, poff, peps, dhat, kappa = CT.ids, CT.is_ee, CT.off, CT.epsx, CT.dhat, CT.kappa
    fids = FR.ids
    bp_s, bp_k, bf_s, bf_k = BL.bp_start, BL.bp_pair, BL.bf_start, BL.bf_pair
    for j in range(bp_s[b], bp_s[b + 1]):
        k = bp_k[j]
        body_slots(pids, k, x, q, b, vbody, voff, xh, xh_start, pos, X)
        e += kappa * pair_energy(X, pee[k], poff[k], peps[k], dhat)
    for j in range(bf_s[b], bf_s[b + 1]):
        k = bf_k[j]
        body_slots(fids, k, x, q, b, vbody, voff, xh, xh_start, pos, X)
        e += friction_energy(k, X, FR)
    return e


@njit(cache=True, fastmath=False)
def body_grad_hess(b, q, x, y, inv_h2, AB, CT, FR, BL, g, H, SC, X, pos, a, wi, wj):
    """Gradient g (12,) and PSD Hessian H (12, 12) of E_b at q; DOF (row r, coordinate c) is 3 r + c.
    Only the pairs listed for the body (BL) are visited. SC: a barrier_pair.PairScratch."""
    L, kV, mbar, voff, xh, xh_start, vbody = AB.L, AB.kV, AB.mbar, AB.voff, AB.xhat, AB.xh_start, AB.vbody
    for i in range(12):
        g[i] = 0.0
        for j in range(12):
            H[i, j] = 0.0
    for c in range(3):
        for s in range(4):
            acc = 0.0
            for t in range(4):
                acc += mbar[b, s, t] * (q[t, c] - y[t, c])
                H[3 * s + c, 3 * t + c] += inv_h2 * mbar[b, s, t]
            g[3 * s + c] += inv_h2 * acc
    orth_add_rows(q, L[b], kV[b], a, g, H)
    pids, pee, poff, peps, dhat, kappa = CT.ids, CT.is_ee, CT.off, CT.epsx, CT.dhat, CT.kappa
    fids, fcoef, fT = FR.ids, FR.coef, FR.T
    bp_s, bp_k, bf_s, bf_k = BL.bp_start, BL.bp_pair, BL.bf_start, BL.bf_pair
    gp = SC.grad
    Hp = SC.hess
    slots = SC.slots
    for j in range(bp_s[b], bp_s[b + 1]):
        k = bp_k[j]
        slot_positions(pids, k, x, X)
        e, ns = pair_terms(X, pee[k], poff[k], peps[k], dhat, True, True, SC)
        if ns == 0:
            continue
        for i in range(4):
            u = pids[k, i]
            if vbody[u] != b:
                continue
            slot_weights(u, b, voff, xh, xh_start, wi)
            for r in range(4):
                for c in range(3):
                    g[3 * r + c] += kappa * wi[r] * gp[3 * i + c]
        for si in range(ns):
            ui = pids[k, slots[si]]
            if vbody[ui] != b:
                continue
            slot_weights(ui, b, voff, xh, xh_start, wi)
            for sj in range(ns):
                uj = pids[k, slots[sj]]
                if vbody[uj] != b:
                    continue
                slot_weights(uj, b, voff, xh, xh_start, wj)
                for r in range(4):
                    for s in range(4):
                        f = kappa * wi[r] * wj[s]
                        for c in range(3):
                            for d in range(3):
                                H[3 * r + c, 3 * s + d] += f * Hp[3 * si + c, 3 * sj + d]
    for j in range(bf_s[b], bf_s[b + 1]):
        k = bf_k[j]
        for r in range(4):
            wj[r] = 0.0      # cw = sum over the body's slots of c_i w_i
        for i in range(4):
            u = fids[k, i]
            if vbody[u] == b:
                slot_weights(u, b, voff, xh, xh_start, wi)
                for r in range(4):
                    wj[r] += fcoef[k, i] * wi[r]
        slot_positions(fids, k, x, X)
        u0, u1 = friction_u(k, X, FR)
        f, h00, h01, h11 = friction_u_hessian(k, u0, u1, FR)
        for c in range(3):
            pos[c] = fT[k, c, 0] * u0 + fT[k, c, 1] * u1
        for r in range(4):
            for c in range(3):
                g[3 * r + c] += f * wj[r] * pos[c]
        for c in range(3):
            for d in range(3):
                tt = friction_block(fT, k, c, d, h00, h01, h11)
                for r in range(4):
                    for s in range(4):
                        H[3 * r + c, 3 * s + d] += wj[r] * wj[s] * tt


@njit(cache=True, fastmath=False)
def chol_solve(H, g, out):
    """out = H^{-1} g for a symmetric positive definite n x n H (Cholesky on a copy; H untouched).
    Returns False (out zero) when a pivot is not positive."""
    n = g.shape[0]
    Lc = np.empty((n, n))
    for i in range(n):
        for j in range(i + 1):
            s = H[i, j]
            for k in range(j):
                s -= Lc[i, k] * Lc[j, k]
            if i == j:
                if not (s > 0.0) or not math.isfinite(s):
                    for m in range(n):
                        out[m] = 0.0
                    return False
                Lc[i, i] = math.sqrt(s)
            else:
                Lc[i, j] = s / Lc[j, j]
    for i in range(n):
        s = g[i]
        for k in range(i):
            s -= Lc[i, k] * out[k]
        out[i] = s / Lc[i, i]
    for i in range(n - 1, -1, -1):
        s = out[i]
        for k in range(i + 1, n):
            s -= Lc[k, i] * out[k]
        out[i] = s / Lc[i, i]
    return True


@njit(cache=True, fastmath=False)
def body_ray(b, x, q, dq, BD, AB, cur, dx, nb, nb_out):
    """Largest t in [0, 1] such that every vertex of body b stays in its admissible set along
    q + t dq (dq (4, 3)); the blocking vertex (or -1) is returned with its constraint normal in nb_out."""
    voff, nv, xh, xh_start = AB.voff, AB.nv, AB.xhat, AB.xh_start
    t = 1.0
    blk = -1
    for v in range(voff[b], voff[b] + nv[b]):
        i = xh_start[b] + v - voff[b]
        for a in range(3):
            cur[a] = q[0, a] + xh[i, 0] * q[1, a] + xh[i, 1] * q[2, a] + xh[i, 2] * q[3, a]
            dx[a] = dq[0, a] + xh[i, 0] * dq[1, a] + xh[i, 1] * dq[2, a] + xh[i, 2] * dq[3, a]
        tv = ray_fraction(v, cur, dx, BD, nb)
        if tv < t:
            t = tv
            blk = v
            for a in range(3):
                nb_out[a] = nb[a]
    return t, blk


@njit(cache=True, fastmath=False)
def write_body(b, q, zb, x, target, AB):
    """Store rows q of body b and its slaved vertices (x and, so the sweep's arrival test ignores them,
    target)."""
    voff, nv, xh, xh_start = AB.voff, AB.nv, AB.xhat, AB.xh_start
    for r in range(4):
        for a in range(3):
            zb[4 * b + r, a] = q[r, a]
    for v in range(voff[b], voff[b] + nv[b]):
        i = xh_start[b] + v - voff[b]
        for a in range(3):
            x[v, a] = q[0, a] + xh[i, 0] * q[1, a] + xh[i, 1] * q[2, a] + xh[i, 2] * q[3, a]
            target[v, a] = x[v, a]
