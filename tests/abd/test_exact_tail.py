"""Issue 19's exact-friction tail (solvers/newton/newton.py EXACT_TAIL, off by default) and its branch test
(contact/friction.py slip_reversals), checked against a direct numpy evaluation of the tangential slips."""
import numpy as np

from benchmarks import rigid_scenes as rs
from solver_server.contact.friction import slip_reversals
from solver_server.solvers.newton import newton


def _slips(x, x_prev, ids, coef, T):
    """u_k = T_k^T sum_i c_ki (x_i - x_prev_i) (m), (K, 2): the reference, written out with numpy."""
    d = np.einsum("ki,kij->kj", coef, (x - x_prev)[ids])
    return np.einsum("kj,kjt->kt", d, T)


def test_slip_reversals_counts_branch_changes():
    """Random pairs on random moves: the kernel counts the pairs whose slip turns back (u0 . u1 < 0 with a slip
    of at least eps at either end) or crosses |u| = eps, exactly as the numpy reference of the same rule."""
    rng = np.random.default_rng(3)
    n, K, eps = 40, 300, 4e-6
    x_prev = rng.normal(size=(n, 3))
    ids = rng.integers(0, n, size=(K, 4)).astype(np.int32)
    coef = rng.normal(size=(K, 4))
    T = np.linalg.qr(rng.normal(size=(K, 3, 3)))[0][:, :, :2].copy()
    for scale in (1e-7, 1e-6, 1e-5):
        x0 = x_prev + scale * rng.normal(size=(n, 3))
        x1 = x_prev + scale * rng.normal(size=(n, 3))
        u0, u1 = _slips(x0, x_prev, ids, coef, T), _slips(x1, x_prev, ids, coef, T)
        y0, y1 = (u0 ** 2).sum(1), (u1 ** 2).sum(1)
        turn = ((u0 * u1).sum(1) < 0) & (np.maximum(y0, y1) >= eps ** 2)
        cross = (y0 >= eps ** 2) != (y1 >= eps ** 2)
        ref = int((turn | cross).sum())
        assert slip_reversals(x0, x1, x_prev, ids, coef, T, eps) == ref
        assert slip_reversals(x0, x0, x_prev, ids, coef, T, eps) == 0   # no move, no branch change
    assert ref > 0


def test_exact_tail_is_off_by_default_and_keeps_the_guarantees():
    """Off by default; switched on, 12 props poured into the bin still never cross (exact edge-triangle count of
    the collision shapes and of the meshes), every step converges and every prop ends inside the bin."""
    assert newton.EXACT_TAIL is False
    newton.EXACT_TAIL = True
    try:
        r = rs.run_clearance("bin", 8, 1, 12)
    finally:
        newton.EXACT_TAIL = False
    assert r["cross_shape"] == 0 and r["cross"] == 0
    assert r["missed"] == 0
    w, d, _ = rs.BIN
    for c in r["end"]:
        assert abs(c[0]) < w / 2 and abs(c[1]) < d / 2 and 0.0 < c[2] < 0.5, c
