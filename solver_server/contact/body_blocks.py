"""Barrier and friction Hessians of contact pairs between affine bodies, assembled straight into the bodies'
12 x 12 blocks (issue 19, "body-space contact").

A vertex of an affine body is slaved, x_i = sum_r w_ir z_r over the body's 4 rows (w_i = (1, X_i / L)), so the
Hessian of a pair term in the DOFs z is J^T H J with J = w^T (x) I_3 per slot: the block of bodies (P, Q) is

    sum_{u in P, v in Q} (w_u w_v^T) (x) H_uv          (row 3 i + a: body row i, coordinate a)

The vertex path built every pair's 3 x 3 slot blocks, summed them per vertex pair (block_assembly.sum_blocks)
and spread every scalar entry over 16 rows (DofMap.pull_coo). Here each pair's slot Hessian is reduced to its
(at most two) bodies at once, in two steps (columns then rows: ~1,700 multiply-adds for a point-triangle pair
instead of 16 x 144), and summed into one block per body pair.

Which pairs: every slot's vertex is either slaved to a body (mode 1, ``grp`` its body) or a fixed vertex that
is no DOF at all (mode 2, e.g. a static collider's: its rows and columns are dropped, as the free-DOF matrix
drops them), with at most two bodies among the slots. A pair touching a free vertex that is not slaved (mode 0:
cloth, soft solids, rods, a collider pulled by the penalty) is left to the vertex path.

Determinism: pairs are grouped by body pair (sorted by the key P G + Q, then by their index in the candidate
list, a stable sort); one thread sums one group in that order and the groups' blocks are summed in key order
afterwards, so the result does not depend on the thread count.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .barrier_pair import new_scratch, pair_gauss_newton, pair_terms
from .block_assembly import sum_blocks
from .friction import friction_block, _xs, _block_layout, _hessian_blocks
from .potential import _prep, _layout, _pair_terms_all, _scatter_gradient
from solver_server.threads import threads_for

BARRIER_GAUSS_NEWTON = True  # body-space pairs take the Gauss-Newton barrier Hessian (barrier_pair.pair_gauss_newton)


@njit(cache=True, fastmath=False)
def pair_body_keys(ids, pairs, grp, mode, G):
    """Per pair index in ``pairs``: P G + Q (P <= Q, the bodies of its slaved slots; Q = P for one body) when
    the pair can be assembled in body space, -1 when a slot is a free unslaved vertex (or the slots span more
    than two bodies), -2 when every slot is a fixed vertex (the pair adds nothing to the free DOFs)."""
    n = pairs.shape[0]
    key = np.empty(n, np.int64)
    for t in range(n):
        k = pairs[t]
        P = -1
        Q = -1
        bad = False
        for i in range(4):
            v = ids[k, i]
            md = mode[v]
            if md == 0:
                bad = True
                break
            if md == 2:
                continue
            g = grp[v]
            if P < 0:
                P = g
            elif g != P:
                if Q < 0:
                    Q = g
                elif g != Q:
                    bad = True
                    break
        if bad:
            key[t] = -1
        elif P < 0:
            key[t] = -2
        else:
            if Q < 0:
                Q = P
            if Q < P:
                P, Q = Q, P
            key[t] = P * G + Q
    return key


def group_pairs(pairs: np.ndarray, key: np.ndarray, G: int):
    """(sorted pairs, group starts, P, Q) of the pairs with key >= 0, grouped by body pair: key order, and
    within a group the order of ``pairs`` (stable sort)."""
    sel = np.nonzero(key >= 0)[0]
    ks = key[sel]
    order = np.argsort(ks, kind="stable")
    ks = ks[order]
    srt = np.ascontiguousarray(pairs[sel][order])
    if ks.size == 0:
        return srt, np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    cut = np.nonzero(np.diff(ks))[0] + 1
    gstart = np.concatenate([[0], cut, [ks.size]]).astype(np.int64)
    gk = ks[gstart[:-1]]
    return srt, gstart, (gk // G).astype(np.int64), (gk % G).astype(np.int64)


@njit(cache=True, fastmath=False, inline="always")
def _reduce_slots(H, ns, slot_v, nd, W, Tm, out, g):
    """out[g, b] += the body blocks of the slot Hessian H (3 ns x 3 ns) whose slot u has vertex weights W[u]
    (4,) and node nd[u] (0: body P, 1: body Q, -1: dropped): b = 0 (P, P), 1 (P, Q), 2 (Q, Q)."""
    # step 1: Tm[u, n, a, 3 j + b] = sum_{v: nd[v] = n} H[3 u + a, 3 v + b] W[v, j]
    for u in range(ns):
        if nd[u] < 0:
            continue
        for n in range(2):
            for a in range(3):
                for c in range(12):
                    Tm[u, n, a, c] = 0.0
        for vv in range(ns):
            n = nd[vv]
            if n < 0:
                continue
            for a in range(3):
                for b in range(3):
                    h = H[3 * u + a, 3 * vv + b]
                    for j in range(4):
                        Tm[u, n, a, 3 * j + b] += h * W[vv, j]
    # step 2: out[g, nu + n][3 i + a, c] += W[u, i] Tm[u, n, a, c] for n >= nu (the (Q, P) block is the transpose)
    for u in range(ns):
        nu = nd[u]
        if nu < 0:
            continue
        for n in range(nu, 2):
            bi = nu + n
            for i in range(4):
                wi = W[u, i]
                if wi == 0.0:
                    continue
                for a in range(3):
                    r = 3 * i + a
                    for c in range(12):
                        out[g, bi, r, c] += wi * Tm[u, n, a, c]


@njit(cache=True, fastmath=False, inline="always")
def _add_kron_blocks(cw, A, out, g):
    """out[g, n0 + n1] += (cw_n0 cw_n1^T) (x) A for n0 <= n1 (row 3 i + a, column 3 j + b): the body blocks of a pair
    whose slot block (i, j) is c_i c_j A, cw_n = sum_{slots i on body n} c_i w_i (a zero row: no slot on that body)."""
    for n0 in range(2):
        for n1 in range(n0, 2):
            bi = n0 + n1
            for i in range(4):
                ci = cw[n0, i]
                if ci == 0.0:
                    continue
                for j in range(4):
                    cij = ci * cw[n1, j]
                    if cij == 0.0:
                        continue
                    for a in range(3):
                        for b in range(3):
                            out[g, bi, 3 * i + a, 3 * j + b] += cij * A[a, b]


@njit(cache=True, fastmath=False, inline="always")
def _body_weights(c, ids, k, grp, wts, mode, P, cw):
    """cw (2, 4): cw_n = sum_{slots i of pair k on body n} c_i w_i (n = 0 body P, 1 the other; fixed slots dropped)."""
    for n in range(2):
        for i in range(4):
            cw[n, i] = 0.0
    for u in range(4):
        cu = c[u]
        v = ids[k, u]
        if cu == 0.0 or mode[v] == 2:
            continue
        n = 0 if grp[v] == P else 1
        for i in range(4):
            cw[n, i] += cu * wts[v, i]


@njit(cache=True, fastmath=False, inline="always")
def _gauss_newton_blocks(c, r, wg, w, ids, k, grp, wts, mode, P, cw, A, out, gout, g):
    """Add pair k's gradient wg y and Gauss-Newton Hessian w y y^T (y = c (x) r) to group g's body rows and blocks:
    body n's rows get wg cw_n (x) r, block (n0, n1) gets (cw_n0 cw_n1^T) (x) (w r r^T) (see barrier_group_blocks)."""
    _body_weights(c, ids, k, grp, wts, mode, P, cw)
    for n in range(2):
        for i in range(4):
            for a in range(3):
                gout[g, n, 3 * i + a] += wg * cw[n, i] * r[a]
    for a in range(3):
        for b in range(3):
            A[a, b] = w * r[a] * r[b]
    _add_kron_blocks(cw, A, out, g)


