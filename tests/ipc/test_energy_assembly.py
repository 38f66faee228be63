"""The precomputed free-DOF CSR pattern of the elastic Hessian sums the same matrix as a plain
COO -> CSR conversion restricted to the free DOFs (duplicates summed, fixed DOFs dropped)."""
import numpy as np
import scipy.sparse as sp

from solver_server.solvers.newton.assembly import FreePattern, free_block


def _reference(rows, cols, vals, diag, dof_map, nf):
    fr, fc = dof_map[rows], dof_map[cols]
    keep = (fr >= 0) & (fc >= 0)
    A = sp.coo_matrix((vals[keep], (fr[keep], fc[keep])), shape=(nf, nf)).toarray()
    return A + np.diag(diag)


def test_free_pattern_equals_coo_assembly():
    rng = np.random.default_rng(3)
    n_verts, k = 40, 3
    elems = rng.integers(0, n_verts, size=(60, k))
    # dense 3k x 3k blocks per element, as the element kernels produce them
    rows = np.concatenate([np.repeat(3 * np.repeat(e, 3) + np.tile(np.arange(3), k), 3 * k) for e in elems])
    cols = np.concatenate([np.tile(3 * np.repeat(e, 3) + np.tile(np.arange(3), k), 3 * k) for e in elems])
    fixed = np.zeros(n_verts, bool)
    fixed[rng.choice(n_verts, 7, replace=False)] = True
    free = np.nonzero(np.repeat(~fixed, 3))[0]
    dof_map = -np.ones(3 * n_verts, np.int64)
    dof_map[free] = np.arange(free.size)
    pat = FreePattern(rows, cols, dof_map, free.size)
    for _ in range(2):  # the pattern is reused with new values
        vals = rng.standard_normal(rows.size)
        diag = rng.uniform(1.0, 2.0, free.size)
        H = pat.matrix(vals, diag)
        ref = _reference(rows, cols, vals, diag, dof_map, free.size)
        assert np.abs(H.toarray() - ref).max() < 1e-12 * np.abs(ref).max()
    # contact-style triplets on top
    r = rng.integers(0, 3 * n_verts, 50)
    c = rng.integers(0, 3 * n_verts, 50)
    v = rng.standard_normal(50)
    B = free_block(r, c, v, dof_map, free.size).toarray()
    ref_b = _reference(r, c, v, np.zeros(free.size), dof_map, free.size)
    assert np.abs(B - ref_b).max() < 1e-14
    assert np.abs(ref_b).max() > 0  # some triplets do land in the free block


def _groups_and_values(rng, n_verts):
    """Two element groups (triangles, 6-vertex stencils) as ElasticTerms keeps them, their COO pattern
    (hessian_pattern, concatenated) and per-group random values (3k x 3k per element, row-major)."""
    from solver_server.energies.fem_common import hessian_pattern
    groups = [rng.integers(0, n_verts, size=(50, 3)), rng.integers(0, n_verts, size=(30, 6))]
    groups[1][3, 4] = groups[1][3, 1]             # a repeated vertex: two entries of one element in a slot
    pats = [hessian_pattern(np.ascontiguousarray(g)) for g in groups]
    rows = np.concatenate([p[0] for p in pats])
    cols = np.concatenate([p[1] for p in pats])
    parts = [rng.standard_normal(g.shape[0] * (3 * g.shape[1]) ** 2) for g in groups]
    return groups, rows, cols, parts


def test_matrix_parts_gives_the_bytes_of_matrix():
    """FreePattern.matrix_parts (the scaled groups summed without the concatenated copy) and
    RegionPattern.from_elements(...).matrix_parts (blocks from the elements' vertex pairs) give the bytes of
    matrix(scale * concatenated values): Newton's steps must not change by a bit."""
    from solver_server.solvers.newton.assembly import RegionPattern
    rng = np.random.default_rng(7)
    n_verts = 40
    groups, rows, cols, parts = _groups_and_values(rng, n_verts)
    h2 = (1.0 / 24.0) ** 2 * 1.37
    for n_fixed in (0, 6):
        fixed = np.zeros(n_verts, bool)
        fixed[rng.choice(n_verts, n_fixed, replace=False)] = True
        free = np.nonzero(np.repeat(~fixed, 3))[0]
        dof_map = -np.ones(3 * n_verts, np.int64)
        dof_map[free] = np.arange(free.size)
        pat = FreePattern(rows, cols, dof_map, free.size)
        diag = rng.uniform(1.0, 2.0, free.size)
        A = pat.matrix(h2 * np.concatenate(parts), diag)
        B = pat.matrix_parts(parts, h2, diag)
        assert A.data.tobytes() == B.data.tobytes()
        assert np.array_equal(A.indices, B.indices) and np.array_equal(A.indptr, B.indptr)
    verts = np.sort(rng.choice(n_verts, 25, replace=False))
    vloc = -np.ones(n_verts, np.int64)
    vloc[verts] = np.arange(verts.size)
    diag = rng.uniform(1.0, 2.0, 3 * verts.size)
    A = RegionPattern(rows, cols, vloc, verts.size).matrix(h2 * np.concatenate(parts), diag)
    B = RegionPattern.from_elements(groups, vloc, verts.size).matrix_parts(parts, h2, diag)
    assert A.data.tobytes() == B.data.tobytes()
    assert np.array_equal(A.indices, B.indices) and np.array_equal(A.indptr, B.indptr)
