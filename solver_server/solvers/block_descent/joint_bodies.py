"""One Newton step on all free affine bodies at once (the coupled body solve of the Fast solver).

Block Gauss-Seidel over bodies (affine_block.affine_sweep) converges slowly on a chain of stiff
contacts: a stack of n boxes passes its load one body per colour, and within the fixed sweep budget the
stack's bending mode stays soft (a 10-box stack sways and walks by mm/s). This step solves the bodies'
coupled 12 nb-DOF Newton system with every other DOF held: the diagonal 12 x 12 blocks are the
body-pass blocks (affine_block.body_grad_hess), the off-diagonal blocks W_i^T H_ij W_j come from the
barrier and friction pairs that span two free bodies. It is solved by conjugate gradients
preconditioned with the diagonal blocks (the matrix is symmetric positive definite: inertia plus PSD
terms). The step is shortened so every vertex of every body stays in its displacement-bound set
(one common fraction, the minimum of affine_block._body_ray over the bodies: each vertex moves on a
straight segment inside its own convex set, so bounds.py's no-intersection argument holds unchanged)
and backtracked on the bodies' total objective (inertia + orthogonality + each pair once).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from solver_server.contact.barrier_pair import pair_energy, pair_terms
from . import body_kernels as _bk
from .body_terms import (body_scratch, friction_block, friction_energy, friction_u, friction_u_hessian, ray_scratch,
                         slot_positions)
from .body_plan import body_pairs, coupling_keys

CG_ITERATIONS = 60     # preconditioned CG iterations at most
CG_TOL = 1.0e-8        # relative residual of the CG solve
BACKTRACK = 8          # halvings of the joint step before it is dropped


@njit(cache=True, fastmath=False, inline="always")
def _pos(v, x, Q, vbody, free, xh, xh_start, voff, out):
    """Position of vertex v: from the trial rows Q (4 nb, 3) if it is on a free body, else x[v]."""
    b = vbody[v]
    if b >= 0 and free[b]:
        i = xh_start[b] + v - voff[b]
        for a in range(3):
            out[a] = (Q[4 * b, a] + xh[i, 0] * Q[4 * b + 1, a] + xh[i, 1] * Q[4 * b + 2, a]
                      + xh[i, 2] * Q[4 * b + 3, a])
    else:
        for a in range(3):
            out[a] = x[v, a]


@njit(cache=True, fastmath=False, inline="always")
def _trial_slots(ids, k, x, Q, vbody, free, xh, xh_start, voff, pos, X):
    """X (12,) = positions of the four slots of pair k (ids (K, 4)) at the trial rows Q (_pos)."""
    for i in range(4):
        _pos(ids[k, i], x, Q, vbody, free, xh, xh_start, voff, pos)
        for c in range(3):
            X[3 * i + c] = pos[c]


@njit(cache=True, fastmath=False)
def joint_energy(Q, x, inv_h2, AB, CT, FR, free, pmask, fmask):
    """The free bodies' objective at rows Q: inertia + orthogonality per body, barrier and friction of
    every pair touching a free body once (pmask / fmask: those pairs)."""
    yb, L, kV, mbar = AB.inertia, AB.L, AB.kV, AB.mbar
    voff, xh, xh_start, vbody = AB.voff, AB.xhat, AB.xh_start, AB.vbody
    a = np.empty(9)
    X = np.empty(12)
    pos = np.empty(3)
    e = 0.0
    for b in range(voff.shape[0]):
        if not free[b]:
            continue
        q = Q[4 * b:4 * b + 4]
        for c in range(3):
            for s in range(4):
                for t in range(4):
                    e += 0.5 * inv_h2 * mbar[b, s, t] * (q[s, c] - yb[4 * b + s, c]) * (q[t, c] - yb[4 * b + t, c])
        e += _bk.orth_energy_rows(q, L[b], kV[b], a)
    pids, pee, poff, peps, dhat, kappa = CT.ids, CT.is_ee, CT.off, CT.epsx, CT.dhat, CT.kappa
    fids = FR.ids
    for k in range(pids.shape[0]):
        if not pmask[k]:
            continue
        _trial_slots(pids, k, x, Q, vbody, free, xh, xh_start, voff, pos, X)
        e += kappa * pair_energy(X, pee[k], poff[k], peps[k], dhat)
    for k in range(fids.shape[0]):
        if not fmask[k]:
            continue
        _trial_slots(fids, k, x, Q, vbody, free, xh, xh_start, voff, pos, X)
        e += friction_energy(k, X, FR)
    return e


@njit(cache=True, fastmath=False, inline="always")
def _key_index(keys, key):
    i = np.searchsorted(keys, key)
    return i if i < keys.shape[0] and keys[i] == key else -1


@njit(cache=True, fastmath=False)
def _matvec(Hd, Ho, keys, nbr_s, nbod, free, xv, out):
    for b in range(nbod):
        for i in range(12):
            out[b, i] = 0.0
        if not free[b]:
            continue
        for i in range(12):
            acc = 0.0
            for j in range(12):
                acc += Hd[b, i, j] * xv[b, j]
            out[b, i] = acc
        for e in range(nbr_s[b], nbr_s[b + 1]):
            c = keys[e] % nbod
            for i in range(12):
                acc = 0.0
                for j in range(12):
                    acc += Ho[e, i, j] * xv[c, j]
                out[b, i] += acc


@njit(cache=True, fastmath=False)
def _precond(Hd, nbod, free, r, z):
    tmp = np.empty(12)
    for b in range(nbod):
        if not free[b]:
            for i in range(12):
                z[b, i] = 0.0
            continue
        _bk.chol_solve(Hd[b], r[b], tmp)
        for i in range(12):
            z[b, i] = tmp[i]


@njit(cache=True, fastmath=False)
def joint_system(x, inv_h2, CT, FR, AB, keys):
    """The coupled body system at the current rows: (free (nb,), neighbour CSR start over keys, gradient
    G (nb, 12), diagonal blocks Hd (nb, 12, 12), off-diagonal blocks Ho (len(keys), 12, 12), masks of the
    barrier and friction pairs touching a free body)."""
    zb, voff, xh, xh_start, vbody, bpresc = AB.rows, AB.voff, AB.xhat, AB.xh_start, AB.vbody, AB.presc
    nbod = voff.shape[0]
    pids, fids = CT.ids, FR.ids
    free = np.empty(nbod, np.bool_)
    for b in range(nbod):
        free[b] = not bpresc[b]
    nbr_s = np.zeros(nbod + 1, np.int64)
    for e in range(keys.shape[0]):
        nbr_s[keys[e] // nbod + 1] += 1
    for b in range(nbod):
        nbr_s[b + 1] += nbr_s[b]
    BL = body_pairs(pids, fids, vbody, nbod)
    # diagonal blocks and gradient
    G = np.zeros((nbod, 12))
    Hd = np.zeros((nbod, 12, 12))
    g, H, SC, X, pos, a, wi, wj = body_scratch()
    q = np.empty((4, 3))
    for b in range(nbod):
        if not free[b]:
            continue
        for r in range(4):
            for c in range(3):
                q[r, c] = zb[4 * b + r, c]
        _bk.body_grad_hess(b, q, x, AB.inertia[4 * b:4 * b + 4], inv_h2, AB, CT, FR, BL, g, H, SC, X, pos, a, wi, wj)
        for i in range(12):
            G[b, i] = g[i]
            for j in range(12):
                Hd[b, i, j] = H[i, j]
    # off-diagonal blocks from pairs spanning two free bodies
    Ho = np.zeros((keys.shape[0], 12, 12))
    pee, poff, peps, dhat, kappa = CT.is_ee, CT.off, CT.epsx, CT.dhat, CT.kappa
    fcoef, fT = FR.coef, FR.T
    pmask = np.zeros(pids.shape[0], np.bool_)
    fmask = np.zeros(fids.shape[0], np.bool_)
    Hp = SC.hess
    slots = SC.slots
    bs = np.empty(4, np.int64)
    for k in range(pids.shape[0]):
        nf = 0
        for i in range(4):
            bb = vbody[pids[k, i]]
            if bb >= 0 and free[bb]:
                nf += 1
                pmask[k] = True
        if nf < 2:
            continue
        distinct = False
        b0 = vbody[pids[k, 0]]
        for i in range(4):
            if vbody[pids[k, i]] != b0:
                distinct = True
        if not distinct:
            continue
        slot_positions(pids, k, x, X)
        e, ns = pair_terms(X, pee[k], poff[k], peps[k], dhat, True, True, SC)
        if ns == 0:
            continue
        for si in range(ns):
            ui = pids[k, slots[si]]
            bi = vbody[ui]
            if bi < 0 or not free[bi]:
                continue
            _bk.slot_weights(ui, bi, voff, xh, xh_start, wi)
            for sj in range(ns):
                uj = pids[k, slots[sj]]
                bj = vbody[uj]
                if bj < 0 or not free[bj] or bj == bi:
                    continue
                ei = _key_index(keys, bi * nbod + bj)
                _bk.slot_weights(uj, bj, voff, xh, xh_start, wj)
                for r in range(4):
                    for s in range(4):
                        f = kappa * wi[r] * wj[s]
                        for c in range(3):
                            for d in range(3):
                                Ho[ei, 3 * r + c, 3 * s + d] += f * Hp[3 * si + c, 3 * sj + d]
    cw = np.zeros((4, 4))
    for k in range(fids.shape[0]):
        nb_ = 0
        for i in range(4):
            bb = vbody[fids[k, i]]
            if bb >= 0 and free[bb]:
                fmask[k] = True
                found = -1
                for j in range(nb_):
                    if bs[j] == bb:
                        found = j
                if found < 0:
                    bs[nb_] = bb
                    found = nb_
                    for r in range(4):
                        cw[found, r] = 0.0
                    nb_ += 1
                _bk.slot_weights(fids[k, i], bb, voff, xh, xh_start, wi)
                for r in range(4):
                    cw[found, r] += fcoef[k, i] * wi[r]
        if nb_ < 2:
            continue
        slot_positions(fids, k, x, X)
        u0, u1 = friction_u(k, X, FR)
        f, h00, h01, h11 = friction_u_hessian(k, u0, u1, FR)
        for p1 in range(nb_):
            for p2 in range(nb_):
                if p1 == p2:
                    continue
                ei = _key_index(keys, bs[p1] * nbod + bs[p2])
                for c in range(3):
                    for d in range(3):
                        tt = friction_block(fT, k, c, d, h00, h01, h11)
                        for r in range(4):
                            for s in range(4):
                                Ho[ei, 3 * r + c, 3 * s + d] += cw[p1, r] * cw[p2, s] * tt
    return free, nbr_s, G, Hd, Ho, pmask, fmask


@njit(cache=True, fastmath=False)
def joint_direction(G, Hd, Ho, keys, nbr_s, free):
    """dq (nb, 12) solving H dq = -G by block-Jacobi preconditioned CG (zero if G is not finite)."""
    nbod = G.shape[0]
    dq = np.zeros((nbod, 12))
    rr = np.empty((nbod, 12))
    zz = np.empty((nbod, 12))
    pp = np.empty((nbod, 12))
    Ap = np.empty((nbod, 12))
    for b in range(nbod):
        for i in range(12):
            rr[b, i] = -G[b, i]
            if not math.isfinite(rr[b, i]):
                return np.zeros((nbod, 12))
    _precond(Hd, nbod, free, rr, zz)
    rz = 0.0
    r0 = 0.0
    for b in range(nbod):
        for i in range(12):
            pp[b, i] = zz[b, i]
            rz += rr[b, i] * zz[b, i]
            r0 += rr[b, i] * rr[b, i]
    if r0 == 0.0:
        return dq
    for it in range(CG_ITERATIONS):
        _matvec(Hd, Ho, keys, nbr_s, nbod, free, pp, Ap)
        pAp = 0.0
        for b in range(nbod):
            for i in range(12):
                pAp += pp[b, i] * Ap[b, i]
        if not (pAp > 0.0):
            break
        al = rz / pAp
        rn = 0.0
        for b in range(nbod):
            for i in range(12):
                dq[b, i] += al * pp[b, i]
                rr[b, i] -= al * Ap[b, i]
                rn += rr[b, i] * rr[b, i]
        if rn < CG_TOL * CG_TOL * r0:
            break
        _precond(Hd, nbod, free, rr, zz)
        rz1 = 0.0
        for b in range(nbod):
            for i in range(12):
                rz1 += rr[b, i] * zz[b, i]
        beta = rz1 / rz
        rz = rz1
        for b in range(nbod):
            for i in range(12):
                pp[b, i] = zz[b, i] + beta * pp[b, i]
    return dq


@njit(cache=True, fastmath=False)
def joint_step(x, target, inv_h2, BD, CT, FR, AB):
    """One bounded Newton step of all free bodies together (module doc). Returns the number of vertices
    of bodies whose admissible set cut the step (0 when it was taken whole or nothing is coupled)."""
    zb, voff, nv, vbody, bpresc = AB.rows, AB.voff, AB.nv, AB.vbody, AB.presc
    nbod = voff.shape[0]
    keys = coupling_keys(CT.ids, FR.ids, vbody, bpresc, nbod)
    if keys.shape[0] == 0:
        return 0
    free, nbr_s, G, Hd, Ho, pmask, fmask = joint_system(x, inv_h2, CT, FR, AB, keys)
    dq = joint_direction(G, Hd, Ho, keys, nbr_s, free)
    q = np.empty((4, 3))
    # common admissible fraction
    t = 1.0
    dqb = np.empty((4, 3))
    cur, dx, nbv, nrm = ray_scratch()
    for b in range(nbod):
        if not free[b]:
            continue
        for r in range(4):
            for c in range(3):
                q[r, c] = zb[4 * b + r, c]
                dqb[r, c] = dq[b, 3 * r + c]
        tb, blk = _bk.body_ray(b, x, q, dqb, BD, AB, cur, dx, nbv, nrm)
        t = min(t, max(tb, 0.0))
    cut = 0
    if t < 1.0 - _bk.TRUNC_SLACK:
        for b in range(nbod):
            if free[b] and nbr_s[b + 1] > nbr_s[b]:
                cut += nv[b]
    if t <= 0.0:
        return cut
    Q0 = zb.copy()
    Q1 = zb.copy()
    e0 = joint_energy(Q0, x, inv_h2, AB, CT, FR, free, pmask, fmask)
    s = t
    for it in range(BACKTRACK):
        for b in range(nbod):
            if not free[b]:
                continue
            for r in range(4):
                for c in range(3):
                    Q1[4 * b + r, c] = Q0[4 * b + r, c] + s * dq[b, 3 * r + c]
        if joint_energy(Q1, x, inv_h2, AB, CT, FR, free, pmask, fmask) <= e0:
            for b in range(nbod):
                if free[b]:
                    _bk.write_body(b, Q1[4 * b:4 * b + 4], zb, x, target, AB)
            return cut
        s *= 0.5
    return cut
