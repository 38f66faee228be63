"""Dihedral angles of the cloth-bending stencils, cached across one block-descent sweep.

The cloth bending energy (ipc/shell_bending.py, "Cloth bending" in docs/solver.md) is a sum over
triangles of 1/2 (theta - theta0)^T K (theta - theta0), theta the signed dihedral angles at the
triangle's three edges. A vertex's Newton step needs, for each of the ~12 stencils it belongs to,
all three angles and the gradients of those that involve it; computed on the fly that is ~36
dihedral evaluations (an atan2 and three square roots each) per vertex visit, 90% of a cloth
sweep. But an angle only changes when one of its four vertices moves, and in a sweep a vertex
moves once, in its colour; the four vertices of a dihedral belong to one stencil and so have
four different colours. So each angle (with its gradient) is stored once per interior edge and
recomputed after each colour for the edges of the vertices that colour moved: 4 evaluations
per edge per sweep (~12 per vertex) instead of ~36, with bit-identical results.

An interior edge appears in the stencils of both its triangles: (o, p, q, f) from one side,
(f, q, p, o) from the other, and the signed angle is the same function of the four positions
(n_T and n_F swap, so does the edge direction). The table stores it once, in the first side's
order; the other side reads the gradient of its part k at 3 - k. Stencil slots whose mirror is
not found (inconsistently oriented neighbours) keep an entry of their own.
"""
from __future__ import annotations

from typing import NamedTuple, Tuple

import numpy as np
from numba import njit, prange

from solver_server.energies.shell_bending import dihedral_angle_grad
from .incidence import incidence
from .vertex_elastic import add_sym3


def dihedral_table(shells: np.ndarray, n_verts: int) -> Tuple[np.ndarray, ...]:
    """Unique dihedrals of the stencils shells (T, 6) = (v0, v1, v2, f0, f1, f2).

    Returns slot_edge (T, 3) int32 (the dihedral of slot j, -1 where the edge has no flap),
    slot_flip (T, 3) uint8 (1: the slot sees the stored dihedral from the other side), quad (E, 4)
    int32 (o, p, q, f) of each dihedral, and the vertex -> dihedral CSR (start (n+1,) int64, edge int32)."""
    s = np.asarray(shells, np.int64).reshape(-1, 6)
    T = len(s)
    slot_edge = -np.ones((T, 3), np.int32)
    slot_flip = np.zeros((T, 3), np.uint8)
    if T == 0:
        z = np.zeros((0, 4), np.int32)
        st, e = incidence(z, n_verts)[:2]
        return slot_edge, slot_flip, z, st, e
    tri = np.repeat(np.arange(T), 3)
    j = np.tile(np.arange(3), T)
    o, p, q, f = s[tri, j], s[tri, (j + 1) % 3], s[tri, (j + 2) % 3], s[tri, 3 + j]
    present = f != o
    tri, j, o, p, q, f = tri[present], j[present], o[present], p[present], q[present], f[present]
    cols = (np.minimum(p, q), np.maximum(p, q), np.minimum(o, f), np.maximum(o, f))
    order = np.lexsort(cols[::-1])                    # by edge, then by the flap pair (no overflow)
    ks = np.stack([c[order] for c in cols], 1)
    first = np.r_[True, (ks[1:] != ks[:-1]).any(1)]
    group = np.cumsum(first) - 1                      # candidate dihedral of each sorted slot
    lead = order[first][group]                        # the group's first slot (in sorted order)
    mirror = (o[order] == f[lead]) & (f[order] == o[lead]) & (p[order] == q[lead]) & (q[order] == p[lead])
    # a slot shares its group's entry if it is the first one or its exact mirror; anything else
    # (a second slot seen from the same side) gets an entry of its own
    own = first | ~mirror
    entry = np.cumsum(own) - 1
    # non-first slots that are mirrors take the entry of their group's first slot
    first_entry = entry[first][group]
    idx = np.where(own, entry, first_entry)
    flip = (~own).astype(np.uint8)
    slot_edge[tri[order], j[order]] = idx.astype(np.int32)
    slot_flip[tri[order], j[order]] = flip
    E = int(own.sum())
    quad = np.empty((E, 4), np.int64)
    so = order[own]
    quad[:, 0], quad[:, 1], quad[:, 2], quad[:, 3] = o[so], p[so], q[so], f[so]
    start, edge, _ = incidence(quad, n_verts)
    return slot_edge, slot_flip, np.ascontiguousarray(quad, np.int32), start, edge


