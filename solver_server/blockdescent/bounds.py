"""Contact detection and conservative per-vertex displacement bounds (the fast solver's guarantee).

At a detection point x0 every collision pair the Newton solver would consider (point-triangle and
edge-edge, same exclusions: incident primitives, no self contact where the body has none, static
collider pairs) either is a candidate of the broad phase with query distance r (its contact
distance s_k(x0) = d_k - o_k is computed), or has s_k(x0) >= r. Each surface vertex i gets the ball
|x_i - x0_i| <= b_i with

    b_i = gamma * min(r, min over candidate pairs k containing i of s_k(x0)),   0 < gamma < 1/2.

Claim: every configuration x inside all balls, and every straight path between two such
configurations, has s_k(x) >= (1 - 2 gamma) s_k(x0) > 0 for every pair (no intersection, and the
barrier stays finite). Proof: the unsigned distance between a point and a triangle (or two
segments) is the distance between two convex hulls; moving each vertex by at most delta moves
every point of a hull by at most the largest vertex move of that hull (convex combination), so
d_k changes by at most b_A + b_B <= 2 gamma s_k(x0) (both sides' vertices are in pair k, so
their b <= gamma s_k) for candidates, and by at most 2 gamma r <= 2 gamma s_k(x0) for the others.
The product of balls is convex, so segments between admissible configurations are admissible.
Vertices that are on no collision primitive (interior tet nodes) get no ball.

Only pairs that can become active inside the balls are kept for the barrier: s_k can fall to at
most s_k(x0) - 2 gamma min(r, s_k(x0)); for s_k >= dhat / (1 - 2 gamma) that stays >= dhat.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from solver_server.ipc.contact.broad_phase import find_candidates
from solver_server.ipc.contact.pairs import contact_distances, pair_set

GAMMA = 0.4  # fraction of the clearance a vertex may use between detections (< 1/2)


@dataclass
class Detection:
    """Balls and the barrier's pair list at one detection point."""

    center: np.ndarray     # (n, 3) m, positions at detection
    radius: np.ndarray     # (n,) m, inf for vertices on no collision primitive
    ids: np.ndarray        # (K, 4) int32 pairs that can become active inside the balls
    is_ee: np.ndarray      # (K,) uint8
    off: np.ndarray        # (K,) m, summed contact offsets
    epsx: np.ndarray       # (K,) m^4, edge-edge mollifier thresholds
    min_distance: float    # m, smallest contact distance among the candidates (inf if none)
    candidates: int        # pairs examined


@njit(cache=True, fastmath=False)
def _vertex_min(ids, s, smin):
    for k in range(ids.shape[0]):
        for i in range(4):
            v = ids[k, i]
            if s[k] < smin[v]:
                smin[v] = s[k]


def detect(x: np.ndarray, mesh, r_query: float, dhat: float, on_surface: np.ndarray,
           gamma: float = GAMMA) -> Detection:
    """Candidates within r_query (m) at x, the per-vertex balls and the barrier pair list.

    Raises RuntimeError if some pair already has s <= 0: the invariant was broken upstream."""
    if not 0.0 < gamma < 0.5:
        raise ValueError("gamma must be in (0, 1/2)")
    r_query = max(float(r_query), dhat / (1.0 - 2.0 * gamma))
    x = np.ascontiguousarray(x, np.float64)
    cands = find_candidates(x, mesh, r_query)
    ps = pair_set(cands, mesh, x)
    smin = np.where(on_surface, r_query, np.inf)
    if len(ps):
        s = contact_distances(x, ps.ids, ps.is_ee, ps.off)
        if not (s > 0.0).all():
            raise RuntimeError(f"contact distance {float(s.min()):.3g} m <= 0 at a detection point")
        _vertex_min(ps.ids, s, smin)
        keep = s < dhat / (1.0 - 2.0 * gamma)
        smallest = float(s.min())
        ids, is_ee, off, epsx = ps.ids[keep], ps.is_ee[keep], ps.off[keep], ps.epsx[keep]
    else:
        smallest = float("inf")
        ids, is_ee = np.zeros((0, 4), np.int32), np.zeros(0, np.uint8)
        off, epsx = np.zeros(0), np.zeros(0)
    return Detection(x.copy(), gamma * smin, np.ascontiguousarray(ids), np.ascontiguousarray(is_ee),
                     np.ascontiguousarray(off), np.ascontiguousarray(epsx), smallest, len(ps))
