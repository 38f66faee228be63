"""The same closed surface with fewer triangles: flat regions of a stiff body's mesh re-triangulated from their
corners (the "mesh" collision shape, model/collision_shapes.py).

Why: contact cost grows with the number of primitives on a contact surface, and an artist's hard-surface prop
is often a subdivided box or a bevelled panel whose flat faces carry hundreds of coplanar triangles. A 10 cm
cube of 13 x 13 quads a face (1,016 vertices, 2,028 triangles) is, as a point set, the 8-vertex, 12-triangle
cube: the same surface. Merging does not move a point of the surface (beyond the tolerance below), so the
contact guarantee (no crossing of the surfaces) holds for the artist's mesh exactly as before, while two cubes
resting face to face meet at a handful of pairs instead of thousands. Curved or noisy surfaces have no flat
regions and are returned unchanged.

What is merged (all tests at ``tol`` = REL_TOL times the mesh's bounding-box diagonal, in metres):

- a *region* is a set of edge-connected triangles facing the same way whose vertices all lie within ``tol``
  of the region's plane;
- a vertex is dropped when it is inside one region (every triangle around it in that region), or on the crease
  between exactly two regions and within ``tol`` of the straight line through the crease's kept vertices on
  either side; corners (three or more regions) are kept;
- each region that lost a vertex is re-triangulated by ear clipping of its boundary loop in its plane.

A region whose boundary is not one simple loop (a face with a hole, a face touching itself at a vertex), or
whose loop ear clipping cannot triangulate, keeps its triangles and every vertex; the neighbours then keep
the shared vertices too (iterated until nothing changes). The result is checked: closed and manifold, the
same enclosed volume (to 1e-9 relative), no zero-area triangle; otherwise the input is returned unchanged.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .checks import enclosed_volume

REL_TOL = 1e-10        # the merge's tolerance, relative to the bounding-box diagonal (0.02 nm on a 20 cm prop)
MERGE = True           # False: the "mesh" shape keeps every triangle (benchmarks compare the two)
MAX_LOOP = 256         # a region whose polygon keeps more corners keeps its triangles (ear clipping is O(k^3))


def _unit_normals(V: np.ndarray, T: np.ndarray) -> tuple:
    """(unit normals (t, 3), areas (t,) m^2) of the triangles; a zero-area triangle gets a zero normal."""
    n = np.cross(V[T[:, 1]] - V[T[:, 0]], V[T[:, 2]] - V[T[:, 0]])
    a = np.linalg.norm(n, axis=1)
    return n / np.where(a > 0, a, 1.0)[:, None], 0.5 * a


def _edge_table(T: np.ndarray) -> tuple:
    """Directed edges (3t, 2), their triangle (3t,) and, per directed edge, the index of its reverse
    (-1 when absent)."""
    t = len(T)
    E = np.stack([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]], axis=1).reshape(-1, 2).astype(np.int64)
    tri = np.repeat(np.arange(t), 3)
    nv = int(T.max()) + 1
    key = E[:, 0] * nv + E[:, 1]
    rkey = E[:, 1] * nv + E[:, 0]
    order = np.argsort(key, kind="stable")
    pos = np.searchsorted(key[order], rkey)
    pos = np.minimum(pos, len(key) - 1)
    found = key[order][pos] == rkey
    rev = np.where(found, order[pos], -1)
    return E, tri, rev


def _regions(V: np.ndarray, T: np.ndarray, n: np.ndarray, tol: float, E, tri, rev) -> tuple:
    """(region label per triangle (t,) int64, number of regions): edge-connected components of triangles facing
    the same way whose neighbours' far vertices lie within tol of their planes, each checked flat within tol
    against its area-weighted plane (a component that is not is split back into single triangles)."""
    t = len(T)
    has = rev >= 0
    a, b = tri[has], tri[rev[has]]
    same = np.einsum("ij,ij->i", n[a], n[b]) > 1.0 - 1e-12
    # the other triangle's vertex off this edge lies in this triangle's plane
    opp = T[b].sum(axis=1) - E[has, 0] - E[has, 1]
    same &= np.abs(np.einsum("ij,ij->i", V[opp] - V[T[a, 0]], n[a])) <= tol
    g = coo_matrix((np.ones(int(same.sum())), (a[same], b[same])), shape=(t, t))
    k, lab = connected_components(g, directed=False)
    # check each component against one plane (area-weighted normal through the area-weighted centroid)
    _, area = _unit_normals(V, T)
    cen = V[T].mean(axis=1)
    nsum = np.zeros((k, 3))
    np.add.at(nsum, lab, n * area[:, None])
    nn = nsum / np.maximum(np.linalg.norm(nsum, axis=1), 1e-300)[:, None]
    asum = np.bincount(lab, weights=area, minlength=k)
    csum = np.zeros((k, 3))
    np.add.at(csum, lab, cen * area[:, None])
    c = csum / np.maximum(asum, 1e-300)[:, None]
    dev = np.abs(np.einsum("tkj,tj->tk", V[T] - c[lab][:, None, :], nn[lab])).max(axis=1)
    bad = np.zeros(k, bool)
    np.logical_or.at(bad, lab, dev > tol)
    if bad.any():      # rare (a gently curved surface within the per-edge test): those triangles stay alone
        lab = lab.copy()
        split = bad[lab]
        lab[split] = k + np.arange(int(split.sum()))
        k = k + int(split.sum())
        _, lab = np.unique(lab, return_inverse=True)
        k = int(lab.max()) + 1
    return lab.astype(np.int64), k


def _loop(E_reg: np.ndarray) -> Optional[list]:
    """The one boundary loop of a region's directed boundary edges, or None if they form several loops or a
    vertex is visited twice."""
    nxt = {}
    for u, v in E_reg:
        if u in nxt:
            return None
        nxt[int(u)] = int(v)
    start = int(E_reg[0, 0])
    out = [start]
    v = nxt[start]
    while v != start:
        if len(out) > len(nxt):
            return None
        out.append(v)
        v = nxt.get(v)
        if v is None:
            return None
    return out if len(out) == len(nxt) else None


def _ear_clip(P: np.ndarray, scale: float) -> Optional[list]:
    """Triangles (index triples into P) of the simple polygon P (k, 2), counter-clockwise; None if at some point
    no ear is found (degenerate input). Each step clips the best-shaped ear (largest smallest angle; the first
    on ties), every candidate tested against every vertex at once: O(k^3) numpy work, k <= MAX_LOOP."""
    idx = np.arange(len(P))
    eps = 1e-14 * scale * scale
    out = []

    def cross(o, p, q):     # (..., 2) arrays
        return (p[..., 0] - o[..., 0]) * (q[..., 1] - o[..., 1]) - (p[..., 1] - o[..., 1]) * (q[..., 0] - o[..., 0])

    while len(idx) > 3:
        m = len(idx)
        Q = P[idx]
        A, B, C = np.roll(Q, 1, axis=0), Q, np.roll(Q, -1, axis=0)
        convex = cross(A, B, C) > eps
        X = Q[None, :, :]
        inside = ((cross(A[:, None], B[:, None], X) >= -eps) & (cross(B[:, None], C[:, None], X) >= -eps)
                  & (cross(C[:, None], A[:, None], X) >= -eps))
        r = np.arange(m)
        inside[r, r] = inside[r, (r - 1) % m] = inside[r, (r + 1) % m] = False
        # a vertex at the same place as a corner of the ear (a polygon touching itself) does not block it
        inside &= ~(np.all(X == A[:, None], axis=2) | np.all(X == C[:, None], axis=2))
        ok = convex & ~inside.any(axis=1)
        if not ok.any():
            return None
        q = np.where(ok, _min_angles(A, B, C), -1.0)
        i = int(np.argmax(q))
        out.append((int(idx[i - 1]), int(idx[i]), int(idx[(i + 1) % m])))
        idx = np.delete(idx, i)
    a, b, c = P[idx[0]], P[idx[1]], P[idx[2]]
    if cross(a, b, c) <= eps:
        return None
    out.append((int(idx[0]), int(idx[1]), int(idx[2])))
    return out


def _min_angles(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Smallest angle (rad) of each triangle (A_i, B_i, C_i), 2-D points (m, 2)."""
    def ang(p, q, r):
        u, v = q - p, r - p
        return np.arctan2(np.abs(u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]), np.einsum("ij,ij->i", u, v))
    return np.minimum(np.minimum(ang(A, B, C), ang(B, C, A)), ang(C, A, B))


