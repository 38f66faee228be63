"""Vertex -> element incidence lists and the vertex colouring of block descent.

A per-vertex step needs, for its vertex, every element that touches it and the vertex's slot in
that element: one CSR per element group (start (n+1,), elem (k,), slot (k,)). Two vertices that
share an element must not be updated at the same time (their local problems are coupled), so the
vertices are coloured greedily on the graph "shares an element"; one colour is swept in parallel.
Contact pairs couple vertices too, but they change every detection, so they are not coloured:
within a colour a vertex reads the others' positions from before the colour's sweep (Jacobi in
the colour), which keeps the result deterministic and is safe because of the displacement bounds.
"""
from __future__ import annotations

from typing import List, NamedTuple, Tuple

import numpy as np
from numba import njit


def incidence(elems: np.ndarray, n_verts: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR of elements (E, k) by vertex: (start (n+1,) int64, elem (E*k,) int32, slot (E*k,) int32);
    the elements of vertex v are elem[start[v]:start[v+1]], v being their vertex number slot, in
    increasing element order. A counting sort in numba: the stepper builds one for the barrier pairs
    at every contact detection (~20 a frame), where numpy's argsort and add.at took ~2 ms each."""
    elems = np.asarray(elems)
    if elems.ndim != 2:
        elems = elems.reshape(len(elems), -1) if len(elems) else np.zeros((0, 1), np.int64)
    return _incidence(np.ascontiguousarray(elems, np.int64), int(n_verts))


@njit(cache=True, fastmath=False)
def _incidence(elems, n_verts):
    E, k = elems.shape
    start = np.zeros(n_verts + 1, np.int64)
    for e in range(E):
        for j in range(k):
            start[elems[e, j] + 1] += 1
    for v in range(n_verts):
        start[v + 1] += start[v]
    fill = start[:-1].copy()
    elem = np.empty(E * k, np.int32)
    slot = np.empty(E * k, np.int32)
    for e in range(E):
        for j in range(k):
            v = elems[e, j]
            elem[fill[v]] = e
            slot[fill[v]] = j
            fill[v] += 1
    return start, elem, slot


@njit(cache=True, fastmath=False)
def _greedy(start, nbr, n):
    color = -np.ones(n, np.int32)
    used = -np.ones(n + 1, np.int64)  # used[c] == v: colour c taken by a neighbour of v
    for v in range(n):
        for j in range(start[v], start[v + 1]):
            c = color[nbr[j]]
            if c >= 0:
                used[c] = v
        c = 0
        while used[c] == v:
            c += 1
        color[v] = c
    return color


def vertex_colors(groups: List[np.ndarray], n_verts: int) -> np.ndarray:
    """Greedy colouring (n,) int32 such that no two vertices of one element share a colour."""
    rows, cols = [], []
    for el in groups:
        el = np.asarray(el, np.int64)
        if not len(el):
            continue
        k = el.shape[1]
        for a in range(k):
            for b in range(k):
                if a != b:
                    rows.append(el[:, a])
                    cols.append(el[:, b])
    if not rows:
        return np.zeros(n_verts, np.int32)
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    key = np.unique(r * n_verts + c)
    r, c = key // n_verts, key % n_verts
    start = np.zeros(n_verts + 1, np.int64)
    np.add.at(start, r + 1, 1)
    start = np.cumsum(start)
    return _greedy(start, c.astype(np.int64), n_verts)


def color_lists(color: np.ndarray) -> List[np.ndarray]:
    """The vertices (int32) of each colour, in colour order (empty colours dropped)."""
    out = [np.nonzero(color == c)[0].astype(np.int32) for c in range(int(color.max()) + 1 if len(color) else 0)]
    return [o for o in out if len(o)]


class Elements(NamedTuple):
    """Every elastic group of an ElasticTerms (energies/elasticity.py) as contiguous arrays, each group
    followed by its vertex incidence CSR (incidence()): the EL argument of the per-vertex kernels
    (sweep.elastic_vertex). Per group of E elements: the elements of vertex v are
    <g>_elem[<g>_start[v]:<g>_start[v + 1]] (int32), v being vertex number <g>_slot[j] (int32) of each;
    <g>_start is (n + 1,) int64.

    Membranes (T triangles, cloth and shells in plane):
    tris         (T, 3) int32      vertex indices
    tri_Dm_inv   (T, 2, 2) float64 1/m, inverse rest shape matrices
    tri_w        (T,) float64      m^3, rest area x thickness
    tri_mu       (T,) float64      Pa, Lame mu
    tri_lam      (T,) float64      Pa, Lame lambda
    tri_start, tri_elem, tri_slot  vertex -> triangle CSR
    Cloth bending stencils (S stencils, shell_bending.py):
    shells       (S, 6) int32      (v0, v1, v2, f0, f1, f2): a triangle and its three flap vertices
    shell_K      (S, 3, 3) float64 J, stiffness of the three hinge angles
    shell_th0    (S, 3) float64    rad, rest dihedral angles
    shell_start, shell_elem, shell_slot  vertex -> stencil CSR
    Tetrahedra (E tets):
    tets         (E, 4) int32      vertex indices
    tet_Dm_inv   (E, 3, 3) float64 1/m, inverse rest shape matrices
    tet_vol      (E,) float64      m^3, rest volumes
    tet_mu       (E,) float64      Pa, Lame mu
    tet_lam      (E,) float64      Pa, Lame lambda
    tet_model    (E,) int32        material model code (energies/isotropic_models.py)
    tet_start, tet_elem, tet_slot  vertex -> tet CSR
    Rod stretch (R edges):
    rods         (R, 2) int32      vertex indices
    rod_rest     (R,) float64      m, rest lengths
    rod_k        (R,) float64      N, stretch stiffness (E A)
    rod_start, rod_elem, rod_slot  vertex -> rod edge CSR
    Rod bending (B hinges):
    bends        (B, 3) int32      vertex indices (the middle one is the hinge)
    bend_kw      (B,) float64      J, k w: bending stiffness (N m^2) x hinge weight 1 / l_bar (bending.py)
    bend_d0      (B,) float64      rest |d| = |t_2 - t_1| of the unit tangents (dimensionless)
    bend_start, bend_elem, bend_slot  vertex -> rod hinge CSR
    """

    tris: np.ndarray
    tri_Dm_inv: np.ndarray
    tri_w: np.ndarray
    tri_mu: np.ndarray
    tri_lam: np.ndarray
    tri_start: np.ndarray
    tri_elem: np.ndarray
    tri_slot: np.ndarray
    shells: np.ndarray
    shell_K: np.ndarray
    shell_th0: np.ndarray
    shell_start: np.ndarray
    shell_elem: np.ndarray
    shell_slot: np.ndarray
    tets: np.ndarray
    tet_Dm_inv: np.ndarray
    tet_vol: np.ndarray
    tet_mu: np.ndarray
    tet_lam: np.ndarray
    tet_model: np.ndarray
    tet_start: np.ndarray
    tet_elem: np.ndarray
    tet_slot: np.ndarray
    rods: np.ndarray
    rod_rest: np.ndarray
    rod_k: np.ndarray
    rod_start: np.ndarray
    rod_elem: np.ndarray
    rod_slot: np.ndarray
    bends: np.ndarray
    bend_kw: np.ndarray
    bend_d0: np.ndarray
    bend_start: np.ndarray
    bend_elem: np.ndarray
    bend_slot: np.ndarray


def elements(el, n_verts: int) -> Elements:
    """The Elements pack of an ElasticTerms on n_verts vertices."""
    f64 = lambda a: np.ascontiguousarray(a, np.float64)  # noqa: E731
    i32 = lambda a: np.ascontiguousarray(a, np.int32)  # noqa: E731
    return Elements(i32(el.tris), f64(el.tri_Dm_inv), f64(el.tri_area * el.tri_thick), f64(el.tri_mu),
                    f64(el.tri_lam), *incidence(el.tris, n_verts),
                    i32(el.shells), f64(el.shell_K), f64(el.shell_th0), *incidence(el.shells, n_verts),
                    i32(el.tets), f64(el.tet_Dm_inv), f64(el.tet_vol), f64(el.tet_mu), f64(el.tet_lam),
                    i32(el.tet_model), *incidence(el.tets, n_verts),
                    i32(el.rod_edges), f64(el.rod_rest), f64(el.rod_k), *incidence(el.rod_edges, n_verts),
                    i32(el.rod_bends), f64(el.rod_kw), f64(el.rod_d0), *incidence(el.rod_bends, n_verts))


def color_arrays(el, n_verts: int) -> Tuple[np.ndarray, np.ndarray]:
    """Vertex colouring of an ElasticTerms as CSR: (start (n_colors+1,) int64, vertices int32)."""
    cols = color_lists(vertex_colors([el.tets, el.tris, el.shells, el.rod_edges, el.rod_bends], n_verts))
    start = np.zeros(len(cols) + 1, np.int64)
    start[1:] = np.cumsum([len(c) for c in cols])
    verts = np.concatenate(cols).astype(np.int32) if cols else np.zeros(0, np.int32)
    return start, verts
