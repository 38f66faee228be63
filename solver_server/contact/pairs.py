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
