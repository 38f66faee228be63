"""Continuous collision detection: additive CCD (Li, Kaufman, Jiang 2021) and the step-size filter.

Book: "Filter Line Search" (the optimisation path x + t p must stay intersection-free; the line
search starts at the largest safe t) and ACCD ("narrow_phase_CCD"). For one pair with slot
displacements p_i (mean removed, which does not change any distance) the contact distance
s(t) = d(t) - offset (m) changes at most at rate l = |p_point| + max|p_tri| (point-triangle) or
max|p_a| + max|p_b| (edge-edge). ACCD advances t by (1 - eta) s(t) / l, which can never cross
s = 0, and stops when s would fall below eta * s(0). The returned time is therefore a
conservative lower bound of the time of impact and keeps at least eta * s(0) of the gap.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import broad_phase
from .broad_phase import culled_boxes, hash_grid, query_grown
from .distance import point_triangle_stencil, edge_edge_stencil
from .mesh import CollisionMesh
from solver_server.threads import threads_for

DEFAULT_MAX_ITER = 1_000_000


@njit(cache=True, fastmath=False)
def stencil_dist2(X, is_ee):
    a = (X[0], X[1], X[2])
    b = (X[3], X[4], X[5])
    c = (X[6], X[7], X[8])
    d = (X[9], X[10], X[11])
    if is_ee:
        return edge_edge_stencil(a, b, c, d)[5]
    return point_triangle_stencil(a, b, c, d)[5]


@njit(cache=True, fastmath=False, inline="always")
def _norm3(a, b, c):
    return math.sqrt(a * a + b * b + c * c)


@njit(cache=True, fastmath=False)
def box_gap(X, is_ee):
    """Distance (m) between the axis-aligned boxes of the pair's two primitives (slots 0 | 1-3 for
    point-triangle, 0-1 | 2-3 for edge-edge): a lower bound of their distance."""
    g2 = 0.0
    for a in range(3):
        if is_ee:
            alo = min(X[a], X[3 + a])
            ahi = max(X[a], X[3 + a])
            blo = min(X[6 + a], X[9 + a])
            bhi = max(X[6 + a], X[9 + a])
        else:
            alo = X[a]
            ahi = X[a]
            blo = min(X[3 + a], X[6 + a], X[9 + a])
            bhi = max(X[3 + a], X[6 + a], X[9 + a])
        gap = max(blo - ahi, alo - bhi, 0.0)
        g2 += gap * gap
    return math.sqrt(g2)


@njit(cache=True, fastmath=False)
def accd_pair(X0, P, is_ee, offset, eta, tmax, max_iter):
    """Additive CCD of one pair: slot positions X0 (12,), displacement P (12,) over t in [0, 1].

    Returns t in [0, tmax]: the motion X0 + tau P is collision-free (contact distance > 0) for
    tau in [0, t] and the contact distance at t is >= eta * s(0). Returns tmax if no impact is
    possible before tmax; 0 if the pair already touches.
    """
    m0 = 0.25 * (P[0] + P[3] + P[6] + P[9])
    m1 = 0.25 * (P[1] + P[4] + P[7] + P[10])
    m2 = 0.25 * (P[2] + P[5] + P[8] + P[11])
    n0 = _norm3(P[0] - m0, P[1] - m1, P[2] - m2)
    n1 = _norm3(P[3] - m0, P[4] - m1, P[5] - m2)
    n2 = _norm3(P[6] - m0, P[7] - m1, P[8] - m2)
    n3 = _norm3(P[9] - m0, P[10] - m1, P[11] - m2)
    if is_ee:
        lmax = max(n0, n1) + max(n2, n3)
    else:
        lmax = n0 + max(n1, n2, n3)
    # the first step (1 - eta) s0 / lmax reaches tmax for sure when a cheap lower bound of s0 (the
    # gap between the primitives' bounding boxes) already does: skip the distance computation
    lb = box_gap(X0, is_ee) - offset
    if lb > 0.0 and (1.0 - eta) * lb >= tmax * lmax:
        return tmax
    s0 = math.sqrt(stencil_dist2(X0, is_ee)) - offset
    if s0 <= 0.0:
        return 0.0
    if lmax <= 0.0 or (1.0 - eta) * s0 >= tmax * lmax:
        return tmax   # the first step already reaches tmax (what the loop below would return)
    dp = np.empty(12)
    for i in range(4):
        dp[3 * i] = P[3 * i] - m0
        dp[3 * i + 1] = P[3 * i + 1] - m1
        dp[3 * i + 2] = P[3 * i + 2] - m2
    gap = eta * s0
    t = 0.0
    s = s0
    X = np.empty(12)
    for it in range(max_iter):
        tl = (1.0 - eta) * s / lmax
        tn = t + tl
        for j in range(12):
            X[j] = X0[j] + tn * dp[j]
        sn = math.sqrt(stencil_dist2(X, is_ee)) - offset
        if t > 0.0 and sn < gap:
            return t
        t = tn
        s = sn
        if t >= tmax:
            return tmax
    return t


@njit(cache=True, fastmath=False, parallel=True)
def _accd_batch(X0, X1, is_ee, offset, eta, tmax, max_iter):
    m = X0.shape[0]
    toi = np.empty(m)
    for k in prange(m):
        toi[k] = accd_pair(X0[k], X1[k] - X0[k], is_ee, offset, eta, tmax, max_iter)
    return toi


@njit(cache=True, fastmath=False, inline="always")
def gather_motion(x, p, ids, X0, P):
    """X0 (12,) = the start positions x of the pair's vertices ids (4,), P (12,) their moves p;
    returns False when none of them moves."""
    moving = False
    for i in range(4):
        for a in range(3):
            X0[3 * i + a] = x[ids[i], a]
            P[3 * i + a] = p[ids[i], a]
            if P[3 * i + a] != 0.0:
                moving = True
    return moving


@njit(cache=True, fastmath=False, inline="always")
def pair_of(mode, q, t, faces, edges, vertex_offset, face_offset, edge_offset, ids):
    """Vertices of the broad-phase pair (query q, target t) into ids (4,) (mode 0: vertex q and face t,
    1: edges q and t); returns the pair's summed contact offset (m)."""
    if mode == 0:
        ids[0] = q
        ids[1] = faces[t, 0]
        ids[2] = faces[t, 1]
        ids[3] = faces[t, 2]
        return vertex_offset[q] + face_offset[t]
    ids[0] = edges[q, 0]
    ids[1] = edges[q, 1]
    ids[2] = edges[t, 0]
    ids[3] = edges[t, 1]
    return edge_offset[q] + edge_offset[t]


