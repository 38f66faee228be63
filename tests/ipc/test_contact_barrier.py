"""Barrier, mollifier and barrier-potential checks: finite differences, locality, PSD projection."""
import math

import numpy as np
import pytest
import scipy.sparse as sp

from solver_server.contact import (CollisionMesh, Candidates, find_candidates, barrier_energy,
                                       barrier_gradient, barrier_hessian, count_active, min_distance,
                                       barrier, barrier_first_derivative, barrier_second_derivative,
                                       adaptive_kappa, update_kappa, kappa_bounds)
from solver_server.contact.distance import point_triangle_stencil, edge_edge_stencil
from solver_server.contact.mollifier import mollifier, cross_norm2_grad_hess
from solver_server.contact.potential import pair_barrier

from .test_contact_fdutil import fd_gradient, fd_jacobian, assert_close

DHAT = 0.1


def test_barrier_scalar_derivatives_and_c2_at_dhat():
    for s in np.linspace(0.003, 0.099, 25):
        h = 1e-7 * s
        d1 = (barrier(s + h, DHAT) - barrier(s - h, DHAT)) / (2 * h)
        d2 = (barrier_first_derivative(s + h, DHAT) - barrier_first_derivative(s - h, DHAT)) / (2 * h)
        assert d1 == pytest.approx(barrier_first_derivative(s, DHAT), rel=1e-6, abs=1e-12)
        assert d2 == pytest.approx(barrier_second_derivative(s, DHAT), rel=1e-6, abs=1e-9)
        assert barrier(s, DHAT) > 0 and barrier_first_derivative(s, DHAT) < 0   # forces only push
    for f in (barrier, barrier_first_derivative, barrier_second_derivative):
        assert f(DHAT, DHAT) == 0.0 and f(2 * DHAT, DHAT) == 0.0
        assert abs(f(DHAT * (1 - 1e-9), DHAT)) < 1e-8          # continuous through dhat (C2)
    assert barrier(1e-300, DHAT) > barrier(1e-10, DHAT) > barrier(1e-3, DHAT) and math.isinf(barrier(0.0, DHAT))


def test_mollifier_derivatives():
    eps = 0.3
    for c in np.linspace(0.0, 0.5, 21):
        m, m1, m2 = mollifier(c, eps)
        h = 1e-7
        if abs(c - eps) > 1e-3:
            assert (mollifier(c + h, eps)[0] - mollifier(c - h, eps)[0]) / (2 * h) == pytest.approx(m1, abs=1e-7)
            assert (mollifier(c + h, eps)[1] - mollifier(c - h, eps)[1]) / (2 * h) == pytest.approx(m2, abs=1e-6)
    assert mollifier(0.0, eps)[0] == 0.0 and mollifier(eps, eps)[0] == 1.0
    rng = np.random.default_rng(0)
    for _ in range(10):
        X = rng.normal(size=12)

        def c_of(y):
            return cross_norm2_grad_hess(y, np.zeros(12), np.zeros((12, 12)), False)

        def g_of(y):
            g = np.zeros(12)
            cross_norm2_grad_hess(y, g, np.zeros((12, 12)), False)
            return g
        g = np.zeros(12)
        H = np.zeros((12, 12))
        cross_norm2_grad_hess(X, g, H, True)
        assert_close(g, fd_gradient(c_of, X))
        assert_close(H, fd_jacobian(g_of, X), rel=1e-5)


def _pair_fns(is_ee, off, epsx, dhat=DHAT):
    stencil = edge_edge_stencil if is_ee else point_triangle_stencil

    def st(X):
        return stencil(*[tuple(X[3 * i:3 * i + 3]) for i in range(4)])

    def e(X):
        return pair_barrier(X, st(X), is_ee, off, epsx, dhat, np.zeros(12), np.zeros((12, 12)), False, False)

    def g(X):
        out = np.zeros(12)
        pair_barrier(X, st(X), is_ee, off, epsx, dhat, out, np.zeros((12, 12)), True, False)
        return out

    def H(X):
        out = np.zeros((12, 12))
        pair_barrier(X, st(X), is_ee, off, epsx, dhat, np.zeros(12), out, True, True)
        return out
    return e, g, H


def _check_pair(X, is_ee, off=0.0, epsx=1.0, expect_active=True, hess_abs=1e-8):
    e, g, H = _pair_fns(is_ee, off, epsx)
    if expect_active:
        assert e(X) > 0
    assert_close(g(X), fd_gradient(e, X, h=1e-7), abs_=1e-10)
    assert_close(H(X), fd_jacobian(g, X, h=1e-7), rel=2e-5, abs_=hess_abs)