@njit(cache=True, fastmath=False, parallel=True)
def barrier_group_blocks(x, ids, is_ee, off, epsx, dhat, pairs, gstart, gP, grp, wts, mode, project, gauss_newton):
    """Per body-pair group g: the blocks (P, P), (P, Q), (Q, Q) (unit stiffness, (ng, 3, 12, 12)) of the barrier
    Hessians (PSD-projected per pair when project) of the pairs pairs[gstart[g]:gstart[g+1]], and their
    gradients on the two bodies' rows (ng, 2, 12) (row 3 i + a: body row i, coordinate a).

    gauss_newton: every pair but the mollified edge-edge ones takes the Gauss-Newton Hessian w y y^T
    (barrier_pair.pair_gauss_newton). With y = c (x) r its body blocks are (cw_n0 cw_n1^T) (x) (w r r^T),
    cw_n = sum_{slots i on body n} c_i w_i (4,): ~300 multiply-adds a pair, no slot Hessian, no eigen-solve."""
    ng = gstart.shape[0] - 1
    out = np.zeros((ng, 3, 12, 12))
    gout = np.zeros((ng, 2, 12))
    for g in prange(ng):
        sc = new_scratch()
        X = np.empty(12)
        Tm = np.empty((4, 2, 3, 12))
        W = np.zeros((4, 4))
        nd = np.empty(4, np.int64)
        cw = np.empty((2, 4))
        A = np.empty((3, 3))
        P = gP[g]
        for t in range(gstart[g], gstart[g + 1]):
            k = pairs[t]
            for i in range(4):
                for a in range(3):
                    X[3 * i + a] = x[ids[k, i], a]
            if gauss_newton:
                e, wg, w, ns = pair_gauss_newton(X, is_ee[k], off[k], epsx[k], dhat, sc)
                if ns == 0:
                    continue
                if ns > 0:
                    _gauss_newton_blocks(sc.coef, sc.diff, wg, w, ids, k, grp, wts, mode, P, cw, A, out, gout, g)
                    continue
            e, ns = pair_terms(X, is_ee[k], off[k], epsx[k], dhat, True, project, sc)
            if ns == 0:
                continue
            slots = sc.slots
            for u in range(ns):
                v = ids[k, slots[u]]
                if mode[v] == 2:
                    nd[u] = -1
                else:
                    nd[u] = 0 if grp[v] == P else 1
                    for r in range(4):
                        W[u, r] = wts[v, r]
            gr = sc.grad
            for u in range(ns):
                n = nd[u]
                if n < 0:
                    continue
                su = slots[u]
                for i in range(4):
                    wi = W[u, i]
                    for a in range(3):
                        gout[g, n, 3 * i + a] += wi * gr[3 * su + a]
            _reduce_slots(sc.hess, ns, slots, nd, W, Tm, out, g)
    return out, gout


