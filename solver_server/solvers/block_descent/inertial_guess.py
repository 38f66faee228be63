"""The start of a block-descent step: each free vertex as far along its inertial move as CCD allows.

A step minimises inertia + elasticity + contact; its inertia target y = x^n + h v^n + h^2 g is the
exact answer for free flight, and close to it wherever the cloth swings or falls. The sweeps can
only move a vertex inside its ball of radius gamma r around the last detection point (bounds.py),
and on cloth r is capped near half an edge (the sheet's own in-plane neighbours lie at 0.7 edge
lengths), so a sweep-only start moves falling cloth by ~0.2 edge lengths per detection: cloth at
1-3 m/s needs 5-10 detections per step, and with fewer it lags, which reads as heavy damping
(64^2 drape: median speed 0.28 m/s at frame 8 where Newton gives ~1 m/s).

Here instead every free vertex i moves along the straight path x^n_i + tau t_i (y_i - x^n_i),
tau in [0, 1], with per-vertex fractions t_i in [0, 1] chosen by additive CCD (ipc/contact/ccd.py,
"Filter Line Search" in the book, per vertex instead of one global step): every pair of primitives
whose swept boxes meet is checked along those paths, and a pair that would lose more than 1 - ETA
of its contact distance cuts the fractions of its four vertices to its time of impact (later
passes: to 0). Changing some fractions changes the paths of the pairs around them, so the check
runs again until one pass finds no impact; all fractions 0 (x^n itself, intersection free) always
passes, so the loop ends, and what it returns is intersection free (a pair whose swept boxes do not
meet cannot touch), with the contact distance of every pair whose boxes meet at least ETA times its
value at x^n. One broad phase serves all passes: a fraction only shortens a vertex's segment, so the
first pass's candidates (whole moves) hold every pair whose boxes meet later; a later pass re-tests
the boxes of the pairs with a changed vertex and skips the others, whose paths (and so their result,
no impact) are those of the last pass. Tets must keep VOLUME_KEEP of their volume
(sweep.py's rule), else their vertices stay too. The step's first detection then starts from this
point, and the balls only have to hold the corrections the elastic and contact forces make.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import numba
from numba import njit, prange

from solver_server.contact.broad_phase import overlapping_box_pairs, element_boxes
from solver_server.contact.ccd import accd_pair, gather_motion, pair_of
from .bounds import VOLUME_KEEP
from .vertex_elastic import tet_volume_moving

ETA = 0.5          # a pair keeps at least this fraction of its contact distance along the guessed move
SHRINK = 0.9       # first passes: a cut vertex keeps this fraction of its pair's time of impact
SCALED_PASSES = 2  # passes that shrink fractions; later ones stop the cut vertices outright
ADAPTIVE = True    # predicted_positions scales gravity by each vertex's last acceleration (False: the whole of y)
MAX_PASSES = 12    # then every vertex still cut is stopped and the last check always passes


@njit(cache=True, fastmath=False)
def _list_tois_range(k0, k1, x, p, pairs, mode, faces, edges, vertex_offset, face_offset, edge_offset, eta,
                     changed, tv):
    """_list_tois for pairs k0..k1-1 into tv (n,); returns the number of impacts."""
    X0 = np.empty(12)
    P = np.empty(12)
    ids = np.empty(4, dtype=np.int64)
    hits = 0
    for k in range(k0, k1):
        q, t = pairs[k, 0], pairs[k, 1]
        off = pair_of(mode, q, t, faces, edges, vertex_offset, face_offset, edge_offset, ids)
        if not (changed[ids[0]] or changed[ids[1]] or changed[ids[2]] or changed[ids[3]]):
            continue
        if not gather_motion(x, p, ids, X0, P):
            continue
        # the pair's swept boxes at the current fractions must still meet (the broad phase's test)
        na = 1 if mode == 0 else 2
        pa = vertex_offset[q] if mode == 0 else edge_offset[q]
        pb = face_offset[t] if mode == 0 else edge_offset[t]
        meet = True
        for a in range(3):
            alo = np.inf
            ahi = -np.inf
            blo = np.inf
            bhi = -np.inf
            for i in range(4):
                u0 = X0[3 * i + a]
                u1 = u0 + P[3 * i + a]
                if i < na:
                    alo = min(alo, u0, u1)
                    ahi = max(ahi, u0, u1)
                else:
                    blo = min(blo, u0, u1)
                    bhi = max(bhi, u0, u1)
            if not (alo - pa <= bhi + pb and blo - pb <= ahi + pa):
                meet = False
        if not meet:
            continue
        toi = accd_pair(X0, P, mode == 1, off, eta, 1.0, 1_000_000)
        if toi < 1.0:
            hits += 1
            for i in range(4):
                if toi < tv[ids[i]]:
                    tv[ids[i]] = toi
    return hits


@njit(cache=True, fastmath=False, parallel=True)
def _list_tois(x, p, pairs, mode, faces, edges, vertex_offset, face_offset, edge_offset, eta, changed, tv,
               n_threads):
    """For every stored broad-phase pair (rows (query, target), mode 0: vertex-face, 1: edge-edge)
    with a vertex marked ``changed`` whose swept boxes at the current paths meet, the ACCD time of impact of x + tau p, tau in [0, 1];
    tv[v] = min(tv[v], toi) for the pair's four vertices when toi < 1. Returns the number of such
    pairs. The pairs are split in chunks, each with its own copy of tv (a min-reduction, no races;
    n_threads is numba.get_num_threads() of the caller: read inside, it would keep the kernel out
    of the cache)."""
    m = pairs.shape[0]
    if m == 0:
        return 0
    nch = max(1, min(m, 4 * n_threads))
    n = tv.shape[0]
    tvl = np.ones((nch, n))
    hits = np.zeros(nch, dtype=np.int64)
    for ch in prange(nch):
        hits[ch] = _list_tois_range(ch * m // nch, (ch + 1) * m // nch, x, p, pairs, mode, faces, edges,
                                    vertex_offset, face_offset, edge_offset, eta, changed, tvl[ch])
    total = 0
    for ch in range(nch):
        total += hits[ch]      # not hits.sum(): a parallel reduction in this kernel (exact for integers, but
        for v in range(n):     # kernels here total on the calling thread: threads.ordered_sum)
            if tvl[ch, v] < tv[v]:
                tv[v] = tvl[ch, v]
    return total


@njit(cache=True, fastmath=False)
def _tet_cuts(x0, x1, tets, tv):
    """tv = 0 at the vertices of every tet that keeps less than VOLUME_KEEP of its volume at x1.
    Returns the number of such tets."""
    bad = 0
    for e in range(tets.shape[0]):
        V0 = tet_volume_moving(x0, tets[e], 0, x0[tets[e, 0]])
        V1 = tet_volume_moving(x1, tets[e], 0, x1[tets[e, 0]])
        if V1 < VOLUME_KEEP * V0:
            bad += 1
            for i in range(4):
                tv[tets[e, i]] = 0.0
    return bad


def predicted_positions(x: np.ndarray, v: np.ndarray, v_prev, h: float, gravity: np.ndarray,
                        free: np.ndarray) -> np.ndarray:
    """Where each free vertex is predicted to be after a step of h seconds, x + h v + h^2 f_i g,
    with the adaptive initialisation of Vertex Block Descent (Chen et al. 2024): f_i is the
    vertex's last acceleration along gravity as a fraction of |g|, ((v - v_prev)_i . g_hat / h) / |g|
    clamped to [0, 1]. A vertex in free fall gets the whole inertia target y = x + h v + h^2 g; a vertex held
    up (hanging, resting) gets x + h v. Starting held cloth at y would ask the sweeps to pull it back
    up by h^2 |g| each step, and what a fixed sweep budget leaves of that is extra stretch.
    No previous velocities (v_prev None, the first step): the whole of y."""
    gn = float(np.linalg.norm(gravity))
    y = x + h * v
    if gn == 0.0:
        return np.where(free[:, None], y, x)
    if v_prev is None or not ADAPTIVE:
        f = np.ones(len(x))
    else:
        f = np.clip(((v - v_prev) @ (gravity / gn)) / (h * gn), 0.0, 1.0)
    return np.where(free[:, None], y + (h * h) * f[:, None] * gravity, x)


def inertial_guess(x: np.ndarray, y: np.ndarray, free: np.ndarray, mesh, tets: np.ndarray,
                   eta: float = ETA) -> Tuple[np.ndarray, int, int]:
    """Start point of a step: x (n, 3) m, intersection free, moved towards the inertia target y
    (n, 3) m by per-vertex fractions (module docstring); only vertices with ``free`` move.

    Returns (positions, passes, vertices not given their whole move)."""
    x = np.ascontiguousarray(x, np.float64)
    w = np.where(free[:, None], y - x, 0.0)
    t = np.ones(len(x))
    m = mesh
    verts = np.arange(m.n_verts, dtype=np.int32).reshape(-1, 1)
    # the candidates of the first pass (swept boxes of the whole moves) hold every pair of the later
    # passes: a fraction only shortens each vertex's segment, so its swept box shrinks inside the first
    x1 = x + w
    vlo, vhi = element_boxes(x, x1, verts, m.vertex_offset)
    flo, fhi = element_boxes(x, x1, m.faces, m.face_offset)
    elo, ehi = element_boxes(x, x1, m.edges, m.edge_offset)
    filt = (m.faces, m.edges, m.vertex_body, m.self_contact, m.body_static)
    pt = overlapping_box_pairs(vlo, vhi, flo, fhi, 0, *filt)
    ee = overlapping_box_pairs(elo, ehi, elo, ehi, 1, *filt)
    args = (m.faces, m.edges, m.vertex_offset, m.face_offset, m.edge_offset, float(eta))
    changed = np.ones(len(x), bool)
    for k in range(MAX_PASSES + 1):
        p = np.ascontiguousarray(t[:, None] * w)
        x1 = x + p
        tv = np.ones(len(x))
        nt = numba.get_num_threads()
        # a pair none of whose vertices changed its fraction has the path it had in the last pass,
        # where it hit nothing (a hit shortens every moving vertex of the pair): only the others are checked again
        hits = _list_tois(x, p, pt, 0, *args, changed, tv, nt)
        hits += _list_tois(x, p, ee, 1, *args, changed, tv, nt)
        hits += _tet_cuts(x, x1, tets, tv)
        if hits == 0:
            return x1, k + 1, int((t < 1.0).sum())
        if k < SCALED_PASSES:
            t_new = np.where(tv < 1.0, t * SHRINK * tv, t)
        elif k < MAX_PASSES - 1:
            t_new = np.where(tv < 1.0, 0.0, t)
        else:
            t_new = np.zeros_like(t)   # never reached in practice; x itself is intersection free
        changed = t_new != t
        t = t_new
    return x.copy(), MAX_PASSES + 1, int(free.sum())