def test_point_triangle_pair_barrier_fd_all_regions():
    tri = [0, 0, 0, 1, 0, 0, 0, 1, 0]
    rng = np.random.default_rng(1)
    for q in [(0.2, 0.3), (0.5, -0.03), (-0.02, -0.03), (0.6, 0.45)]:
        X = np.array([q[0], q[1], 0.04] + tri) + 1e-3 * rng.normal(size=12)
        _check_pair(X, False)
        _check_pair(X, False, off=0.01)   # thickness offset


def test_edge_edge_pair_barrier_fd_with_and_without_mollifier():
    rng = np.random.default_rng(2)
    crossing = np.array([0, 0, 0, 1, 0, 0, 0.5, -1, 0.05, 0.5, 1, 0.05]) + 1e-3 * rng.normal(size=12)
    _check_pair(crossing, True, epsx=1e-3)            # mollifier inactive
    near_parallel = np.array([0, 0, 0, 1, 0, 0, 0.2, -0.01, 0.05, 1.2, 0.02, 0.05])
    _check_pair(near_parallel, True, epsx=1e-3)       # c < eps_x: mollified
    parallel = np.array([0, 0, 0, 1, 0, 0, 0.2, 0, 0.05, 1.2, 0, 0.05])
    e, g, H = _pair_fns(True, 0.0, 1e-3)
    assert e(parallel) == 0.0                          # m(0) = 0: parallel edges carry no energy
    _check_pair(parallel, True, epsx=1e-3, expect_active=False)


def test_pair_touching_at_dhat_is_smooth():
    X = np.array([0.2, 0.3, DHAT, 0, 0, 0, 1, 0, 0, 0, 1, 0], float)
    e, g, H = _pair_fns(False, 0.0, 1.0)
    assert e(X) == 0.0
    # b'' vanishes at dhat: the one-sided FD Hessian is O(h / dhat), far below the O(1) scale of
    # the Hessian half-way in (checked by the other tests)
    _check_pair(X, False, expect_active=False, hess_abs=1e-5)
    assert np.linalg.norm(H(X - np.array([0, 0, DHAT / 2] + [0] * 9))) > 1.0


def _two_sheets(gap=0.03, off=0.0):
    """Two 3x3-vertex grids (separate bodies), the upper one rotated in-plane, gap apart in z."""
    u = np.linspace(0, 1, 3)
    P = np.array([[a, b, 0.0] for b in u for a in u])
    faces = []
    for j in range(2):
        for i in range(2):
            v = 3 * j + i
            faces += [[v, v + 1, v + 4], [v, v + 4, v + 3]]
    faces = np.array(faces, np.int32)
    c, s = math.cos(0.3), math.sin(0.3)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    Q = (P - [0.5, 0.5, 0.0]) @ R.T + [0.537, 0.551, gap]   # no vertex exactly above a feature
    Q[4, 2] -= 0.6 * gap          # bend the upper sheet so distances vary
    x = np.vstack([P, Q])
    mesh = CollisionMesh.build(18, np.vstack([faces, faces + 9]), vertex_body=np.repeat([0, 1], 9),
                               vertex_offset=np.full(18, off), body_friction=np.array([0.5, 0.5]),
                               self_contact=np.array([False, False]))
    return x, mesh


@pytest.mark.parametrize("off", [0.0, 0.005])
def test_barrier_potential_fd(off):
    x, mesh = _two_sheets(off=off)
    cands = find_candidates(x, mesh, DHAT)
    assert count_active(x, cands, mesh, DHAT) > 10
    kappa = 3.0
    xf = x.ravel()
    g = barrier_gradient(xf, cands, mesh, DHAT, kappa)
    assert_close(g, fd_gradient(lambda y: barrier_energy(y, cands, mesh, DHAT, kappa), xf, h=1e-7))
    r, c, v = barrier_hessian(xf, cands, mesh, DHAT, kappa, project_psd=False)
    H = sp.coo_matrix((v, (r, c)), shape=(54, 54)).toarray()
    Hfd = fd_jacobian(lambda y: barrier_gradient(y, cands, mesh, DHAT, kappa), xf, h=1e-7)
    assert_close(H, Hfd, rel=1e-5)