def _closed_manifold(T: np.ndarray) -> bool:
    E = np.concatenate([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]]).astype(np.int64)
    nv = int(T.max()) + 1
    key = np.sort(E[:, 0] * nv + E[:, 1])
    rkey = np.sort(E[:, 1] * nv + E[:, 0])
    return bool(np.array_equal(key, rkey) and np.unique(key).size == key.size)


def merge_planar(vertices: np.ndarray, triangles: np.ndarray, rel_tol: float = REL_TOL) -> tuple:
    """(vertices (k, 3) float64, triangles (t, 3) int32, kept (k,) int64 indices into ``vertices``): the closed
    surface (vertices, triangles) with its flat regions re-triangulated from their corners (module docstring).
    Returns the input (kept = all) when nothing merges or a check fails."""
    V = np.ascontiguousarray(vertices, np.float64)
    T = np.ascontiguousarray(triangles, np.int64)
    unchanged = (V, T.astype(np.int32), np.arange(len(V), dtype=np.int64))
    if not MERGE or len(T) < 4:
        return unchanged
    diag = float(np.linalg.norm(np.ptp(V, axis=0)))
    tol = rel_tol * diag
    n, area = _unit_normals(V, T)
    if (area <= 0).any():
        return unchanged
    E, tri, rev = _edge_table(T)
    if (rev < 0).any():
        return unchanged                      # not closed: leave it to the checks that name the problem
    lab, k = _regions(V, T, n, tol, E, tri, rev)
    if k == len(T):
        return unchanged                      # no two triangles share a plane (a curved or noisy surface)
    crease = lab[tri] != lab[tri[rev]]        # directed edges between two regions
    merged = np.ones(k, bool)
    for _ in range(64):
        ok, out = _attempt(V, T, n, lab, k, merged, crease, E, tri, tol, diag)
        if ok.all():
            break
        merged &= ok
    else:
        return unchanged
    if len(out) >= len(T):
        return unchanged
    kept, inv = np.unique(out.ravel(), return_inverse=True)
    Vs, Ts = V[kept], inv.reshape(-1, 3).astype(np.int32)
    _, a2 = _unit_normals(Vs, Ts)
    o = V.mean(axis=0)                        # volumes about a point near the body: no round-off from far away
    vol = enclosed_volume(V - o, T)
    if (not _closed_manifold(Ts) or (a2 <= 1e-12 * diag * diag).any()
            or abs(enclosed_volume(Vs - o, Ts) - vol) > 1e-9 * abs(vol)):
        return unchanged
    return np.ascontiguousarray(Vs), np.ascontiguousarray(Ts), kept.astype(np.int64)


