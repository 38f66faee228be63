"""Contact detection and conservative per-vertex displacement bounds (the fast solver's guarantee).

At a detection point x0 every collision pair the Newton solver would consider (point-triangle and
edge-edge, same exclusions: incident primitives, no self contact where the body has none, static
collider pairs) either is a candidate of the broad phase with query distance r, or has
s_k(x0) >= r (s = d - o, the contact distance). Each surface vertex i may then move by
delta_i = x_i - x0_i inside the convex set

    |delta_i| <= gamma r   and   u_ik . delta_i <= gamma s_k(x0)  for every candidate pair k of i,

with 0 < gamma < 1/2 and u_ik = -n_k for a vertex on side A of the pair (the point, or the first
edge), +n_k on side B (the triangle, or the second edge), n_k the unit vector from B's closest
point to A's at x0.

Claim: every configuration x with all delta_i in their sets, and every straight path between two
such configurations, has s_k(x) >= (1 - 2 gamma) min(s_k(x0), r) > 0 for every pair: no
intersection, and the barrier stays finite. Proof. Candidates: A and B are convex hulls of their
vertices; at x0 the plane through B's closest point with normal n_k separates them with gap d_k
(projection property: n . (z - q0) <= 0 for all z in B). Projection on n_k is 1-Lipschitz, so
dist(A', B') >= min over A' of n.a - max over B' of n.b, both attained at vertices, and each
vertex's term changes by at most gamma s_k by its constraint: d_k(x) >= d_k(x0) - 2 gamma s_k(x0).
Pairs beyond the query distance: the distance between hulls changes by at most the largest vertex
move of each side, <= gamma r each, so d_k(x) >= d_k(x0) - 2 gamma r with s_k(x0) >= r. Each set
is convex (a ball cut by half-spaces) and contains delta = 0, so their product is convex and holds
straight paths between its points.

A vertex with MAX_CONSTRAINTS or more pairs gets the ball radius gamma s_k of its MAX_CONSTRAINTS-th
closest pair instead of gamma r, which implies (and drops) every constraint with a bound at least that.

Motion along the contact (tangential sliding, a body translating parallel to another) is bounded
only by gamma r; motion towards the other side by gamma s_k. Vertices on no collision primitive
(interior tet nodes) get no bound. Only pairs that can become active inside the sets are kept for
the barrier: s_k can fall by at most 2 gamma min(r, s_k(x0)); for s_k >= dhat / (1 - 2 gamma) it
stays >= dhat.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit, prange

import math

from solver_server.contact.barrier_pair import pair_stencil_local
from solver_server.contact.distance import stencil_closest_into

from solver_server.contact.broad_phase import find_candidates
from solver_server.contact.pairs import contact_distances, pair_set, pair_stencil

GAMMA = 0.4  # fraction of the clearance a vertex may use between detections (< 1/2)
VOLUME_KEEP = 0.1      # one vertex move keeps >= 10% of each incident tet's volume
MAX_CONSTRAINTS = 16  # per vertex: the ball shrinks to the 16th closest pair's bound, which implies the rest


class Bounds(NamedTuple):
    """The per-vertex admissible sets of one detection, as the kernels read them (the BD argument;
    ray_fraction). Vertex v may move to p when |p - center_v| <= radius_v and
    u_j . (p - center_v) <= b_j for every constraint j in cs_start[v]:cs_start[v + 1].

    center    (n, 3) float64   m, positions at the detection point
    radius    (n,) float64     m, ball radius gamma r (or gamma s of the MAX_CONSTRAINTS-th closest pair);
                               inf for vertices on no collision primitive
    cs_start  (n + 1,) int64   CSR start of each vertex's half-space constraints
    cs_u      (M, 3) float64   unit outward normals u_j of the constraints
    cs_b      (M,) float64     m, their bounds gamma s_k
    """

    center: np.ndarray
    radius: np.ndarray
    cs_start: np.ndarray
    cs_u: np.ndarray
    cs_b: np.ndarray


def unbounded(x: np.ndarray) -> Bounds:
    """Bounds that admit every move (no contact): centred at x (n, 3), infinite balls, no constraints."""
    n = len(x)
    return Bounds(x.copy(), np.full(n, np.inf), np.zeros(n + 1, np.int64), np.zeros((0, 3)), np.zeros(0))


@dataclass
class Detection:
    """Balls and the barrier's pair list at one detection point."""

    center: np.ndarray     # (n, 3) m, positions at detection
    radius: np.ndarray     # (n,) m, gamma r for surface vertices, inf for vertices on no collision primitive
    cs_start: np.ndarray   # (n + 1,) int64 CSR of each vertex's half-space constraints
    cs_u: np.ndarray       # (M, 3) unit normals u: u . (x_i - center_i) <= cs_b
    cs_b: np.ndarray       # (M,) m, gamma s_k
    ids: np.ndarray        # (K, 4) int32 pairs that can become active inside the balls
    is_ee: np.ndarray      # (K,) uint8
    off: np.ndarray        # (K,) m, summed contact offsets
    epsx: np.ndarray       # (K,) m^4, edge-edge mollifier thresholds
    s0: np.ndarray         # (K,) m, contact distances of those pairs at the detection point
    min_distance: float    # m, smallest contact distance among the candidates (inf if none)
    candidates: int        # pairs examined

    def bounds(self) -> Bounds:
        """The admissible sets as the kernels' Bounds pack."""
        return Bounds(self.center, self.radius, self.cs_start, self.cs_u, self.cs_b)


