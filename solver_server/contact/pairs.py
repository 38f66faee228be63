"""Flattening of candidate pairs into 4-vertex stencils and their contact distances.

Every candidate (point-triangle or edge-edge) becomes a row of ids (K, 4) int32 in slot order
(p, t0, t1, t2) or (a0, a1, b0, b1), an is_ee flag, the summed contact offset (m) and the
mollifier threshold eps_x (m^4, edge-edge only). The contact distance of a pair is
s = d - offset with d the unsigned distance (book: "Distance Barrier"; offsets model thickness).
"""
import math

import numpy as np
from numba import njit, prange

from .broad_phase import Candidates
from .distance import point_triangle_stencil, edge_edge_stencil
from .mesh import CollisionMesh
from .mollifier import MOLLIFIER_SCALE
from .vec3 import row


@njit(cache=True, fastmath=False, parallel=True)
def gather_pairs(pt, ee, faces, edges, face_offset, edge_offset, vertex_offset, edge_rest_len2):
    npt = pt.shape[0]
    K = npt + ee.shape[0]
    ids = np.empty((K, 4), dtype=np.int32)
    is_ee = np.zeros(K, dtype=np.uint8)
    off = np.empty(K)
    epsx = np.zeros(K)
    for k in prange(K):
        if k < npt:
            v = pt[k, 0]
            f = pt[k, 1]
            ids[k, 0] = v
            ids[k, 1] = faces[f, 0]
            ids[k, 2] = faces[f, 1]
            ids[k, 3] = faces[f, 2]
            off[k] = vertex_offset[v] + face_offset[f]
        else:
            a = ee[k - npt, 0]
            b = ee[k - npt, 1]
            ids[k, 0] = edges[a, 0]
            ids[k, 1] = edges[a, 1]
            ids[k, 2] = edges[b, 0]
            ids[k, 3] = edges[b, 1]
            off[k] = edge_offset[a] + edge_offset[b]
            is_ee[k] = 1
            epsx[k] = MOLLIFIER_SCALE * edge_rest_len2[a] * edge_rest_len2[b]
    return ids, is_ee, off, epsx


@njit(cache=True, fastmath=False, inline="always")
def pair_stencil(x, ids, is_ee, k):
    """Closest-feature stencil and squared distance of pair k at positions x (n, 3)."""
    if is_ee[k]:
        return edge_edge_stencil(row(x, ids[k, 0]), row(x, ids[k, 1]), row(x, ids[k, 2]), row(x, ids[k, 3]))
    return point_triangle_stencil(row(x, ids[k, 0]), row(x, ids[k, 1]), row(x, ids[k, 2]), row(x, ids[k, 3]))


@njit(cache=True, fastmath=False, parallel=True)
def contact_distances(x, ids, is_ee, off):
    """Contact distance s = sqrt(d^2) - offset (m) of every pair, (K,)."""
    K = ids.shape[0]
    s = np.empty(K)
    for k in prange(K):
        d2 = pair_stencil(x, ids, is_ee, k)[5]
        s[k] = math.sqrt(d2) - off[k]
    return s


@njit(cache=True, fastmath=False, parallel=True)
def swept_near_mask(x0, x1, ids, is_ee, off, limit):
    """Per pair (uint8, (K,)): 1 unless the boxes of its two primitives swept over x0 -> x1 (each the box of its
    vertices at both ends, m) are further apart than limit + its offset. Along the straight move, and at any
    positions whose every vertex lies in the box of its own two ends, each primitive stays in its swept box
    (its points are convex combinations of its vertices), so a pair marked 0 keeps a contact distance above
    limit there: with limit >= dhat it is inactive and cannot reach contact (a segment's sub-list)."""
    K = ids.shape[0]
    keep = np.zeros(K, np.uint8)
    nch = max(1, min(K, 64))
    for ch in prange(nch):
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            na = 2 if is_ee[k] else 1
            g2 = 0.0
            for a in range(3):
                alo = np.inf
                ahi = -np.inf
                blo = np.inf
                bhi = -np.inf
                for i in range(4):
                    v = ids[k, i]
                    lo = min(x0[v, a], x1[v, a])
                    hi = max(x0[v, a], x1[v, a])
                    if i < na:
                        alo = min(alo, lo)
                        ahi = max(ahi, hi)
                    else:
                        blo = min(blo, lo)
                        bhi = max(bhi, hi)
                gap = max(blo - ahi, alo - bhi, 0.0)
                g2 += gap * gap
            if math.sqrt(g2) - off[k] <= limit:
                keep[k] = 1
    return keep