def test_projected_hessian_is_psd_and_projection_matters():
    x, mesh = _two_sheets(gap=0.05)
    cands = find_candidates(x, mesh, DHAT)
    r, c, v = barrier_hessian(x, cands, mesh, DHAT, 1.0, project_psd=True)
    H = sp.coo_matrix((v, (r, c)), shape=(54, 54)).toarray()
    w = np.linalg.eigvalsh(H)
    assert w.min() >= -1e-10 * w.max()
    r, c, v = barrier_hessian(x, cands, mesh, DHAT, 1.0, project_psd=False)
    H0 = sp.coo_matrix((v, (r, c)), shape=(54, 54)).toarray()
    assert np.linalg.eigvalsh(H0).min() < -1e-6 * w.max()


def test_locality_and_min_distance_and_offsets():
    x, mesh = _two_sheets(gap=0.3)
    cands = find_candidates(x, mesh, DHAT)
    assert barrier_energy(x, cands, mesh, DHAT, 1.0) == 0.0
    assert count_active(x, cands, mesh, DHAT) == 0
    assert np.all(barrier_gradient(x, cands, mesh, DHAT, 1.0) == 0.0)
    x, mesh = _two_sheets(gap=0.03, off=0.004)
    cands = find_candidates(x, mesh, DHAT)
    # the lowest upper vertex is 0.012 m above the lower sheet; offsets subtract 2 * 0.004
    assert min_distance(x, cands, mesh) == pytest.approx(0.03 * 0.4 - 0.008, rel=1e-9)


def test_adaptive_kappa_balances_gradients_and_update_rule():
    x, mesh = _two_sheets()
    cands = find_candidates(x, mesh, DHAT)
    kmin, kmax = kappa_bounds(x, DHAT, 1.0)
    assert 0 < kmin < kmax
    gb = barrier_gradient(x, cands, mesh, DHAT, 1.0)
    target = 20.0 * kmin
    k = adaptive_kappa(x, cands, mesh, DHAT, 1.0, grad_elastic=-target * gb)
    assert k == pytest.approx(target, rel=1e-12)
    assert adaptive_kappa(x, cands, mesh, DHAT, 1.0, grad_elastic=1e9 * gb) == kmin
    assert adaptive_kappa(x, cands, mesh, DHAT, 1.0, grad_elastic=-1e9 * kmax * gb) == kmax
    assert update_kappa(5.0, 1e-6 * DHAT, 2e-6 * DHAT, DHAT) == 10.0
    assert update_kappa(5.0, 1e-6 * DHAT, 2e-6 * DHAT, DHAT, kappa_max=7.0) == 7.0
    assert update_kappa(5.0, 3e-6 * DHAT, 2e-6 * DHAT, DHAT) == 5.0      # making progress
    assert update_kappa(5.0, 0.5 * DHAT, 0.6 * DHAT, DHAT) == 5.0        # far away


def test_reduced_psd_projection_equals_full_projection():
    from solver_server.contact.psd import project_psd, project_psd_translation_invariant
    from solver_server.contact.distance import edge_edge_dist2_grad_hess
    rng = np.random.default_rng(12)
    for _ in range(20):
        X = rng.normal(size=12)
        _, g, H = edge_edge_dist2_grad_hess(X)
        H = H - 2.0 * np.outer(g, g)                  # translation invariant and indefinite
        P = project_psd_translation_invariant(H)
        assert_close(P, project_psd(H), rel=1e-12, abs_=1e-12)
        assert np.linalg.eigvalsh(P).min() >= -1e-12 * np.abs(P).max()
        assert np.linalg.eigvalsh(H).min() < 0


def test_gradient_then_hessian_gives_the_bytes_of_gradient_and_hessian():
    """ContactTerms.gradient_then_hessian (one pass for the gradient and the Hessian triplets, the latter kept for
    the hessian call at the same x and candidates) returns exactly what gradient and hessian return."""
    from solver_server.contact.terms import ContactTerms
    x, mesh = _two_sheets()
    ct = ContactTerms.__new__(ContactTerms)
    from solver_server import contact as C
    ct.C, ct.mesh, ct.dhat, ct.kappa = C, mesh, DHAT, 3.0
    cands = find_candidates(x, mesh, DHAT)
    g0 = ct.gradient(x, cands)
    h0 = ct.hessian(x, cands)
    g1 = ct.gradient_then_hessian(x, cands)
    h1 = ct.hessian(x, cands)
    assert g0.tobytes() == g1.tobytes()
    assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(h0, h1))
    assert ct._kept_hessian is None                  # used once
    ct.gradient_then_hessian(x, cands)
    y = x.copy()
    y[0, 2] += 1e-4
    h2 = ct.hessian(y, cands)                        # another x: computed afresh
    assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
               for a, b in zip(h2, C.barrier_hessian(y, cands, mesh, DHAT, 3.0)))