@njit(cache=True, fastmath=False)
def _vertex_pairs(ids, s, r_query, n):
    """CSR (start (n + 1,), pair indices) of the pairs closer than r_query at each of their four
    vertices, each vertex's pairs in ascending order."""
    K = ids.shape[0]
    start = np.zeros(n + 1, np.int64)
    for k in range(K):
        if s[k] < r_query:
            for i in range(4):
                start[ids[k, i] + 1] += 1
    for v in range(n):
        start[v + 1] += start[v]
    fill = start[:-1].copy()
    pk = np.empty(start[n], np.int64)
    for k in range(K):
        if s[k] < r_query:
            for i in range(4):
                v = ids[k, i]
                pk[fill[v]] = k
                fill[v] += 1
    return start, pk


@njit(cache=True, fastmath=False, parallel=True)
def _constraints(x, ids, is_ee, s, gamma, r_query, radius, kmax):
    """Half-space constraints (CSR by vertex) u . delta <= gamma s_k of the candidate pairs, at most
    kmax - 1 per vertex: a vertex with kmax or more pairs closer than r_query gets the ball radius
    gamma s of its kmax-th closest pair (radius is updated in place), which implies every constraint
    with a bound >= that radius (|delta| <= R <= b gives u . delta <= b); implied ones are dropped.
    Closest points are computed only for pairs that give some vertex a constraint. A pair at or
    beyond r_query bounds no slot below its vertex's ball. Vertices, then pairs, run in parallel;
    each vertex's constraints are in pair order."""
    K = ids.shape[0]
    n = radius.shape[0]
    vs, pk = _vertex_pairs(ids, s, r_query, n)
    cnt = np.zeros(n + 1, np.int64)
    for v in prange(n):
        if vs[v + 1] - vs[v] >= kmax:
            best = np.full(kmax, np.inf)     # the kmax smallest distances, ascending
            for j in range(vs[v], vs[v + 1]):
                sk = s[pk[j]]
                if sk < best[kmax - 1]:
                    i = kmax - 1
                    while i > 0 and best[i - 1] > sk:
                        best[i] = best[i - 1]
                        i -= 1
                    best[i] = sk
            radius[v] = min(radius[v], gamma * best[kmax - 1])
        c = 0
        for j in range(vs[v], vs[v + 1]):
            if gamma * s[pk[j]] < radius[v]:
                c += 1
        cnt[v + 1] = c
    for v in range(n):
        cnt[v + 1] += cnt[v]
    # unit direction from B's closest point to A's of every pair that bounds some vertex
    nrm = np.zeros((K, 3))
    nch = max(1, min(K, 64))
    for ch in prange(nch):
        X = np.empty(12)
        c = np.empty(4)
        r = np.empty(3)
        dc = np.empty((2, 4))
        sv = np.empty((2, 3))
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            if s[k] >= r_query:
                continue
            bk = gamma * s[k]
            if not (bk < radius[ids[k, 0]] or bk < radius[ids[k, 1]] or bk < radius[ids[k, 2]]
                    or bk < radius[ids[k, 3]]):
                continue
            for i in range(4):
                for a in range(3):
                    X[3 * i + a] = x[ids[k, i], a]
            kind, i0, i1, i2, i3, d2 = pair_stencil_local(X, is_ee[k])
            stencil_closest_into(X, kind, i0, i1, i2, i3, c, r, dc, sv)
            d = math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
            # r = sum c_i x_i points from B's closest point to A's when side A's coefficients sum to +1;
            # the stencil may start from a B-side point (e.g. the end point of the second edge), then -1
            ca = c[0] + (c[1] if is_ee[k] else 0.0)
            orient = 1.0 if ca > 0.0 else -1.0
            for a in range(3):
                nrm[k, a] = orient * r[a] / d
    u = np.empty((cnt[n], 3))
    b = np.empty(cnt[n])
    for v in prange(n):
        j = cnt[v]
        for jj in range(vs[v], vs[v + 1]):
            k = pk[jj]
            bk = gamma * s[k]
            if bk >= radius[v]:
                continue
            side_a = ids[k, 0] == v or (is_ee[k] and ids[k, 1] == v)
            sg = -1.0 if side_a else 1.0
            for a in range(3):
                u[j, a] = sg * nrm[k, a]
            b[j] = bk
            j += 1
    return cnt, u, b


