"""The Newton stopping rule's safety net (newton.body_residual): a coherent net-force imbalance on a body
(a block that friction's stiff sticking Hessian keeps from moving although it should slide) keeps the
solve going; local force errors that cancel within a body (cloth vertices flipping at the friction kink)
do not."""
import numpy as np

from solver_server.integrators.stop_test import body_residual, force_residual

H = 1.0 / 24.0


def test_coherent_imbalance_is_seen_per_body():
    m = np.full(3 * 8, 0.01)                    # 8 vertices of 10 g, one body
    a = 1.68                                    # m/s^2 along x, the slide test's net acceleration
    g = np.zeros(24)
    g[0::3] = -m[0::3] * a * H * H              # gradient = h^2 x (minus the net force)
    r = body_residual(g, m, np.zeros(24, np.int64), H)
    assert np.isclose(r, a * H)                 # the body's mean-velocity error, m/s
    assert r > 1e-2                             # above the default newton_tol: no stop


def test_local_errors_that_cancel_do_not_block_the_stop():
    n = 400
    m = np.full(3 * n, 0.2 / n)
    g = np.zeros(3 * n)
    g[0:6] = [1e-5, 0, 0, -1e-5, 0, 0]          # two vertices pushed opposite ways
    assert body_residual(g, m, np.zeros(3 * n, np.int64), H) < 1e-12
    assert force_residual(g, m, H) > 1e-2       # the previous per-DOF RMS test would keep iterating


def test_bodies_are_checked_separately_and_massless_dofs_ignored():
    m = np.array([1.0] * 3 + [1.0] * 3 + [0.0] * 3)
    g = np.array([1e-3, 0, 0, -1e-3, 0, 0, 5.0, 5.0, 5.0])
    one = body_residual(g, m, np.zeros(9, np.int64), H)
    two = body_residual(g, m, np.array([0, 0, 0, 1, 1, 1, 2, 2, 2]), H)
    assert one < 1e-12 and np.isclose(two, 1e-3 / H)