def _attempt(V, T, n, lab, k, merged, crease, E, tri, tol, diag):
    """One pass: the dropped vertices under the current ``merged`` flags, each merged region's new triangles.
    Returns (ok per region, triangles) where ok is False for regions that could not be re-triangulated."""
    nv = len(V)
    # regions around each vertex
    vkey = np.unique(T.ravel() * k + np.repeat(lab, 3))       # (vertex, region) pairs as int64 keys
    vr = np.stack([vkey // k, vkey % k], axis=1)
    nreg = np.bincount(vr[:, 0], minlength=nv)
    allmerged = np.ones(nv, bool)
    np.logical_and.at(allmerged, vr[:, 0], merged[vr[:, 1]])
    drop = allmerged & (nreg == 1)
    # crease vertices: exactly two regions, exactly two crease edges leaving them (as undirected)
    ce = E[crease]
    ckey = np.unique(ce.min(axis=1) * nv + ce.max(axis=1))
    cu = np.stack([ckey // nv, ckey % nv], axis=1)
    deg = np.bincount(cu.ravel(), minlength=nv)
    cand = allmerged & (nreg == 2) & (deg == 2)
    # each vertex's two crease neighbours (meaningful where deg == 2)
    both = np.concatenate([cu, cu[:, ::-1]])
    both = both[np.lexsort((both[:, 1], both[:, 0]))]
    first = np.searchsorted(both[:, 0], np.arange(nv))
    nbr = -np.ones((nv, 2), np.int64)
    two = np.flatnonzero(deg == 2)
    nbr[two, 0] = both[first[two], 1]
    nbr[two, 1] = both[first[two] + 1, 1]
    drop |= cand
    # a dropped crease vertex must stay within tol of the segment between the kept crease vertices on either
    # side; walk the crease chains and keep the vertex farthest from its chord when it does not
    drop = _straight_chains(V, drop, cand, nbr, tol)
    ok = np.ones(k, bool)
    # only regions that lose a vertex are re-triangulated; the others keep their triangles (in bulk: a curved
    # mesh is one region per triangle)
    lose = np.zeros(k, bool)
    np.logical_or.at(lose, lab, drop[T].any(axis=1))
    lose &= merged
    out = [T[~lose[lab]]]
    reg_tris = np.argsort(lab, kind="stable")
    starts = np.searchsorted(lab[reg_tris], np.arange(k + 1))
    for r in np.flatnonzero(lose):
        ts = reg_tris[starts[r]:starts[r + 1]]
        # the region's boundary: its directed edges whose reverse is in another region
        e_idx = (ts[:, None] * 3 + np.arange(3)).ravel()
        bnd = E[e_idx[crease[e_idx]]]
        loop = _loop(bnd) if len(bnd) else None
        if loop is None:
            ok[r] = False
            out.append(T[ts])
            continue
        poly = [v for v in loop if not drop[v]]
        if len(poly) < 3 or len(poly) > MAX_LOOP:
            ok[r] = False
            out.append(T[ts])
            continue
        nr = n[ts[0]]
        u = np.cross(nr, [1.0, 0.0, 0.0] if abs(nr[0]) < 0.9 else [0.0, 1.0, 0.0])
        u /= np.linalg.norm(u)
        w = np.cross(nr, u)
        Q = V[poly] - V[poly[0]]
        P2 = np.stack([Q @ u, Q @ w], axis=1)
        ears = _ear_clip(P2, diag)
        if ears is None:
            ok[r] = False
            out.append(T[ts])
            continue
        out.append(np.array([[poly[a], poly[b], poly[c]] for a, b, c in ears], np.int64))
    return ok, np.concatenate(out)


def _straight_chains(V, drop, cand, nbr, tol) -> np.ndarray:
    """``drop`` with crease vertices restored where dropping them would bend the crease by more than tol: for
    each maximal run of dropped crease vertices between two kept ones, every run vertex must lie within tol of
    the chord; otherwise the farthest is kept and the two halves are checked again."""
    drop = drop.copy()
    seen = np.zeros(len(V), bool)
    for v0 in np.flatnonzero(cand & drop):
        if seen[v0]:
            continue
        # walk both ways to the kept ends (a closed chain of dropped vertices has none: all kept)
        run = [int(v0)]
        seen[v0] = True
        ends = []
        for side in (0, 1):
            prev, cur = int(v0), int(nbr[v0, side])
            chain = []
            while cur >= 0 and cand[cur] and drop[cur] and not seen[cur]:
                seen[cur] = True
                chain.append(cur)
                a, b = int(nbr[cur, 0]), int(nbr[cur, 1])
                prev, cur = cur, (b if a == prev else a)
            ends.append(-1 if (cur < 0 or seen[cur]) else cur)
            run = (chain[::-1] + run) if side == 0 else (run + chain)
        if ends[0] < 0 or ends[1] < 0:
            drop[run] = False
            continue
        stack = [(ends[0], run, ends[1])]
        while stack:
            a, seg, b = stack.pop()
            if not seg:
                continue
            d = V[b] - V[a]
            L2 = float(d @ d)
            X = V[seg] - V[a]
            if L2 == 0.0:
                drop[seg] = False
                continue
            s = X @ d / L2
            off = np.linalg.norm(X - s[:, None] * d, axis=1)
            bad = (off > tol) | (s <= 0.0) | (s >= 1.0)
            if not bad.any():
                continue
            j = int(np.argmax(np.where(bad, off + 1.0, off)))
            drop[seg[j]] = False
            stack.append((a, seg[:j], seg[j]))
            stack.append((seg[j], seg[j + 1:], b))
    return drop