@njit(cache=True, fastmath=False)
def max_move(x, ref, on_surface):
    """Largest |x_i - ref_i| (m) over surface vertices."""
    m = 0.0
    for i in range(x.shape[0]):
        if on_surface[i]:
            d = (x[i, 0] - ref[i, 0]) ** 2 + (x[i, 1] - ref[i, 1]) ** 2 + (x[i, 2] - ref[i, 2]) ** 2
            if d > m:
                m = d
    return math.sqrt(m)


@njit(cache=True, fastmath=False, parallel=True)
def _near(x, x_ref, ids, is_ee, off, s_ref, r):
    """Exact contact distances (m) at x of the listed pairs that may be closer than r (inf for the
    rest): pair k is skipped when s_ref_k - D_A - D_B >= r, D_A, D_B the largest moves of its two
    sides' vertices since x_ref (a hull's distance to anything changes by at most its largest
    vertex move)."""
    n = x.shape[0]
    D = np.empty(n)
    for i in prange(n):
        D[i] = math.sqrt((x[i, 0] - x_ref[i, 0]) ** 2 + (x[i, 1] - x_ref[i, 1]) ** 2 + (x[i, 2] - x_ref[i, 2]) ** 2)
    K = ids.shape[0]
    s = np.empty(K)
    for k in prange(K):
        a_end = 2 if is_ee[k] else 1
        da = 0.0
        db = 0.0
        for j in range(4):
            if j < a_end:
                da = max(da, D[ids[k, j]])
            else:
                db = max(db, D[ids[k, j]])
        if s_ref[k] - da - db < r:
            kind, i0, i1, i2, i3, d2 = pair_stencil(x, ids, is_ee, k)
            s[k] = math.sqrt(d2) - off[k]
        else:
            s[k] = np.inf
    return s


@njit(cache=True, fastmath=False, parallel=True)
def _select(ids, is_ee, off, epsx, s, s_max):
    """The pairs with s < s_max, in order: (ids, is_ee, off, epsx, s) compacted in parallel (count
    per chunk, then write), where numpy's nonzero and five fancy indexings of a ~500,000-pair Verlet
    list were serial."""
    K = s.shape[0]
    nch = max(1, min(K, 64))
    cnt = np.zeros(nch + 1, np.int64)
    for ch in prange(nch):
        c = 0
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            if s[k] < s_max:
                c += 1
        cnt[ch + 1] = c
    for ch in range(nch):
        cnt[ch + 1] += cnt[ch]
    m = cnt[nch]
    ids2 = np.empty((m, 4), np.int32)
    ee2 = np.empty(m, np.uint8)
    off2 = np.empty(m)
    eps2 = np.empty(m)
    s2 = np.empty(m)
    for ch in prange(nch):
        j = cnt[ch]
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            if s[k] < s_max:
                for i in range(4):
                    ids2[j, i] = ids[k, i]
                ee2[j] = is_ee[k]
                off2[j] = off[k]
                eps2[j] = epsx[k]
                s2[j] = s[k]
                j += 1
    return ids2, ee2, off2, eps2, s2


class NearPairs:
    """A subset of listed pairs with their contact distances s (m) at the query point
    (the PairSet attributes ids, is_ee, off, epsx, so the friction setup and statistics take it)."""

    def __init__(self, ids, is_ee, off, epsx, s):
        self.ids, self.is_ee, self.off, self.epsx, self.s = ids, is_ee, off, epsx, s

    def __len__(self) -> int:
        return int(self.ids.shape[0])


