"""Inside/outside classification of lattice points against a closed triangle mesh, by ray parity
along +z columns (vectorised in numba).

For every (x, y) column the upward ray crosses the mesh at a sorted list of heights; a lattice point
(x, y, z0 + k dz) is inside when an odd number of crossings lie below it. One pass costs
columns x triangles instead of points x triangles, which is what makes sampling 10^6 particles and
signing a collider's distance field every frame affordable. Columns are nudged by a tiny irrational
offset so that rays do not pass exactly through mesh edges or vertices.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

_NUDGE_X = 1.0e-7 * 0.7548776662466927
_NUDGE_Y = 1.0e-7 * 0.5698402909980532


def is_closed(triangles: np.ndarray) -> tuple:
    """(closed, n_boundary_edges): a mesh is closed when every undirected edge is shared by an even
    number (normally two) of triangles."""
    t = np.asarray(triangles, np.int64)
    e = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
    e.sort(axis=1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    odd = int(np.count_nonzero(counts % 2))
    return odd == 0, odd


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _column_crossing(V, T, t, px, py):
    """(hit, z): whether the vertical line through (px, py) crosses triangle t of (V, T), and the
    height z (m) of the crossing, from the signed areas of the sub-triangles seen from the column."""
    a = T[t, 0]
    b = T[t, 1]
    d = T[t, 2]
    ax = V[a, 0] - px
    ay = V[a, 1] - py
    bx = V[b, 0] - px
    by = V[b, 1] - py
    dx_ = V[d, 0] - px
    dy_ = V[d, 1] - py
    if (ax > 0 and bx > 0 and dx_ > 0) or (ax < 0 and bx < 0 and dx_ < 0):
        return False, 0.0
    if (ay > 0 and by > 0 and dy_ > 0) or (ay < 0 and by < 0 and dy_ < 0):
        return False, 0.0
    wa = bx * dy_ - by * dx_
    wb = dx_ * ay - dy_ * ax
    wd = ax * by - ay * bx
    if not ((wa >= 0 and wb >= 0 and wd >= 0) or (wa <= 0 and wb <= 0 and wd <= 0)):
        return False, 0.0
    s = wa + wb + wd
    if s == 0.0:
        return False, 0.0
    return True, (wa * V[a, 2] + wb * V[b, 2] + wd * V[d, 2]) / s


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def inside_columns(V, T, cx, cy, z0, dz, nz, scale):
    """inside (m, nz) bool for lattice points (cx[c], cy[c], z0 + k dz). V (n, 3) float64 vertices,
    T (t, 3) int32 triangles, scale (m) sizes the nudge."""
    m = cx.shape[0]
    out = np.zeros((m, nz), np.bool_)
    nt = T.shape[0]
    for c in prange(m):
        px = cx[c] + _NUDGE_X * scale
        py = cy[c] + _NUDGE_Y * scale
        hits = np.empty(16)
        nh = 0
        for t in range(nt):
            hit, z = _column_crossing(V, T, t, px, py)
            if not hit:
                continue
            if nh == hits.shape[0]:
                grown = np.empty(2 * nh)
                grown[:nh] = hits
                hits = grown
            hits[nh] = z
            nh += 1
        if nh == 0:
            continue
        hs = np.sort(hits[:nh])
        h = 0
        for k in range(nz):
            z = z0 + k * dz
            while h < nh and hs[h] < z:
                h += 1
            out[c, k] = (h % 2) == 1
    return out


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def inside_points(V, T, P, scale):
    """inside (m,) bool for arbitrary points P (m, 3) m, by the same nudged +z ray parity as
    ``inside_columns`` (one column per point, crossings counted below the point)."""
    m = P.shape[0]
    out = np.zeros(m, np.bool_)
    nt = T.shape[0]
    for q in prange(m):
        px = P[q, 0] + _NUDGE_X * scale
        py = P[q, 1] + _NUDGE_Y * scale
        pz = P[q, 2]
        below = 0
        for t in range(nt):
            hit, z = _column_crossing(V, T, t, px, py)
            if not hit:
                continue
            if z < pz:
                below += 1
        out[q] = (below % 2) == 1
    return out