class DihedralCache(NamedTuple):
    """The stored dihedrals of a stepper's cloth-bending stencils (the SH argument of the sweep kernels):
    the table of dihedral_table and the angles / gradients, which the kernels keep current.

    slot_edge  (S, 3) int32          the dihedral of stencil slot j (-1: the edge has no flap)
    slot_flip  (S, 3) uint8          1: the slot sees the stored dihedral from the other side
    quad       (E, 4) int32          (o, p, q, f) vertices of each dihedral
    v_start    (n + 1,) int64        vertex -> dihedral CSR start
    v_edge     (k,) int32            the dihedrals of each vertex
    theta      (E,) float64          rad, signed dihedral angles at the last refresh
    grad       (E, 4, 3) float64     rad/m, their gradients w.r.t. (o, p, q, f)
    ok         (E,) float64          1.0 where the dihedral is not degenerate, else 0.0
    """

    slot_edge: np.ndarray
    slot_flip: np.ndarray
    quad: np.ndarray
    v_start: np.ndarray
    v_edge: np.ndarray
    theta: np.ndarray
    grad: np.ndarray
    ok: np.ndarray


def dihedral_cache(shells: np.ndarray, n_verts: int) -> DihedralCache:
    """An empty cache (angles zero: dihedrals_all fills them) for the stencils shells (S, 6)."""
    slot_edge, slot_flip, quad, v_start, v_edge = dihedral_table(shells, n_verts)
    ne = len(quad)
    return DihedralCache(slot_edge, slot_flip, quad, v_start, v_edge, np.zeros(ne), np.zeros((ne, 4, 3)), np.zeros(ne))


@njit(cache=True, fastmath=False)
def dihedrals_all(x, quad, th, gr, ok):
    """Every stored dihedral at x: angle th (E,) rad, gradient gr (E, 4, 3) rad/m w.r.t. (o, p, q, f),
    ok (E,) 1.0 where the dihedral is not degenerate."""
    for e in range(quad.shape[0]):
        t, good = dihedral_angle_grad(x, quad[e, 0], quad[e, 1], quad[e, 2], quad[e, 3], gr, e)
        th[e] = t
        ok[e] = 1.0 if good else 0.0