class PairCache:
    """A Verlet list of candidate pairs: one broad phase serves every detection while it is valid.

    The broad phase at x_ref with query distance r_built returns every pair with s(x_ref) < r_built
    (a superset; the list keeps only those, with their distances s_ref). Every vertex of a pair has
    moved at most D = max |x_i - x_ref_i| since, so the distance between the pair's convex hulls
    changed by at most 2 D: at x, every pair with s(x) < r is in that list whenever
    r + 2 D <= r_built. A query at x with distance r then computes exact distances only for the
    listed pairs whose own vertices moved enough to bring them under r (_near), and the list is
    rebuilt with r_built = r (1 + 2 MARGIN_FRACTION) when the test fails."""

    def __init__(self, mesh, on_surface: np.ndarray, edge_scale: float):
        self.mesh = mesh
        self.on_surface = on_surface
        self.edge_scale = float(edge_scale)
        self.x_ref = None
        self.r_built = 0.0
        self.ps = None
        self.builds = 0
        self.reuses = 0

    def _build(self, x: np.ndarray, r: float) -> None:
        self.rebuild(x, float(r) * (1.0 + 2.0 * MARGIN_FRACTION))

    def rebuild(self, x_ref: np.ndarray, r_built: float) -> None:
        """The list of a broad phase at x_ref with query distance r_built (m). A resumed bake calls it
        with the checkpointed build point: the list (which pairs beyond the query distance it holds, in
        which order) then equals the uninterrupted bake's, and so do the detections made from it."""
        x = np.ascontiguousarray(x_ref, np.float64)
        self.r_built = float(r_built)
        self.x_ref = x.copy()
        ps = pair_set(find_candidates(x, self.mesh, self.r_built), self.mesh, x)
        s = contact_distances(x, ps.ids, ps.is_ee, ps.off) if len(ps) else np.zeros(0)
        self.ps = NearPairs(*_select(ps.ids, ps.is_ee, ps.off, ps.epsx, s, self.r_built))
        self.builds += 1

    def near(self, x: np.ndarray, r: float) -> NearPairs:
        """Every pair with s(x) < r (m), and some farther ones, with exact distances s at x."""
        x = np.ascontiguousarray(x, np.float64)
        if (self.x_ref is not None and self.x_ref.shape == x.shape
                and r + 2.0 * max_move(x, self.x_ref, self.on_surface) <= self.r_built):
            self.reuses += 1
            ps = self.ps
            s = _near(x, self.x_ref, ps.ids, ps.is_ee, ps.off, ps.s, float(r)) if len(ps) else ps.s
            return NearPairs(*_select(ps.ids, ps.is_ee, ps.off, ps.epsx, s, np.inf))
        self._build(x, r)     # just measured at x: the list's own distances are exact
        ps = self.ps
        return NearPairs(*_select(ps.ids, ps.is_ee, ps.off, ps.epsx, ps.s, float(r)))


MARGIN_FRACTION = 1.0  # a rebuilt list covers moves of the whole query distance (r_built = 3 r, 1.5 edge
                       # lengths on cloth at the usual query distance). Pairs whose own vertices have not moved
                       # far are not re-measured (_near), so a long list costs little per query. Frame 41 of the
                       # 64^2 drape, one thread: 8 builds and 0.63 s of detection, against 16 builds and 1.03 s
                       # with a fifth and every listed pair re-measured; 11 builds (0.80 s) at 0.75, 0.86 s at 1.5


