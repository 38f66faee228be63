"""The body-block pull of contact Hessians (model/dof_map.py, ``_pull_coo_grouped``): entries between two affine
bodies' vertices are summed into one dense 12 x 12 block per body pair. Reference: the dense J^T H J built
from the map's weights with numpy, for a mix of body-body, body-vertex and vertex-vertex entries."""
import numpy as np
import scipy.sparse as sp

from solver_server.model.dof_map import DofMap


def _map(rng):
    """3 free vertices, then 2 bodies of 5 slaved vertices each (rows 13..16 and 17..20)."""
    n_x, nb, per = 13, 2, 5
    slaved, rows, w = [], [], []
    for b in range(nb):
        for i in range(per):
            slaved.append(3 + b * per + i)
            rows += list(range(n_x + 4 * b, n_x + 4 * b + 4))
            w += [1.0] + list(rng.normal(size=3))
    ptr = np.arange(len(slaved) + 1) * 4
    return DofMap(n_x, n_x + 4 * nb, np.array(slaved), ptr, np.array(rows), np.array(w))


def _dense_W(D):
    W = np.zeros((D.n_x, D.n_z))
    for i in range(D.n_x):
        for k in range(D.vptr[i], D.vptr[i + 1]):
            W[i, D.vrows[k]] += D.vw[k]
    return np.kron(W, np.eye(3))


def test_grouped_pull_equals_dense_JtHJ():
    rng = np.random.default_rng(3)
    D = _map(rng)
    assert D.group_size == 4 and len(D.group_row0) == 2
    n = 3 * D.n_x
    m = 4000
    r = rng.integers(0, n, m)
    c = rng.integers(0, n, m)
    v = rng.normal(size=m)
    Hx = sp.coo_matrix((v, (r, c)), shape=(n, n)).toarray()
    W = _dense_W(D)
    ref = W.T @ Hx @ W
    for grouped in (True, False):
        D.GROUPED = grouped
        ro, co, vo = D.pull_coo(r, c, v)
        got = sp.coo_matrix((vo, (ro, co)), shape=(3 * D.n_z, 3 * D.n_z)).toarray()
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    D.GROUPED = True
    ro, co, vo = D.pull_coo(r, c, v)
    assert len(vo) < m * 4          # 4 block pairs of 144 + the spread free-vertex entries, not 16 per entry
    # the scratch table is left clean for the next call
    assert (D._table == -1).all()


def test_to_x_kernel_and_positions_cache_same_bytes():
    """to_x's kernel for 4 consecutive rows a vertex (_apply4) gives the bytes of the general _apply, and
    positions() returns to_x's bytes: the kept array for a z of the same bytes, a new one otherwise (also when z
    differs only in one entry, or in the sign of a zero)."""
    from solver_server.model.dof_map import _apply
    rng = np.random.default_rng(5)
    D = _map(rng)
    assert D._w4 is not None
    z = rng.normal(size=(D.n_z, 3))
    ref = np.array(z[:D.n_x])
    _apply(z, D.slaved, D.ptr, D.rows, D.w, ref)
    got = D.to_x(z)
    assert got.tobytes() == ref.tobytes()
    a = D.positions(z)
    assert a.tobytes() == ref.tobytes()
    assert D.positions(z.copy()) is a                 # same bytes: the kept result
    z2 = z.copy()
    z2[-1, 2] += 1e-12
    b = D.positions(z2)
    assert b is not a and b.tobytes() == D.to_x(z2).tobytes()
    z3 = z.copy()
    z3[0, 0] = 0.0
    z4 = z3.copy()
    z4[0, 0] = -0.0                                   # row 0 is a free vertex: its bytes are copied
    c3, c4 = D.positions(z3), D.positions(z4)
    assert c3 is not c4 and c4.tobytes() == D.to_x(z4).tobytes()
    # older results drop out after POSITIONS_KEPT others
    for k in range(D.POSITIONS_KEPT):
        D.positions(z + k + 1.0)
    assert D.positions(z) is not a and D.positions(z).tobytes() == ref.tobytes()