@njit(cache=True, fastmath=False)
def reduce_group_gradient(gout, gP, gQ, G, scale):
    """The groups' gradients summed per body in group order, (G, 12), times scale."""
    gb = np.zeros((G, 12))
    for g in range(gP.shape[0]):
        P = gP[g]
        Q = gQ[g]
        for r in range(12):
            gb[P, r] += gout[g, 0, r]
        if Q != P:
            for r in range(12):
                gb[Q, r] += gout[g, 1, r]
    for b in range(G):
        for r in range(12):
            gb[b, r] *= scale
    return gb


@njit(cache=True, fastmath=False)
def reduce_groups(out, gP, gQ, G, scale):
    """The groups' blocks summed per body pair in group order: (blocks (m, 12, 12), row body (m,), column body
    (m,)), every (P, P) once, every (P, Q), P != Q, with its transpose (Q, P); values times scale."""
    ng = gP.shape[0]
    dpos = np.full(G, -1, np.int64)
    nd = 0
    no = 0
    for g in range(ng):
        P = gP[g]
        Q = gQ[g]
        if dpos[P] < 0:
            dpos[P] = nd
            nd += 1
        if Q != P:
            no += 1
            if dpos[Q] < 0:
                dpos[Q] = nd
                nd += 1
    m = nd + 2 * no
    blk = np.zeros((m, 12, 12))
    ga = np.empty(m, np.int64)
    gb = np.empty(m, np.int64)
    for b in range(G):
        if dpos[b] >= 0:
            ga[dpos[b]] = b
            gb[dpos[b]] = b
    o = nd
    for g in range(ng):
        P = gP[g]
        Q = gQ[g]
        dp = dpos[P]
        for r in range(12):
            for c in range(12):
                blk[dp, r, c] += out[g, 0, r, c]
        if Q != P:
            dq = dpos[Q]
            for r in range(12):
                for c in range(12):
                    blk[dq, r, c] += out[g, 2, r, c]
                    blk[o, r, c] = out[g, 1, r, c]
                    blk[o + 1, c, r] = out[g, 1, r, c]
            ga[o] = P
            gb[o] = Q
            ga[o + 1] = Q
            gb[o + 1] = P
            o += 2
    for b in range(m):
        for r in range(12):
            for c in range(12):
                blk[b, r, c] *= scale
    return blk, ga, gb


