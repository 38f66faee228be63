"""Vertex -> element incidence and the vertex colouring of block descent (blockdescent/incidence.py):
every element appears exactly once in the list of each of its vertices, with that vertex's slot;
no two vertices of one element share a colour (so a colour can be swept in parallel); the colour
lists partition the vertices. Checked on the meshes the solver really builds (cloth triangles and
hinges, tetrahedralised cubes, rods) and on random element lists."""
import numpy as np
import pytest

from solver_server.solvers.block_descent.incidence import color_lists, incidence, vertex_colors
from solver_server.energies import bending
from solver_server.model.primitives import box, grid_sheet
from solver_server.model.tetmesh import tetrahedralize


def _check_incidence(elems, n):
    elems = np.asarray(elems, np.int64)
    start, elem, slot = incidence(elems, n)
    assert start.shape == (n + 1,) and start[0] == 0 and start[-1] == elems.size
    assert np.all(np.diff(start) >= 0)
    seen = np.zeros(elems.shape, int)
    for v in range(n):
        for j in range(start[v], start[v + 1]):
            e, a = elem[j], slot[j]
            assert elems[e, a] == v                      # the right slot
            seen[e, a] += 1
        # the list of v is exactly the set of elements containing v (with multiplicity of its slots)
        want = sorted((e, a) for e, a in zip(*np.nonzero(elems == v)))
        got = sorted(zip(elem[start[v]:start[v + 1]].tolist(), slot[start[v]:start[v + 1]].tolist()))
        assert got == want
    assert np.all(seen == 1)                             # every (element, slot) exactly once


def _check_colors(groups, n):
    color = vertex_colors([np.asarray(g) for g in groups], n)
    assert color.shape == (n,) and color.min() >= 0
    for g in groups:
        g = np.asarray(g)
        if not len(g):
            continue
        c = color[g]
        for a in range(g.shape[1]):
            for b in range(a + 1, g.shape[1]):
                assert np.all(c[:, a] != c[:, b]), "two vertices of one element share a colour"
    lists = color_lists(color)
    allv = np.sort(np.concatenate(lists)) if lists else np.zeros(0, int)
    assert np.array_equal(allv, np.arange(n))          # a partition of the vertices
    for lst in lists:
        assert len(np.unique(color[lst])) == 1
    # greedy bound: at most (max degree of the "shares an element" graph) + 1 colours
    nbr = [set() for _ in range(n)]
    for g in groups:
        for row in np.asarray(g):
            for a in row:
                nbr[a].update(int(b) for b in row if b != a)
    assert color.max() + 1 <= max((len(s) for s in nbr), default=0) + 1
    return color


def _cloth(q=6):
    V, T, E = grid_sheet((1.0, 1.0), (q, q))
    return V, T.astype(np.int64), bending.hinges(T).astype(np.int64)


def test_incidence_cloth_triangles_and_hinges():
    V, T, H = _cloth()
    _check_incidence(T, len(V))
    _check_incidence(H, len(V))


def test_incidence_tets_of_a_cube():
    V, F = box((0.2, 0.2, 0.2), divisions=2)
    mesh = tetrahedralize("cube", V, F, None)
    _check_incidence(mesh.tets, len(mesh.nodes))
    _check_colors([mesh.tets], len(mesh.nodes))


def test_incidence_handles_loose_vertices_and_empty_groups():
    elems = np.array([[0, 2], [2, 5]], np.int64)
    _check_incidence(elems, 8)                           # vertices 1, 3, 4, 6, 7 are in nothing
    start, elem, slot = incidence(np.zeros((0, 4), np.int64), 5)
    assert np.array_equal(start, np.zeros(6)) and len(elem) == 0 and len(slot) == 0


@pytest.mark.parametrize("seed", range(5))
def test_incidence_and_colors_random(seed):
    rng = np.random.default_rng(seed)
    n = 60
    groups = []
    for k in (2, 3, 4):
        E = np.array([rng.choice(n, k, replace=False) for _ in range(40)], np.int64)
        _check_incidence(E, n)
        groups.append(E)
    _check_colors(groups, n)


def test_colors_cloth_with_hinges_and_rods_together():
    V, T, H = _cloth(8)
    n = len(V)
    rod_e = np.stack([np.arange(n, n + 9), np.arange(n + 1, n + 10)], 1)   # a rod of 10 vertices after the cloth
    rod_b = bending.rod_stencils(rod_e.astype(np.int32), n + 10).astype(np.int64)
    color = _check_colors([T, H, rod_e, rod_b], n + 10)
    # hinges couple the 4 vertices around every interior edge: a regular grid needs more than 3 colours
    assert color[:n].max() + 1 >= 4
    # rod: stencils of 3 consecutive vertices need 3 colours, and greedy finds exactly 3
    assert len(np.unique(color[n:])) == 3


def test_colors_without_elements_is_one_colour():
    color = vertex_colors([np.zeros((0, 3), np.int64)], 4)
    assert np.array_equal(color, np.zeros(4)) and len(color_lists(color)) == 1
