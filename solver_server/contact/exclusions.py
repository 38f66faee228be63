"""Contact exclusions: pairs of primitives the barrier, friction, CCD and intersection checks skip.

An attachment (model/attachments.py) ties a vertex to a point on another body's surface; the pairs between
that vertex's one-ring and the surface near its anchor would put the barrier against the attachment, so the
scene lists them here and every contact query drops them. Pairs are keyed as int64 numbers (sorted):
point-triangle ``v * F + f`` (vertex, face index), edge-edge ``a * E + b`` (edge indices, a < b, as the broad
phase reports them), edge-triangle ``e * F + f`` (the intersection checks' rows). F and E: the numbers of faces
and edges of the CollisionMesh.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .broad_phase import Candidates, find_candidates_ccd
from .ccd import DEFAULT_MAX_ITER, accd_pair, gather_motion, pair_of
from .mesh import CollisionMesh


@dataclass
class Exclusions:
    """Sorted int64 keys of the excluded pairs (module doc) of one CollisionMesh."""

    pt: np.ndarray
    ee: np.ndarray
    ef: np.ndarray

    def __len__(self) -> int:
        return int(self.pt.size + self.ee.size + self.ef.size)


@njit(cache=True)
def _kept(pairs, stride, keys):
    """Mask (k,) of the rows (a, b) of ``pairs`` whose key a * stride + b is not in the sorted ``keys``."""
    out = np.ones(pairs.shape[0], np.bool_)
    if keys.size == 0:
        return out
    for i in range(pairs.shape[0]):
        k = np.int64(pairs[i, 0]) * stride + np.int64(pairs[i, 1])
        j = np.searchsorted(keys, k)
        if j < keys.size and keys[j] == k:
            out[i] = False
    return out


def filter_candidates(cands: Candidates, mesh: CollisionMesh, ex: Exclusions) -> Candidates:
    """``cands`` without the excluded point-triangle and edge-edge pairs."""
    pt = cands.pt[_kept(cands.pt, mesh.faces.shape[0], ex.pt)] if len(ex.pt) and len(cands.pt) else cands.pt
    ee = cands.ee[_kept(cands.ee, mesh.edges.shape[0], ex.ee)] if len(ex.ee) and len(cands.ee) else cands.ee
    return Candidates(np.ascontiguousarray(pt), np.ascontiguousarray(ee))


def filter_hits(hits: np.ndarray, mesh: CollisionMesh, ex: Exclusions) -> np.ndarray:
    """Rows (edge, face) of find_intersections without the excluded edge-triangle pairs."""
    hits = np.asarray(hits).reshape(-1, 2)
    if not len(ex.ef) or not len(hits):
        return hits
    return hits[_kept(hits.astype(np.int64), mesh.faces.shape[0], ex.ef)]


@njit(cache=True, parallel=True)
def _min_toi_pairs(x, p, pairs, mode, faces, edges, vertex_offset, face_offset, edge_offset, eta, t_start, max_iter):
    """Smallest additive-CCD time of impact over a pair list (mode 0: vertex-face, 1: edge-edge)."""
    n = pairs.shape[0]
    nch = max(1, min(n, 64))
    best = np.full(nch, t_start)
    for ch in prange(nch):
        tcur = t_start
        X0 = np.empty(12)
        P = np.empty(12)
        ids = np.empty(4, dtype=np.int64)
        for k in range(ch * n // nch, (ch + 1) * n // nch):
            off = pair_of(mode, pairs[k, 0], pairs[k, 1], faces, edges, vertex_offset, face_offset, edge_offset, ids)
            gather_motion(x, p, ids, X0, P)
            toi = accd_pair(X0, P, mode == 1, off, eta, tcur, max_iter)
            if toi < tcur:
                tcur = toi
        best[ch] = tcur
    return best.min()


def max_step_excluding(x: np.ndarray, p: np.ndarray, mesh: CollisionMesh, ex: Exclusions, eta: float = 0.1,
                       max_iter: int = DEFAULT_MAX_ITER) -> float:
    """ccd.max_step_size without the excluded pairs: the swept broad phase's pairs (boxes inflated by the
    offsets only) filtered, then additive CCD on each. Positions and direction (n, 3) in m."""
    x = np.ascontiguousarray(x, np.float64).reshape(-1, 3)
    p = np.ascontiguousarray(p, np.float64).reshape(-1, 3)
    c = filter_candidates(find_candidates_ccd(x, x + p, mesh, 0.0), mesh, ex)
    args = (mesh.faces, mesh.edges, mesh.vertex_offset, mesh.face_offset, mesh.edge_offset, float(eta))
    alpha = 1.0
    if len(c.pt):
        alpha = _min_toi_pairs(x, p, c.pt, 0, *args, alpha, int(max_iter))
    if len(c.ee):
        alpha = _min_toi_pairs(x, p, c.ee, 1, *args, alpha, int(max_iter))
    return float(min(1.0, alpha))