@njit(cache=True, fastmath=False, inline="always")
def _swept_near(x0, x1, ids, is_ee, off, limit, k):
    """swept_near_mask's test of pair k (True: keep). An axis whose gap alone exceeds (limit + off) (1 + 1e-6)
    decides at once: the full gap sqrt(g2) is at least that axis' gap (to round-off far below 1e-6 relative), so
    sqrt(g2) - off > limit there as well (for off >= 0 and limit > 0; else no shortcut); every other pair takes
    the full test, so the answer is the same."""
    na = 2 if is_ee[k] else 1
    cut = (limit + off[k]) * (1.0 + 1e-6) if off[k] >= 0.0 and limit > 0.0 else np.inf
    g2 = 0.0
    for a in range(3):
        alo = np.inf
        ahi = -np.inf
        blo = np.inf
        bhi = -np.inf
        for i in range(4):
            v = ids[k, i]
            lo = min(x0[v, a], x1[v, a])
            hi = max(x0[v, a], x1[v, a])
            if i < na:
                alo = min(alo, lo)
                ahi = max(ahi, hi)
            else:
                blo = min(blo, lo)
                bhi = max(bhi, hi)
        gap = max(blo - ahi, alo - bhi, 0.0)
        if gap > cut:
            return False
        g2 += gap * gap
    return math.sqrt(g2) - off[k] <= limit


@njit(cache=True, fastmath=False, parallel=True)
def swept_near_subset(x0, x1, ids, is_ee, off, epsx, pt, ee, limit):
    """swept_near_mask and the cut of the kept pairs in one pass: (pt rows, ee rows, ids, is_ee, off, epsx) of the
    pairs marked 1, in their order (pairs 0 .. npt - 1 are pt's rows, the rest ee's, as their PairSet). Chunks
    count their kept pairs, then write them at their prefix offsets: the output does not depend on the threads."""
    K = ids.shape[0]
    npt = pt.shape[0]
    keep = np.zeros(K, np.uint8)
    nch = max(1, min(K, 64))
    cnt = np.zeros(nch + 1, np.int64)
    cpt = np.zeros(nch + 1, np.int64)
    for ch in prange(nch):
        c = 0
        cp = 0
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            if _swept_near(x0, x1, ids, is_ee, off, limit, k):
                keep[k] = 1
                c += 1
                if k < npt:
                    cp += 1
        cnt[ch + 1] = c
        cpt[ch + 1] = cp
    for ch in range(nch):
        cnt[ch + 1] += cnt[ch]
        cpt[ch + 1] += cpt[ch]
    n = cnt[nch]
    mpt = cpt[nch]
    opt = np.empty((mpt, 2), np.int32)
    oee = np.empty((n - mpt, 2), np.int32)
    oids = np.empty((n, 4), np.int32)
    oisee = np.empty(n, np.uint8)
    ooff = np.empty(n)
    oeps = np.empty(n)
    for ch in prange(nch):
        j = cnt[ch]
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            if keep[k] == 0:
                continue
            if k < npt:
                opt[j, 0] = pt[k, 0]
                opt[j, 1] = pt[k, 1]
            else:
                oee[j - mpt, 0] = ee[k - npt, 0]
                oee[j - mpt, 1] = ee[k - npt, 1]
            for i in range(4):
                oids[j, i] = ids[k, i]
            oisee[j] = is_ee[k]
            ooff[j] = off[k]
            oeps[j] = epsx[k]
            j += 1
    return opt, oee, oids, oisee, ooff, oeps