def detect(x: np.ndarray, mesh, r_query: float, dhat: float, on_surface: np.ndarray,
           gamma: float = GAMMA, cache: PairCache = None) -> Detection:
    """Candidates within r_query (m) at x, the per-vertex admissible sets and the barrier pair list.
    With a PairCache the candidates come from its Verlet list (the same pairs within r_query).

    Raises RuntimeError if some pair already has s <= 0: the invariant was broken upstream."""
    if not 0.0 < gamma < 0.5:
        raise ValueError("gamma must be in (0, 1/2)")
    r_query = max(float(r_query), dhat / (1.0 - 2.0 * gamma))
    x = np.ascontiguousarray(x, np.float64)
    if cache is None:
        ps = pair_set(find_candidates(x, mesh, r_query), mesh, x)
        s = contact_distances(x, ps.ids, ps.is_ee, ps.off) if len(ps) else np.zeros(0)
    else:
        ps = cache.near(x, r_query)
        s = ps.s
    n = x.shape[0]
    radius = np.where(on_surface, gamma * r_query, np.inf)
    if len(ps):
        if not (s > 0.0).all():
            raise RuntimeError(f"contact distance {float(s.min()):.3g} m <= 0 at a detection point")
        cs_start, cs_u, cs_b = _constraints(x, ps.ids, ps.is_ee, s, float(gamma), r_query, radius, MAX_CONSTRAINTS)
        smallest = float(s.min())
        ids, is_ee, off, epsx, s0 = _select(ps.ids, ps.is_ee, ps.off, ps.epsx, s, dhat / (1.0 - 2.0 * gamma))
    else:
        smallest = float("inf")
        cs_start, cs_u, cs_b = np.zeros(n + 1, np.int64), np.zeros((0, 3)), np.zeros(0)
        ids, is_ee = np.zeros((0, 4), np.int32), np.zeros(0, np.uint8)
        off, epsx, s0 = np.zeros(0), np.zeros(0), np.zeros(0)
    return Detection(x.copy(), radius, cs_start, cs_u, cs_b, np.ascontiguousarray(ids), np.ascontiguousarray(is_ee),
                     np.ascontiguousarray(off), np.ascontiguousarray(epsx), np.ascontiguousarray(s0), smallest, len(ps))


@njit(cache=True, fastmath=False, inline="always")
def ray_fraction(v, cur, dx, BD, nb):
    """Largest t in [0, 1] with cur + t dx inside vertex v's admissible set (BD: the Bounds of a
    detection), and the blocking constraint's outward normal into nb (3,) when t < 1 (zero vector if none)."""
    t, blk = ray_fraction_skip(v, cur, dx, BD, nb, -1)
    return t


@njit(cache=True, fastmath=False)
def half_space_slack(v, j, q, BD):
    """b_j - u_j . (q - center_v): how far (m) point q is inside half-space j of vertex v (< 0: outside)."""
    c = BD.center
    u = BD.cs_u
    return BD.cs_b[j] - (u[j, 0] * (q[0] - c[v, 0]) + u[j, 1] * (q[1] - c[v, 1]) + u[j, 2] * (q[2] - c[v, 2]))


@njit(cache=True, fastmath=False)
def ray_fraction_skip(v, cur, dx, BD, nb, skip):
    """ray_fraction, ignoring half-space ``skip`` (-1: none), and also returning the blocking
    constraint: (t, blk) with blk the half-space's index, -2 for the ball, -1 for none. A slide along
    the half-space that blocked the first ray skips it: the slid direction's component along its normal
    is rounding noise, which otherwise stops the slide at t ~ 0 about a quarter of the time."""
    center, radius, cs_s, cs_u, cs_b = BD.center, BD.radius, BD.cs_start, BD.cs_u, BD.cs_b
    t = 1.0
    blk = -1
    e0 = cur[0] - center[v, 0]
    e1 = cur[1] - center[v, 1]
    e2 = cur[2] - center[v, 2]
    for j in range(cs_s[v], cs_s[v + 1]):
        if j == skip:
            continue
        ud = cs_u[j, 0] * dx[0] + cs_u[j, 1] * dx[1] + cs_u[j, 2] * dx[2]
        if ud > 0.0:
            slack = cs_b[j] - (cs_u[j, 0] * e0 + cs_u[j, 1] * e1 + cs_u[j, 2] * e2)
            tj = max(slack, 0.0) / ud
            if tj < t:
                t = tj
                blk = j
    R = radius[v]
    if R < np.inf:
        a = dx[0] * dx[0] + dx[1] * dx[1] + dx[2] * dx[2]
        if a > 0.0:
            bq = e0 * dx[0] + e1 * dx[1] + e2 * dx[2]
            c = e0 * e0 + e1 * e1 + e2 * e2 - R * R
            if c > 0.0:
                c = 0.0
            tb = (-bq + math.sqrt(max(bq * bq - a * c, 0.0))) / a
            if tb < t:
                t = max(tb, 0.0)
                blk = -2
    nb[0] = 0.0
    nb[1] = 0.0
    nb[2] = 0.0
    if blk >= 0:
        for q in range(3):
            nb[q] = cs_u[blk, q]
    elif blk == -2:
        f0, f1, f2 = e0 + t * dx[0], e1 + t * dx[1], e2 + t * dx[2]
        fn = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
        if fn > 0.0:
            nb[0], nb[1], nb[2] = f0 / fn, f1 / fn, f2 / fn
    return t, blk