@njit(cache=True, fastmath=False, inline="always")
def _chunk_count(n):
    return max(1, min(n, 64))


@njit(cache=True, fastmath=False, parallel=True)
def _min_toi_sweep(x, p, qlo, qhi, tlo, thi, mode, faces, edges, vbody, self_contact, static, vertex_offset,
                   face_offset, edge_offset, eta, t_start, max_iter, qidx, tidx):
    """Smallest ACCD time of impact over every accepted query/target pair with overlapping swept
    boxes (mode 0: vertex-face, 1: edge-edge), broad and narrow phase fused: no pair list is
    built, and each chunk of queries passes its running minimum as the upper time bound of the
    next pair, so far pairs exit after one distance evaluation (same result as bound 1). qidx / tidx:
    the element ids of the box rows (broad_phase.culled_boxes)."""
    nq = qlo.shape[0]
    if nq == 0 or tlo.shape[0] == 0:
        return t_start
    origin, inv_cell, size, start, items, boxes, big = hash_grid(qlo, qhi, tlo, thi)
    nch = _chunk_count(nq)
    best = np.full(nch, t_start)
    for ch in prange(nch):
        tcur = t_start
        buf = np.empty(64, dtype=np.int64)
        X0 = np.empty(12)
        P = np.empty(12)
        ids = np.empty(4, dtype=np.int64)
        for q in range(ch * nq // nch, (ch + 1) * nq // nch):
            n, buf = query_grown(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode,
                                 faces, edges, vbody, self_contact, static, buf, qidx, tidx)
            for jt in range(n):
                t = buf[jt]
                off = pair_of(mode, qidx[q], t, faces, edges, vertex_offset, face_offset, edge_offset, ids)
                gather_motion(x, p, ids, X0, P)
                toi = accd_pair(X0, P, mode == 1, off, eta, tcur, max_iter)
                if toi < tcur:
                    tcur = toi
        best[ch] = tcur
    return best.min()


def point_triangle_ccd_batch(X0: np.ndarray, X1: np.ndarray, eta: float = 0.1, tmax: float = 1.0,
                             offset: float = 0.0, max_iter: int = DEFAULT_MAX_ITER) -> np.ndarray:
    """ACCD of m point-triangle pairs. X0, X1 (m, 12): start and end slot positions (p, t0, t1, t2).
    Returns the conservative times of impact (m,) in [0, tmax] (tmax: no impact)."""
    X0 = np.ascontiguousarray(X0, dtype=np.float64).reshape(-1, 12)
    X1 = np.ascontiguousarray(X1, dtype=np.float64).reshape(-1, 12)
    return _accd_batch(X0, X1, 0, float(offset), float(eta), float(tmax), int(max_iter))


def edge_edge_ccd_batch(X0: np.ndarray, X1: np.ndarray, eta: float = 0.1, tmax: float = 1.0,
                        offset: float = 0.0, max_iter: int = DEFAULT_MAX_ITER) -> np.ndarray:
    """ACCD of m edge-edge pairs. X0, X1 (m, 12): start and end slot positions (a0, a1, b0, b1)."""
    X0 = np.ascontiguousarray(X0, dtype=np.float64).reshape(-1, 12)
    X1 = np.ascontiguousarray(X1, dtype=np.float64).reshape(-1, 12)
    return _accd_batch(X0, X1, 1, float(offset), float(eta), float(tmax), int(max_iter))


def max_step_size(x: np.ndarray, p: np.ndarray, mesh: CollisionMesh, dhat: float, eta: float = 0.1,
                  max_iter: int = DEFAULT_MAX_ITER, cull=None, near=None) -> float:
    """Largest alpha in [0, 1] (conservative) such that x + t p, t in [0, alpha], keeps every pair's
    contact distance > 0; pairs keep at least eta times their start distance at alpha.

    x, p: (n, 3) or (3n,) positions (m) and search direction (m). Broad phase over swept boxes.
    dhat is accepted for interface symmetry; boxes are inflated by the contact offsets only,
    which already encloses every pair that can reach contact distance 0. Broad and narrow phase
    run fused (no candidate list), edge-edge pairs start from the point-triangle minimum. Elements whose
    swept box meets no other body's swept box are left out first (broad_phase.culled_boxes; cull default
    broad_phase.CULL): they have no pair, so the result is the same. near (n,) bool: p is zero outside this
    vertex mask (Newton's local refinement), so only elements whose swept box meets that of an element
    touching it are swept (the same result: a pair of unmoving vertices keeps its distance).
    """
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3)
    p = np.ascontiguousarray(p, dtype=np.float64).reshape(-1, 3)
    x1 = x + p
    m = mesh
    with threads_for(m.n_verts + m.edges.shape[0]):
        (vlo, vhi, vi), (flo, fhi, fi), (elo, ehi, ei) = culled_boxes(
            x, x1, m, 0.0, broad_phase.CULL if cull is None else cull, near)
        args = (m.faces, m.edges, m.vertex_body, m.self_contact, m.body_static, m.vertex_offset, m.face_offset,
                m.edge_offset, float(eta))
        alpha = _min_toi_sweep(x, p, vlo, vhi, flo, fhi, 0, *args, 1.0, int(max_iter), vi, fi)
        alpha = _min_toi_sweep(x, p, elo, ehi, elo, ehi, 1, *args, alpha, int(max_iter), ei, ei)
    return float(min(1.0, alpha))