def swept_near_pairs(cands: Candidates, mesh: CollisionMesh, x0: np.ndarray, x1: np.ndarray,
                     limit: float) -> Candidates:
    """sub_pairs(cands, mesh, x0, swept_near_mask(x0, x1, ..., limit)) in one kernel (swept_near_subset): the same
    candidates and PairSet, byte for byte. x0, x1 (n, 3) float64 contiguous, m; limit m."""
    ps = pair_set(cands, mesh, x0)
    pt = np.asarray(cands.pt).reshape(-1, 2)
    ee = np.asarray(cands.ee).reshape(-1, 2)
    if not (pt.dtype == np.int32 and ee.dtype == np.int32):
        keep = swept_near_mask(x0, x1, ps.ids, ps.is_ee, ps.off, limit)
        return sub_pairs(cands, mesh, x0, keep)
    opt, oee, oids, oisee, ooff, oeps = swept_near_subset(x0, x1, ps.ids, ps.is_ee, ps.off, ps.epsx,
                                                          np.ascontiguousarray(pt), np.ascontiguousarray(ee),
                                                          float(limit))
    sub = Candidates(opt, oee)
    sp = PairSet.__new__(PairSet)
    sp.ids, sp.is_ee, sp.off, sp.epsx = oids, oisee, ooff, oeps
    sub._pairs = sp
    sub._pairs_mesh = mesh
    return sub


def sub_pairs(cands: Candidates, mesh: CollisionMesh, x: np.ndarray, keep: np.ndarray) -> Candidates:
    """The candidates of cands marked in keep (K,) (point-triangle rows first, as their PairSet), in their order,
    with their PairSet cut from cands' (no new gathering)."""
    ps = pair_set(cands, mesh, x)
    idx = np.flatnonzero(keep)
    npt = int(np.asarray(cands.pt).reshape(-1, 2).shape[0])
    cut = int(np.searchsorted(idx, npt))
    sub = Candidates(np.ascontiguousarray(np.asarray(cands.pt).reshape(-1, 2)[idx[:cut]]),
                     np.ascontiguousarray(np.asarray(cands.ee).reshape(-1, 2)[idx[cut:] - npt]))
    sp = PairSet.__new__(PairSet)
    sp.ids = np.ascontiguousarray(ps.ids[idx])
    sp.is_ee = np.ascontiguousarray(ps.is_ee[idx])
    sp.off = np.ascontiguousarray(ps.off[idx])
    sp.epsx = np.ascontiguousarray(ps.epsx[idx])
    sub._pairs = sp
    sub._pairs_mesh = mesh
    return sub


@njit(cache=True, fastmath=False, inline="always")
def local_positions(x, ids, k):
    X = np.empty(12)
    for i in range(4):
        for a in range(3):
            X[3 * i + a] = x[ids[k, i], a]
    return X


class PairSet:
    """Candidates flattened for the kernels (built once per candidate set)."""

    def __init__(self, cands: Candidates, mesh: CollisionMesh, x: np.ndarray):
        rest = mesh.ensure_rest(x)
        self.ids, self.is_ee, self.off, self.epsx = gather_pairs(
            np.ascontiguousarray(cands.pt, dtype=np.int32).reshape(-1, 2),
            np.ascontiguousarray(cands.ee, dtype=np.int32).reshape(-1, 2),
            mesh.faces, mesh.edges, mesh.face_offset, mesh.edge_offset, mesh.vertex_offset, rest)

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def pair_set(cands: Candidates, mesh: CollisionMesh, x: np.ndarray) -> PairSet:
    """Cached flattening: the PairSet is stored on the Candidates object."""
    ps = getattr(cands, "_pairs", None)
    if ps is None or getattr(cands, "_pairs_mesh", None) is not mesh:
        ps = PairSet(cands, mesh, x)
        cands._pairs = ps
        cands._pairs_mesh = mesh
    return ps
