"""Finite-difference checks of the squared distances (every closest-feature case and degenerate inputs)."""
import numpy as np
import pytest

from solver_server.contact.distance import (
    point_triangle_dist2_grad_hess, edge_edge_dist2_grad_hess, point_edge_dist2_grad_hess,
    point_point_dist2_grad_hess, point_triangle_stencil, edge_edge_stencil, KIND_PP, KIND_PE, KIND_PT, KIND_EE)

from .test_contact_fdutil import fd_gradient, fd_jacobian, assert_close

FUNCS = {
    "pt": point_triangle_dist2_grad_hess,
    "ee": edge_edge_dist2_grad_hess,
    "pe": point_edge_dist2_grad_hess,
    "pp": point_point_dist2_grad_hess,
}
SIZES = {"pt": 12, "ee": 12, "pe": 9, "pp": 6}


def check(name, X, hess=True):
    f = FUNCS[name]
    d, g, H = f(X)
    assert d >= 0
    assert_close(g, fd_gradient(lambda y: f(y)[0], X))
    if hess:
        assert_close(H, fd_jacobian(lambda y: f(y)[1], X), rel=1e-5)


@pytest.mark.parametrize("name", ["pt", "ee", "pe", "pp"])
def test_random_configurations(name):
    rng = np.random.default_rng(7)
    for _ in range(40):
        check(name, rng.normal(size=SIZES[name]))


def _kinds(fn, X):
    P = [tuple(X[3 * i:3 * i + 3]) for i in range(4)]
    return fn(*P)[0]


def test_every_point_triangle_case_is_reached_and_checked():
    rng = np.random.default_rng(3)
    tri = np.array([0, 0, 0, 1, 0, 0, 0, 1, 0], float)
    seen = set()
    # points above the interior, beyond each edge and beyond each vertex
    for q in [(0.2, 0.2), (0.5, -0.3), (-0.3, 0.5), (0.8, 0.8), (-0.5, -0.5), (1.5, -0.2), (-0.2, 1.5)]:
        for z in (0.3, -0.7):
            X = np.concatenate([[q[0], q[1], z], tri]) + 1e-3 * rng.normal(size=12)
            seen.add(_kinds(point_triangle_stencil, X))
            check("pt", X)
    assert seen == {KIND_PP, KIND_PE, KIND_PT}


def test_every_edge_edge_case_is_reached_and_checked():
    seen = set()
    cases = [
        [0, 0, 0, 1, 0, 0, 0.5, -1, 0.3, 0.5, 1, 0.3],      # crossing: EE
        [0, 0, 0, 1, 0, 0, 1.5, -1, 0.3, 1.5, 1, 0.3],      # beyond a1: PE (a1 vs b)
        [0, 0, 0, 1, 0, 0, 1.5, 0.5, 0.3, 2.5, 1, 0.3],     # PP
        [0, 0, 0, 1, 0, 0, 0.3, 0.1, 0.5, 0.6, 0.2, 2.0],   # b0 closest to interior of a: PE
    ]
    rng = np.random.default_rng(4)
    for X in cases:
        X = np.array(X, float) + 1e-3 * rng.normal(size=12)
        seen.add(_kinds(edge_edge_stencil, X))
        check("ee", X)
    assert seen == {KIND_PP, KIND_PE, KIND_EE}


def test_point_exactly_above_triangle_vertex_gradient():
    # region boundary PT / PE / PP: the squared distance is C1 there (gradient only)
    X = np.array([0, 0, 0.4, 0, 0, 0, 1, 0, 0, 0, 1, 0], float)
    check("pt", X, hess=False)
    d, g, H = point_triangle_dist2_grad_hess(X)
    assert d == pytest.approx(0.16, rel=1e-14)
    assert_close(g[:3], [0, 0, 0.8])


def test_point_on_an_edge():
    # zero distance: gradient vanishes, Hessian is the edge-normal projector 2(I - e e^T) on p
    X = np.array([0.5, 0, 0, 0, 0, 0, 1, 0, 0], float)
    d, g, H = point_edge_dist2_grad_hess(X)
    assert d == 0.0 and np.all(g == 0.0)
    assert_close(H[:3, :3], 2 * np.diag([0, 1, 1]), abs_=1e-12)
    check("pe", X + np.array([0, 1e-3, 0, 0, 0, 0, 0, 0, 0]))


def test_parallel_edges_fall_back_to_point_edge():
    X = np.array([0, 0, 0, 1, 0, 0, 0.3, 0.2, 0, 1.7, 0.2, 0], float)
    d, g, H = edge_edge_dist2_grad_hess(X)
    assert d == pytest.approx(0.04, rel=1e-14)
    assert _kinds(edge_edge_stencil, X) in (KIND_PE, KIND_PP)
    # parallel edges: the gradient along a rigid translation of edge b along itself vanishes
    t = np.zeros(12)
    t[6] = t[9] = 1.0
    assert abs(g @ t) < 1e-14


def test_degenerate_triangle_and_edges_do_not_produce_nan():
    X = np.array([0.3, 0.4, 0.5, 0, 0, 0, 1, 0, 0, 2, 0, 0], float)   # collinear triangle
    d, g, H = point_triangle_dist2_grad_hess(X)
    assert np.isfinite(d) and np.all(np.isfinite(g)) and np.all(np.isfinite(H))
    assert d == pytest.approx(0.4 ** 2 + 0.5 ** 2, rel=1e-14)
    X = np.array([0, 0, 0, 0, 0, 0, 0.2, 1, 0, 0.2, -1, 0], float)   # zero-length edge a
    d, g, H = edge_edge_dist2_grad_hess(X)
    assert d == pytest.approx(0.04, rel=1e-14) and np.all(np.isfinite(H))
