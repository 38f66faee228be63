"""The sweep's dihedral cache (blockdescent/dihedral_cache.py) against the on-the-fly cloth bending.

The cache stores each interior edge's signed dihedral angle and its gradient once (the two
triangles of an edge see the same function of the same four vertices), recomputed per colour for
the edges of the vertices that colour moved. Checked here on a jittered grid and on an
inconsistently oriented patch:
* the table: one entry per interior edge (mirrored slots share it), none for boundary edges;
* every (stencil, slot) block from the cache equals shell_bending.shell_vertex to rounding, on a
  randomly deformed sheet;
* after moving one colour and refreshing only its vertices' dihedrals, the cache equals a full
  recomputation (nothing stale), and a wrong refresh (a colour left out) is detected.
"""
import numpy as np
import pytest

from solver_server.solvers.block_descent.dihedral_cache import (dihedral_cache, dihedral_table, dihedrals_all,
                                                               refresh_dihedrals, shell_vertex_cached)
from solver_server.solvers.block_descent.incidence import color_lists, vertex_colors
from solver_server.energies.shell_bending import rest_thetas, shell_stencils, shell_stiffness, shell_vertex
from solver_server.model.primitives import grid_sheet


def _sheet(flip_some: bool):
    V, T, _ = grid_sheet((0.2, 0.15), (9, 7), center=(0, 0, 0))
    rng = np.random.default_rng(3)
    V = V + 0.004 * rng.standard_normal(V.shape) * np.array([1, 1, 0])
    T = np.asarray(T, np.int64)
    if flip_some:                                   # inconsistent orientation on every third triangle
        T[::3] = T[::3, ::-1]
    st = shell_stencils(T)
    return V, T, st


def _cache(V, st):
    return dihedral_cache(st, len(V))


def _edges(T):
    e = np.sort(np.concatenate([T[:, [1, 2]], T[:, [2, 0]], T[:, [0, 1]]]), axis=1)
    u, c = np.unique(e, axis=0, return_counts=True)
    return int((c == 2).sum())


@pytest.mark.parametrize("flip_some", [False, True])
def test_table_has_one_entry_per_interior_edge(flip_some):
    V, T, st = _sheet(flip_some)
    slot_edge, slot_flip, quad, q_s, q_e = dihedral_table(st, len(V))
    interior = _edges(T)
    present = slot_edge >= 0
    assert present.sum() == 2 * interior               # both sides of every interior edge, no boundary slot
    if not flip_some:
        assert len(quad) == interior                   # consistent orientation: every mirror shared
        assert slot_flip.sum() == interior
    else:
        assert interior < len(quad) <= 2 * interior    # mismatched sides keep their own entries
    for e in range(len(quad)):                         # CSR: each dihedral listed under its four vertices
        for v in quad[e]:
            assert e in q_e[q_s[v]:q_s[v + 1]]


@pytest.mark.parametrize("flip_some", [False, True])
def test_cached_blocks_equal_the_shell_vertex_blocks(flip_some):
    V, T, st = _sheet(flip_some)
    K = shell_stiffness(V, st, 1e-3)
    th0 = rest_thetas(V, st)
    rng = np.random.default_rng(5)
    x = V + 0.01 * rng.standard_normal(V.shape)
    SH = _cache(V, st)
    dihedrals_all(x, SH.quad, SH.theta, SH.grad, SH.ok)
    th, gr, ok, r, ja = np.empty(3), np.empty((3, 4, 3)), np.empty(3), np.empty(3), np.empty((3, 3))
    worst = 0.0
    for i in range(len(st)):
        for a in range(6):
            if a >= 3 and st[i, a] == st[i, a - 3]:
                continue
            g0, H0 = np.zeros(3), np.zeros((3, 3))
            shell_vertex(x, st[i], K[i], th0[i], a, g0, H0, th, gr, ok, r, ja)
            g1, H1 = np.zeros(3), np.zeros((3, 3))
            shell_vertex_cached(i, a, K[i], th0[i], SH.slot_edge, SH.slot_flip, SH.theta, SH.grad, SH.ok, g1, H1,
                                np.empty((3, 3)))
            scale = max(np.abs(g0).max(), 1e-30)
            worst = max(worst, np.abs(g1 - g0).max() / scale)
            np.testing.assert_allclose(g1, g0, rtol=1e-12, atol=1e-12 * scale)
            np.testing.assert_allclose(H1, H0, rtol=1e-12, atol=1e-12 * max(np.abs(H0).max(), 1e-30))
    assert worst < 1e-12


@pytest.mark.parametrize("parallel", [False, True])
def test_refresh_after_a_colour_leaves_nothing_stale(parallel):
    V, T, st = _sheet(False)
    cols = color_lists(vertex_colors([st], len(V)))
    rng = np.random.default_rng(8)
    x = V + 0.005 * rng.standard_normal(V.shape)
    SH = _cache(V, st)
    dihedrals_all(x, SH.quad, SH.theta, SH.grad, SH.ok)
    for verts in cols:                                  # a sweep: move one colour, refresh its dihedrals
        x[verts] += 0.003 * rng.standard_normal((len(verts), 3))
        refresh_dihedrals(x, verts, SH.v_start, SH.v_edge, SH.quad, SH.theta, SH.grad, SH.ok, parallel)
        full = _cache(V, st)
        dihedrals_all(x, full.quad, full.theta, full.grad, full.ok)
        np.testing.assert_array_equal(SH.theta, full.theta)
        np.testing.assert_array_equal(SH.grad, full.grad)
    # a colour moved without its refresh is visible (the check above is not vacuous)
    x[cols[0]] += 0.003
    full = _cache(V, st)
    dihedrals_all(x, full.quad, full.theta, full.grad, full.ok)
    assert np.abs(SH.theta - full.theta).max() > 1e-6
