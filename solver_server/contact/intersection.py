"""Edge-triangle intersection checks, independent of the barrier/CCD code path.

Used to verify "zero intersections" at every frame and to report scenes that start
intersecting. A segment (a, b) meets a closed triangle (t0, t1, t2) iff a and b are not strictly
on the same side of the triangle's plane and the three orientations of (a, b) against the
triangle's edges agree (no strict sign change). Orientations are 3x3 determinants evaluated in
floating point with Shewchuk's static error bound; a pair that the bound cannot certify (every
coplanar configuration among them: flat faces of artist meshes give ~1,000 such pairs per cube) is
re-evaluated exactly in numba with floating-point expansions (exact_predicates.py), and only pairs
outside that arithmetic's safe range (or with a degenerate triangle) with Python's rational
arithmetic, so the answer is exact for the given double-precision coordinates. Pairs sharing a vertex are excluded.
Touching (zero distance) counts as intersecting.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from numba import njit, prange

from .broad_phase import element_boxes, overlapping_box_pairs
from .exact_predicates import EXP2_CAP, EXP3_CAP, in_range, orient2d_exact, orient3d_exact
from solver_server.threads import threads_for

_EPS = 2.0 ** -53
_O3D_BOUND = (7.0 + 56.0 * _EPS) * _EPS


@njit(cache=True, fastmath=False)
def _orient3d(x, a, b, c, d):
    """Sign of det[b-a, c-a, d-a] of vertices a..d of x: +1, -1, or 0 if not certified."""
    adx = x[a, 0] - x[d, 0]
    ady = x[a, 1] - x[d, 1]
    adz = x[a, 2] - x[d, 2]
    bdx = x[b, 0] - x[d, 0]
    bdy = x[b, 1] - x[d, 1]
    bdz = x[b, 2] - x[d, 2]
    cdx = x[c, 0] - x[d, 0]
    cdy = x[c, 1] - x[d, 1]
    cdz = x[c, 2] - x[d, 2]
    m1 = bdy * cdz - bdz * cdy
    m2 = bdz * cdx - bdx * cdz
    m3 = bdx * cdy - bdy * cdx
    det = adx * m1 + ady * m2 + adz * m3
    perm = (abs(adx) * (abs(bdy * cdz) + abs(bdz * cdy)) + abs(ady) * (abs(bdz * cdx) + abs(bdx * cdz))
            + abs(adz) * (abs(bdx * cdy) + abs(bdy * cdx)))
    if det > _O3D_BOUND * perm:
        return 1
    if -det > _O3D_BOUND * perm:
        return -1
    return 0


@njit(cache=True, fastmath=False, parallel=True)
def _classify(x, pairs, faces, edges):
    """1: intersecting, 0: not, -1: undecided in floating point (exact re-check needed)."""
    m = pairs.shape[0]
    out = np.empty(m, dtype=np.int8)
    for k in prange(m):
        a, b = edges[pairs[k, 0], 0], edges[pairs[k, 0], 1]
        t0, t1, t2 = faces[pairs[k, 1], 0], faces[pairs[k, 1], 1], faces[pairs[k, 1], 2]
        sa = _orient3d(x, t0, t1, t2, a)
        sb = _orient3d(x, t0, t1, t2, b)
        if sa == 0 or sb == 0:
            out[k] = -1
            continue
        if sa == sb:
            out[k] = 0
            continue
        o1 = _orient3d(x, a, b, t0, t1)
        o2 = _orient3d(x, a, b, t1, t2)
        o3 = _orient3d(x, a, b, t2, t0)
        if o1 == 0 or o2 == 0 or o3 == 0:
            out[k] = -1
        elif o1 == o2 and o2 == o3:
            out[k] = 1
        else:
            out[k] = 0
    return out


def _exact_orient(P, a, b, c, d):
    ad = [P[a][i] - P[d][i] for i in range(3)]
    bd = [P[b][i] - P[d][i] for i in range(3)]
    cd = [P[c][i] - P[d][i] for i in range(3)]
    det = (ad[0] * (bd[1] * cd[2] - bd[2] * cd[1]) + ad[1] * (bd[2] * cd[0] - bd[0] * cd[2])
           + ad[2] * (bd[0] * cd[1] - bd[1] * cd[0]))
    return (det > 0) - (det < 0)


def _exact_orient2d(p, q, r):
    det = (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])
    return (det > 0) - (det < 0)


def _segments_intersect_2d(p1, p2, q1, q2):
    d1 = _exact_orient2d(q1, q2, p1)
    d2 = _exact_orient2d(q1, q2, p2)
    d3 = _exact_orient2d(p1, p2, q1)
    d4 = _exact_orient2d(p1, p2, q2)
    if d1 * d2 < 0 and d3 * d4 < 0:
        return True

    def on(p, q, r):  # r on segment pq, given collinear
        return min(p[0], q[0]) <= r[0] <= max(p[0], q[0]) and min(p[1], q[1]) <= r[1] <= max(p[1], q[1])
    return ((d1 == 0 and on(q1, q2, p1)) or (d2 == 0 and on(q1, q2, p2)) or (d3 == 0 and on(p1, p2, q1))
            or (d4 == 0 and on(p1, p2, q2)))


def _exact_edge_triangle(x, a, b, t0, t1, t2) -> bool:
    ids = (a, b, t0, t1, t2)
    P = {i: [Fraction(float(v)) for v in x[i]] for i in ids}
    sa = _exact_orient(P, t0, t1, t2, a)
    sb = _exact_orient(P, t0, t1, t2, b)
    if sa == sb and sa != 0:
        return False
    if sa == 0 and sb == 0:
        # coplanar: project onto the plane most orthogonal to the triangle normal and test in 2D
        u = [P[t1][i] - P[t0][i] for i in range(3)]
        v = [P[t2][i] - P[t0][i] for i in range(3)]
        n = [abs(u[1] * v[2] - u[2] * v[1]), abs(u[2] * v[0] - u[0] * v[2]), abs(u[0] * v[1] - u[1] * v[0])]
        drop = int(np.argmax([float(c) for c in n]))
        keep = [i for i in range(3) if i != drop]
        p2 = {i: (P[i][keep[0]], P[i][keep[1]]) for i in ids}
        tri = (t0, t1, t2)
        o = [_exact_orient2d(p2[tri[j]], p2[tri[(j + 1) % 3]], p2[a]) for j in range(3)]
        if all(s >= 0 for s in o) or all(s <= 0 for s in o):
            return True      # endpoint inside the triangle
        return any(_segments_intersect_2d(p2[a], p2[b], p2[tri[j]], p2[tri[(j + 1) % 3]]) for j in range(3))
    o = [_exact_orient(P, a, b, t0, t1), _exact_orient(P, a, b, t1, t2), _exact_orient(P, a, b, t2, t0)]
    return all(s >= 0 for s in o) or all(s <= 0 for s in o)


@njit(cache=True, fastmath=False, inline="always")
def _on2(px, py, qx, qy, rx, ry):
    """r on segment pq, given the three are collinear (comparisons only: exact)."""
    return min(px, qx) <= rx <= max(px, qx) and min(py, qy) <= ry <= max(py, qy)


@njit(cache=True, fastmath=False)
def _seg2(P, i, j, k, l, e):
    """Closed 2D segments P[i]P[j] and P[k]P[l] meet (exact)."""
    d1 = orient2d_exact(P[k, 0], P[k, 1], P[l, 0], P[l, 1], P[i, 0], P[i, 1], e)
    d2 = orient2d_exact(P[k, 0], P[k, 1], P[l, 0], P[l, 1], P[j, 0], P[j, 1], e)
    d3 = orient2d_exact(P[i, 0], P[i, 1], P[j, 0], P[j, 1], P[k, 0], P[k, 1], e)
    d4 = orient2d_exact(P[i, 0], P[i, 1], P[j, 0], P[j, 1], P[l, 0], P[l, 1], e)
    if d1 * d2 < 0 and d3 * d4 < 0:
        return True
    return ((d1 == 0 and _on2(P[k, 0], P[k, 1], P[l, 0], P[l, 1], P[i, 0], P[i, 1]))
            or (d2 == 0 and _on2(P[k, 0], P[k, 1], P[l, 0], P[l, 1], P[j, 0], P[j, 1]))
            or (d3 == 0 and _on2(P[i, 0], P[i, 1], P[j, 0], P[j, 1], P[k, 0], P[k, 1]))
            or (d4 == 0 and _on2(P[i, 0], P[i, 1], P[j, 0], P[j, 1], P[l, 0], P[l, 1])))


@njit(cache=True, fastmath=False)
def _exact_one(x, a, b, t0, t1, t2, e3, e2, P):
    """The exact edge-triangle test of _exact_edge_triangle in expansion arithmetic: 1 / 0, or -1 when
    the coordinates are outside the predicates' safe range or the triangle is degenerate (the caller
    then uses the rational version)."""
    ids = (int(a), int(b), int(t0), int(t1), int(t2))
    for i in range(5):
        for j in range(i + 1, 5):
            if not in_range(x[ids[i]], x[ids[j]]):
                return -1
    # all five points on one axis-aligned plane (flat faces of unrotated meshes: most coplanar pairs of
    # a start frame): coplanar by comparison alone, and that axis is the one to drop
    flat = -1
    for k in range(3):
        c0 = x[ids[0], k]
        if x[ids[1], k] == c0 and x[ids[2], k] == c0 and x[ids[3], k] == c0 and x[ids[4], k] == c0:
            flat = k
            break
    if flat >= 0:
        sa = 0
        sb = 0
    else:
        sa = orient3d_exact(x, t0, t1, t2, a, e3)
        sb = orient3d_exact(x, t0, t1, t2, b, e3)
    if sa == sb and sa != 0:
        return 0
    if sa == 0 and sb == 0:
        # coplanar: drop the coordinate where the triangle's normal is largest (any coordinate with a
        # nonzero normal component projects the plane injectively; the float argmax of a nondegenerate
        # triangle is such a coordinate) and test in 2D
        u0, u1, u2 = x[t1, 0] - x[t0, 0], x[t1, 1] - x[t0, 1], x[t1, 2] - x[t0, 2]
        v0, v1, v2 = x[t2, 0] - x[t0, 0], x[t2, 1] - x[t0, 1], x[t2, 2] - x[t0, 2]
        n0 = abs(u1 * v2 - u2 * v1)
        n1 = abs(u2 * v0 - u0 * v2)
        n2 = abs(u0 * v1 - u1 * v0)
        drop = 0
        if n1 > n0 and n1 >= n2:
            drop = 1
        elif n2 > n0 and n2 > n1:
            drop = 2
        scale = (abs(u0) + abs(u1) + abs(u2)) * (abs(v0) + abs(v1) + abs(v2))
        if flat >= 0:
            drop = flat    # the triangle lies in that plane: its normal is along the axis
        elif max(n0, max(n1, n2)) <= 1e-10 * scale:
            return -1      # (nearly) degenerate triangle: the float argmax is not certified nonzero
        k0 = 1 if drop == 0 else 0
        k1 = 1 if drop == 2 else 2
        for i in range(5):
            P[i, 0] = x[ids[i], k0]
            P[i, 1] = x[ids[i], k1]
        # slots: 0 a, 1 b, 2 t0, 3 t1, 4 t2; an endpoint inside the (closed) triangle
        o0 = orient2d_exact(P[2, 0], P[2, 1], P[3, 0], P[3, 1], P[0, 0], P[0, 1], e2)
        o1 = orient2d_exact(P[3, 0], P[3, 1], P[4, 0], P[4, 1], P[0, 0], P[0, 1], e2)
        o2 = orient2d_exact(P[4, 0], P[4, 1], P[2, 0], P[2, 1], P[0, 0], P[0, 1], e2)
        if (o0 >= 0 and o1 >= 0 and o2 >= 0) or (o0 <= 0 and o1 <= 0 and o2 <= 0):
            return 1
        if _seg2(P, 0, 1, 2, 3, e2) or _seg2(P, 0, 1, 3, 4, e2) or _seg2(P, 0, 1, 4, 2, e2):
            return 1
        return 0
    o1 = orient3d_exact(x, a, b, t0, t1, e3)
    o2 = orient3d_exact(x, a, b, t1, t2, e3)
    o3 = orient3d_exact(x, a, b, t2, t0, e3)
    if (o1 >= 0 and o2 >= 0 and o3 >= 0) or (o1 <= 0 and o2 <= 0 and o3 <= 0):
        return 1
    return 0


@njit(cache=True, fastmath=False, parallel=True)
def _exact_classify(x, pairs, idx, faces, edges):
    """Exact verdicts (1 / 0 / -1 = use the rational fallback) of the pairs pairs[idx], in chunks on
    numba's threads."""
    m = idx.shape[0]
    out = np.empty(m, np.int8)
    nch = max(1, min(m, 64))
    for ch in prange(nch):
        e3 = np.empty(EXP3_CAP + 18)
        e2 = np.empty(EXP2_CAP)
        P = np.empty((5, 2))
        for k in range(ch * m // nch, (ch + 1) * m // nch):
            r = idx[k]
            ed = pairs[r, 0]
            f = pairs[r, 1]
            out[k] = _exact_one(x, edges[ed, 0], edges[ed, 1], faces[f, 0], faces[f, 1], faces[f, 2], e3, e2, P)
    return out


def find_intersections(x: np.ndarray, faces: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(k, 2) int32 rows (edge index, face index) of every edge that meets a triangle it does not
    share a vertex with (all meshes, self included). x (n, 3) in metres."""
    with threads_for(len(faces) + len(edges)):
        return _find_intersections(x, faces, edges)


def _find_intersections(x, faces, edges):
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3)
    faces = np.ascontiguousarray(faces, dtype=np.int32).reshape(-1, 3)
    edges = np.ascontiguousarray(edges, dtype=np.int32).reshape(-1, 2)
    if faces.shape[0] == 0 or edges.shape[0] == 0:
        return np.zeros((0, 2), np.int32)
    flo, fhi = element_boxes(x, x, faces, np.zeros(faces.shape[0]))
    elo, ehi = element_boxes(x, x, edges, np.zeros(edges.shape[0]))
    dummy_body = np.zeros(x.shape[0], np.int32)
    pairs = overlapping_box_pairs(elo, ehi, flo, fhi, 2, faces, edges, dummy_body, np.ones(1, np.uint8), np.zeros(1, np.uint8))
    if pairs.shape[0] == 0:
        return np.zeros((0, 2), np.int32)
    cls = _classify(x, pairs, faces, edges)
    hit = cls == 1
    und = np.nonzero(cls == -1)[0]
    if len(und):
        ex = _exact_classify(x, pairs, und.astype(np.int64), faces, edges)
        hit[und] = ex == 1
        und = und[ex == -1]
    for k in und:
        e, f = pairs[k]
        hit[k] = _exact_edge_triangle(x, edges[e, 0], edges[e, 1], faces[f, 0], faces[f, 1], faces[f, 2])
    return np.ascontiguousarray(pairs[hit])


def count_intersections(x: np.ndarray, faces: np.ndarray, edges: np.ndarray) -> int:
    """Number of intersecting (edge, triangle) pairs; 0 means the surface is intersection-free."""
    return int(find_intersections(x, faces, edges).shape[0])