@njit(cache=True, fastmath=False, parallel=True)
def _refresh_parallel(x, verts, v_start, v_edge, quad, th, gr, ok):
    nv = verts.shape[0]
    nch = max(1, min(nv, 32))
    for ch in prange(nch):
        for jj in range(ch * nv // nch, (ch + 1) * nv // nch):
            v = verts[jj]
            for k in range(v_start[v], v_start[v + 1]):
                e = v_edge[k]
                t, good = dihedral_angle_grad(x, quad[e, 0], quad[e, 1], quad[e, 2], quad[e, 3], gr, e)
                th[e] = t
                ok[e] = 1.0 if good else 0.0


@njit(cache=True, fastmath=False)
def refresh_dihedrals(x, verts, v_start, v_edge, quad, th, gr, ok, parallel):
    """Recompute the dihedrals of the vertices verts (one colour: no dihedral holds two of them, so
    each is computed once and threads never write the same entry)."""
    if parallel:
        _refresh_parallel(x, verts, v_start, v_edge, quad, th, gr, ok)
        return
    for jj in range(verts.shape[0]):
        v = verts[jj]
        for k in range(v_start[v], v_start[v + 1]):
            e = v_edge[k]
            t, good = dihedral_angle_grad(x, quad[e, 0], quad[e, 1], quad[e, 2], quad[e, 3], gr, e)
            th[e] = t
            ok[e] = 1.0 if good else 0.0


@njit(cache=True, fastmath=False, inline="always")
def shell_vertex_cached(i, a, K, th0, slot_edge, slot_flip, th, gr, ok, g, H, ja):
    """shell_bending.shell_vertex of stencil i for its vertex in slot a (0..5), from the cached
    dihedrals: gradient (N) into g (3,), Gauss-Newton block J_a^T K J_a (N/m) into H; ja (3, 3) scratch.
    A flap vertex (a = 3 + j) is in hinge j only: its block is K_jj J_j J_j^T, one outer product
    (half a vertex's stencils are of this kind)."""
    d0 = 0.0
    d1 = 0.0
    d2 = 0.0
    p0 = False
    p1 = False
    p2 = False
    e = slot_edge[i, 0]
    if e >= 0 and ok[e] > 0.5:
        p0 = True
        d0 = th[e] - th0[0]
    e = slot_edge[i, 1]
    if e >= 0 and ok[e] > 0.5:
        p1 = True
        d1 = th[e] - th0[1]
    e = slot_edge[i, 2]
    if e >= 0 and ok[e] > 0.5:
        p2 = True
        d2 = th[e] - th0[2]
    if a >= 3:
        j = a - 3
        present = p0 if j == 0 else (p1 if j == 1 else p2)
        if not present:
            return
        rj = K[j, 0] * d0 + K[j, 1] * d1 + K[j, 2] * d2
        e = slot_edge[i, j]
        part = 0 if slot_flip[i, j] else 3
        kjj = K[j, j]
        j0, j1, j2 = gr[e, part, 0], gr[e, part, 1], gr[e, part, 2]
        g[0] += rj * j0
        g[1] += rj * j1
        g[2] += rj * j2
        add_sym3(H, kjj * j0 * j0, kjj * j1 * j1, kjj * j2 * j2, kjj * j0 * j1, kjj * j0 * j2, kjj * j1 * j2)
        return
    r0 = K[0, 0] * d0 + K[0, 1] * d1 + K[0, 2] * d2 if p0 else 0.0
    r1 = K[1, 0] * d0 + K[1, 1] * d1 + K[1, 2] * d2 if p1 else 0.0
    r2 = K[2, 0] * d0 + K[2, 1] * d1 + K[2, 2] * d2 if p2 else 0.0
    for j in range(3):
        present = p0 if j == 0 else (p1 if j == 1 else p2)
        if not present:
            for k in range(3):
                ja[j, k] = 0.0
            continue
        e = slot_edge[i, j]
        # slot a (< 3) is part (a - j) mod 3 of hinge j (v_j, v_j+1, v_j+2, f_j)
        part = (a - j) % 3
        if slot_flip[i, j]:
            part = 3 - part
        for k in range(3):
            ja[j, k] = gr[e, part, k]
    for k in range(3):
        g[k] += r0 * ja[0, k] + r1 * ja[1, k] + r2 * ja[2, k]
    # H += ja^T (K ja): K ja once (27 products), then the upper triangle
    kj00 = K[0, 0] * ja[0, 0] + K[0, 1] * ja[1, 0] + K[0, 2] * ja[2, 0]
    kj01 = K[0, 0] * ja[0, 1] + K[0, 1] * ja[1, 1] + K[0, 2] * ja[2, 1]
    kj02 = K[0, 0] * ja[0, 2] + K[0, 1] * ja[1, 2] + K[0, 2] * ja[2, 2]
    kj10 = K[1, 0] * ja[0, 0] + K[1, 1] * ja[1, 0] + K[1, 2] * ja[2, 0]
    kj11 = K[1, 0] * ja[0, 1] + K[1, 1] * ja[1, 1] + K[1, 2] * ja[2, 1]
    kj12 = K[1, 0] * ja[0, 2] + K[1, 1] * ja[1, 2] + K[1, 2] * ja[2, 2]
    kj20 = K[2, 0] * ja[0, 0] + K[2, 1] * ja[1, 0] + K[2, 2] * ja[2, 0]
    kj21 = K[2, 0] * ja[0, 1] + K[2, 1] * ja[1, 1] + K[2, 2] * ja[2, 1]
    kj22 = K[2, 0] * ja[0, 2] + K[2, 1] * ja[1, 2] + K[2, 2] * ja[2, 2]
    h00 = ja[0, 0] * kj00 + ja[1, 0] * kj10 + ja[2, 0] * kj20
    h11 = ja[0, 1] * kj01 + ja[1, 1] * kj11 + ja[2, 1] * kj21
    h22 = ja[0, 2] * kj02 + ja[1, 2] * kj12 + ja[2, 2] * kj22
    h01 = ja[0, 0] * kj01 + ja[1, 0] * kj11 + ja[2, 0] * kj21
    h02 = ja[0, 0] * kj02 + ja[1, 0] * kj12 + ja[2, 0] * kj22
    h12 = ja[0, 1] * kj02 + ja[1, 1] * kj12 + ja[2, 1] * kj22
    add_sym3(H, h00, h11, h22, h01, h02, h12)