@njit(cache=True, fastmath=False, parallel=True)
def friction_group_blocks(x, x_prev, ids, coef, T, ml, eps, project, majv, pairs, gstart, gP, grp, wts, mode):
    """As barrier_group_blocks for the lagged friction pairs: the slot block (i, j) of pair k is c_i c_j A_k
    (friction.friction_block), so the block of bodies (n0, n1) is (cw_n0 cw_n1^T) (x) A_k with
    cw_n = sum_{slots i on body n} c_i w_i (4,)."""
    ng = gstart.shape[0] - 1
    out = np.zeros((ng, 3, 12, 12))
    for g in prange(ng):
        A = np.empty((3, 3))
        cw = np.empty((2, 4))
        P = gP[g]
        for t in range(gstart[g], gstart[g + 1]):
            k = pairs[t]
            friction_block(x, x_prev, ids, coef, T, ml, eps, project, majv, k, A)
            _body_weights(coef[k], ids, k, grp, wts, mode, P, cw)
            _add_kron_blocks(cw, A, out, g)
    return out


class BodyInfo:
    """What the body-space assembly needs to know of the DOF map, per collision vertex (n,): ``grp`` the affine
    body of a slaved vertex (-1 otherwise), ``wts`` (n, 4) its weights over the body's 4 rows, ``mode`` 1 slaved,
    2 a fixed vertex that is no DOF (dropped), 0 a free unslaved vertex (vertex path); G bodies."""

    def __init__(self, grp: np.ndarray, wts: np.ndarray, mode: np.ndarray, G: int):
        self.grp = np.ascontiguousarray(grp, np.int64)
        self.wts = np.ascontiguousarray(wts, np.float64)
        self.mode = np.ascontiguousarray(mode, np.int8)
        self.G = int(G)


def _fallback_layout(active, bstart, fb_mask):
    """The active pairs of fb_mask and their Hessian block starts (from the full layout's block counts)."""
    fa = active[fb_mask]
    nn = np.diff(bstart)[fb_mask]
    fbs = np.zeros(fa.size + 1, np.int64)
    np.cumsum(nn, out=fbs[1:])
    return np.ascontiguousarray(fa), fbs


def barrier_derivatives_bodies(x: np.ndarray, cands, mesh, dhat: float, kappa: float, info: BodyInfo,
                               project_psd: bool = True):
    """Gradient and Hessian of the barrier in one pass over the active pairs, split in two: the pairs touching a
    free unslaved vertex in vertex space (gradient (3n,), (rows, cols, vals) COO triplets as barrier_hessian) and
    the pairs between affine bodies and fixed vertices in the bodies' DOFs (gradient (G, 12), and (blocks
    (m, 12, 12), row body (m,), column body (m,))); see module doc. Pairs on fixed vertices only are left out
    (nothing of them reaches a free DOF). Returns (g_vertex, g_body, triplets, blocks)."""
    x, ps = _prep(x, cands, mesh)
    n = x.shape[0]
    gv = np.zeros(3 * n)
    gb = np.zeros((info.G, 12))
    empty_v = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    empty_b = (np.zeros((0, 12, 12)), np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(ps) == 0:
        return gv, gb, empty_v, empty_b
    with threads_for(len(ps)):
        active, bstart = _layout(x, ps, float(dhat))
        key = pair_body_keys(ps.ids, active, info.grp, info.mode, info.G)
        srt, gstart, gP, gQ = group_pairs(active, key, info.G)
        blocks = empty_b
        if srt.size:
            out, gout = barrier_group_blocks(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat), srt, gstart, gP,
                                             info.grp, info.wts, info.mode, bool(project_psd),
                                             bool(project_psd) and BARRIER_GAUSS_NEWTON)
            blocks = reduce_groups(out, gP, gQ, info.G, float(kappa))
            gb = reduce_group_gradient(gout, gP, gQ, info.G, float(kappa))
        fb = key == -1
        verts = empty_v
        if fb.any():
            fa, fbs = _fallback_layout(active, bstart, fb)
            _, G, bi, bj, bval = _pair_terms_all(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat), fa, fbs, True,
                                                 bool(project_psd))
            r, c, v = sum_blocks(bi, bj, bval, n)
            verts = (r, c, float(kappa) * v)
            gv = float(kappa) * _scatter_gradient(G, ps.ids, fa, n)
    return gv, gb, verts, blocks


