"""Which contact pairs touch which affine body, and which bodies may be updated at the same time.

The body pass of the block-descent sweep (affine_block.py) updates each free affine body on its 12
DOFs with every other DOF held. Two bodies can take their steps concurrently (Jacobi, on numba's
threads) exactly when their objectives E_b are separable, i.e. when no term couples them:
- the inertia and orthogonality terms are per body;
- a barrier or friction pair couples the bodies of its (up to 4) vertices. Free vertices (cloth,
  solids, rods) and colliders are held fixed during the body pass, so a body and a cloth vertex, or
  two bodies touching the same cloth vertex, are no coupling;
- the displacement bounds (bounds.py) are per vertex, fixed at the last detection and independent
  of where any other vertex is, so admissibility never couples two bodies.
So the bodies are coloured greedily on the graph "two free bodies share a barrier or friction pair";
the bodies of one colour have separable objectives and disjoint rows and vertices, and updating them
in parallel gives exactly the result of updating them one after the other.

Built once per body pass from the current pair lists (O(pairs + bodies), no Python).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


class BodyPairs(NamedTuple):
    """The barrier and friction pairs touching each affine body (the BL argument; body_pairs).

    bp_start  (nb + 1,) int64   body -> barrier pair CSR start
    bp_pair   (k,) int32        barrier pairs (rows of the ContactPack's ids) of each body
    bf_start  (nb + 1,) int64   body -> friction pair CSR start
    bf_pair   (m,) int32        friction pairs (rows of the FrictionPack's ids) of each body
    """

    bp_start: np.ndarray
    bp_pair: np.ndarray
    bf_start: np.ndarray
    bf_pair: np.ndarray


@njit(cache=True, fastmath=False)
def _pair_bodies(ids, k, vbody, out):
    """Distinct bodies (>= 0) among the vertices of pair k into out (4,); returns their count."""
    n = 0
    for i in range(4):
        b = vbody[ids[k, i]]
        if b < 0:
            continue
        new = True
        for j in range(n):
            if out[j] == b:
                new = False
        if new:
            out[n] = b
            n += 1
    return n


@njit(cache=True, fastmath=False)
def body_pair_lists(ids, vbody, nbod):
    """CSR (start (nbod + 1,), pairs) of the pairs (rows of ids (P, 4)) touching each body; a pair
    touching two bodies is listed under both, once each."""
    cnt = np.zeros(nbod + 1, np.int64)
    bs = np.empty(4, np.int64)
    for k in range(ids.shape[0]):
        n = _pair_bodies(ids, k, vbody, bs)
        for j in range(n):
            cnt[bs[j] + 1] += 1
    for b in range(nbod):
        cnt[b + 1] += cnt[b]
    fill = cnt[:nbod].copy()
    out = np.empty(cnt[nbod], np.int32)
    for k in range(ids.shape[0]):
        n = _pair_bodies(ids, k, vbody, bs)
        for j in range(n):
            out[fill[bs[j]]] = k
            fill[bs[j]] += 1
    return cnt, out


@njit(cache=True, fastmath=False)
def body_pairs(pids, fids, vbody, nbod):
    """BodyPairs of the barrier pairs pids (K, 4) and friction pairs fids (M, 4) over nbod bodies."""
    bp_s, bp_k = body_pair_lists(pids, vbody, nbod)
    bf_s, bf_k = body_pair_lists(fids, vbody, nbod)
    return BodyPairs(bp_s, bp_k, bf_s, bf_k)


@njit(cache=True, fastmath=False)
def _coupling_edges(ids, vbody, presc, keys, nk, nbod):
    bs = np.empty(4, np.int64)
    for k in range(ids.shape[0]):
        n = _pair_bodies(ids, k, vbody, bs)
        if n < 2:
            continue
        for i in range(n):
            for j in range(n):
                if i != j and not presc[bs[i]] and not presc[bs[j]]:
                    keys[nk] = bs[i] * nbod + bs[j]
                    nk += 1
    return nk


@njit(cache=True, fastmath=False)
def coupling_keys(pids, fids, vbody, presc, nbod):
    """Sorted unique b * nbod + c (both directions) for every two free bodies b != c that share a
    barrier (pids) or friction (fids) pair: the body graph, each body's neighbours contiguous."""
    keys = np.empty(12 * (pids.shape[0] + fids.shape[0]) + 1, np.int64)
    nk = _coupling_edges(pids, vbody, presc, keys, 0, nbod)
    nk = _coupling_edges(fids, vbody, presc, keys, nk, nbod)
    return np.unique(keys[:nk])


@njit(cache=True, fastmath=False)
def body_colors(pids, fids, vbody, presc, nbod):
    """Greedy colouring of the free bodies (presc False) on the graph of shared barrier (pids) or
    friction (fids) pairs. Returns CSR (start (ncol + 1,), bodies): the bodies of colour c are
    bodies[start[c]:start[c + 1]]; no two of them share a pair."""
    keys = coupling_keys(pids, fids, vbody, presc, nbod)
    nbr_s = np.zeros(nbod + 1, np.int64)
    for e in range(keys.shape[0]):
        nbr_s[keys[e] // nbod + 1] += 1
    for b in range(nbod):
        nbr_s[b + 1] += nbr_s[b]
    color = -np.ones(nbod, np.int64)
    used = np.zeros(nbod + 1, np.int64)      # used[c] == b + 1: colour c is taken by a neighbour of b
    ncol = 0
    for b in range(nbod):
        if presc[b]:
            continue
        for e in range(nbr_s[b], nbr_s[b + 1]):
            c = color[keys[e] % nbod]
            if c >= 0:
                used[c] = b + 1
        c = 0
        while used[c] == b + 1:
            c += 1
        color[b] = c
        ncol = max(ncol, c + 1)
    start = np.zeros(ncol + 1, np.int64)
    for b in range(nbod):
        if color[b] >= 0:
            start[color[b] + 1] += 1
    for c in range(ncol):
        start[c + 1] += start[c]
    fill = start[:ncol].copy()
    bodies = np.empty(start[ncol], np.int64)
    for b in range(nbod):
        c = color[b]
        if c >= 0:
            bodies[fill[c]] = b
            fill[c] += 1
    return start, bodies