@njit(cache=True, fastmath=False, parallel=True)
def _min_toi_pairs(x, p, pairs, mode, faces, edges, vertex_offset, face_offset, edge_offset, eta, t_start, max_iter):
    """Smallest ACCD time of impact (in [0, t_start]) over the candidate pairs (rows of pairs, mode 0:
    vertex-face, 1: edge-edge) along x -> x + p (m). A pair whose two primitives' swept boxes (over x and
    x + p) are further apart on an axis than its summed contact offset cannot meet and is skipped (the pairs
    the full sweep, _min_toi_sweep, never tests). Each chunk passes its running minimum as the next pair's time
    bound; the minimum itself does not depend on the chunking (ACCD returns min(its time, bound))."""
    m = pairs.shape[0]
    if m == 0:
        return t_start
    nch = _chunk_count(m)
    best = np.full(nch, t_start)
    for ch in prange(nch):
        tcur = t_start
        X0 = np.empty(12)
        P = np.empty(12)
        ids = np.empty(4, dtype=np.int64)
        for k in range(ch * m // nch, (ch + 1) * m // nch):
            off = pair_of(mode, pairs[k, 0], pairs[k, 1], faces, edges, vertex_offset, face_offset, edge_offset,
                          ids)
            if not gather_motion(x, p, ids, X0, P):
                continue
            far = False
            na = 2 if mode == 1 else 1
            for a in range(3):
                alo = np.inf
                ahi = -np.inf
                blo = np.inf
                bhi = -np.inf
                for i in range(4):
                    u = X0[3 * i + a]
                    w = u + P[3 * i + a]
                    if i < na:
                        alo = min(alo, u, w)
                        ahi = max(ahi, u, w)
                    else:
                        blo = min(blo, u, w)
                        bhi = max(bhi, u, w)
                if blo - ahi > off or alo - bhi > off:
                    far = True
                    break
            if far:
                continue
            toi = accd_pair(X0, P, mode == 1, off, eta, tcur, max_iter)
            if toi < tcur:
                tcur = toi
        best[ch] = tcur
    return best.min()


def max_step_candidates(x: np.ndarray, p: np.ndarray, cands, mesh: CollisionMesh, eta: float = 0.1,
                        max_iter: int = DEFAULT_MAX_ITER) -> float:
    """max_step_size over the candidate pairs cands only: the same bound when cands hold every pair that can
    come within dhat anywhere on x -> x + p (a Verlet list valid on the segment, contact/terms.py CandidateList),
    as every pair that can reach contact distance 0 is among them. x, p (n, 3) m."""
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3)
    p = np.ascontiguousarray(p, dtype=np.float64).reshape(-1, 3)
    m = mesh
    pt = np.ascontiguousarray(np.asarray(cands.pt).reshape(-1, 2), np.int64)
    ee = np.ascontiguousarray(np.asarray(cands.ee).reshape(-1, 2), np.int64)
    with threads_for(pt.shape[0] + ee.shape[0]):
        args = (m.faces, m.edges, m.vertex_offset, m.face_offset, m.edge_offset, float(eta))
        alpha = _min_toi_pairs(x, p, pt, 0, *args, 1.0, int(max_iter))
        alpha = _min_toi_pairs(x, p, ee, 1, *args, alpha, int(max_iter))
    return float(min(1.0, alpha))