def barrier_hessian_bodies(x: np.ndarray, cands, mesh, dhat: float, kappa: float, info: BodyInfo,
                           project_psd: bool = True):
    """The barrier Hessian split in two (barrier_derivatives_bodies): (vertex-space COO triplets of the pairs
    touching a free unslaved vertex, body blocks of the others)."""
    return barrier_derivatives_bodies(x, cands, mesh, dhat, kappa, info, project_psd)[2:]


def _friction_groups(fs, info: BodyInfo):
    """(sorted pairs, group starts, P, Q, keys) of the frozen friction pairs fs grouped by body pair (pair_body_keys,
    group_pairs): they depend on fs's slots and the DOF map alone, so they are kept on fs for the step's Newton
    iterations (fs is frozen for the step) while its ids and info's arrays are the same objects."""
    c = getattr(fs, "_groups", None)
    if c is not None and c[0] is fs.ids and c[1] is info.grp and c[2] is info.mode and c[3] == info.G:
        return c[4]
    allp = np.arange(len(fs), dtype=np.int64)
    key = pair_body_keys(fs.ids, allp, info.grp, info.mode, info.G)
    out = group_pairs(allp, key, info.G) + (key,)
    fs._groups = (fs.ids, info.grp, info.mode, info.G, out)
    return out


def friction_hessian_bodies(x: np.ndarray, x_prev: np.ndarray, fs, eps_v_h: float, info: BodyInfo,
                            majorize=None, project_psd: bool = True):
    """friction_hessian split as barrier_hessian_bodies: (vertex-space COO triplets of the pairs touching a free
    unslaved vertex, body blocks of the others)."""
    x, x_prev = _xs(x, x_prev)
    majv = np.zeros(x.shape[0]) if majorize is None else np.ascontiguousarray(majorize, dtype=np.float64)
    empty_v = (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    empty_b = (np.zeros((0, 12, 12)), np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(fs) == 0:
        return empty_v, empty_b
    with threads_for(len(fs)):
        srt, gstart, gP, gQ, key = _friction_groups(fs, info)
        blocks = empty_b
        if srt.size:
            out = friction_group_blocks(x, x_prev, fs.ids, fs.coef, fs.T, fs.mu_lambda, float(eps_v_h),
                                        bool(project_psd), majv, srt, gstart, gP, info.grp, info.wts, info.mode)
            blocks = reduce_groups(out, gP, gQ, info.G, 1.0)
        fb = np.nonzero(key == -1)[0]
        verts = empty_v
        if fb.size:
            sub = (np.ascontiguousarray(fs.ids[fb]), np.ascontiguousarray(fs.coef[fb]),
                   np.ascontiguousarray(fs.T[fb]), np.ascontiguousarray(fs.mu_lambda[fb]))
            bstart = _block_layout(sub[1])
            bi, bj, bval = _hessian_blocks(x, x_prev, *sub, float(eps_v_h), bool(project_psd), bstart, majv)
            verts = sum_blocks(bi, bj, bval, x.shape[0])
    return verts, blocks
