"""Lagged smoothed friction: finite differences, Coulomb bound, direction, momentum balance, PSD."""
import numpy as np
import pytest
import scipy.sparse as sp

from solver_server.contact import (CollisionMesh, find_candidates, friction_setup, friction_energy,
                                       friction_gradient, friction_hessian, barrier_gradient)

from .test_contact_fdutil import fd_gradient, fd_jacobian, assert_close
from .test_contact_barrier import _two_sheets

DHAT = 0.1
KAPPA = 2.0


def _single_pair(mu_a=0.4, mu_b=0.1):
    """One vertex (body 1) 0.03 m above the interior of a triangle (body 0)."""
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.25, 0.3, 0.03]], float)
    mesh = CollisionMesh.build(4, np.array([[0, 1, 2]], np.int32), edges=np.zeros((0, 2), np.int32),
                               vertex_body=np.array([0, 0, 0, 1]), body_friction=np.array([mu_a, mu_b]))
    return x, mesh


def test_sliding_force_is_coulomb_and_opposes_motion():
    x, mesh = _single_pair()
    cands = find_candidates(x, mesh, DHAT)
    fs = friction_setup(x, cands, mesh, DHAT, KAPPA)
    assert len(fs) == 1
    lam = np.linalg.norm(barrier_gradient(x, cands, mesh, DHAT, KAPPA)[9:12])   # normal force on the vertex
    assert fs.mu_lambda[0] == pytest.approx(0.4 * lam, rel=1e-12)                # pair mu = max(0.4, 0.1)
    eps = 1e-4
    for disp, expect_mag in [([0.01, 0.02, 0.0], 0.4 * lam), ([3e-5, 0, 0], None), ([0.01, 0, 0.005], 0.4 * lam)]:
        y = x.copy()
        y[3] += disp
        g = friction_gradient(y, x, fs, eps)
        f = -g[9:12]                                       # friction force on the sliding vertex
        t = np.array(disp)
        t[2] = 0.0                                         # tangential part of the motion
        mag = np.linalg.norm(f)
        assert mag <= 0.4 * lam * (1 + 1e-12)              # |F| <= mu lambda always
        assert f @ t == pytest.approx(-mag * np.linalg.norm(t), rel=1e-9)   # opposite to the slip
        if expect_mag is not None:
            assert mag == pytest.approx(expect_mag, rel=1e-12)
        else:                                              # static region: linear in the slip
            assert mag == pytest.approx(0.4 * lam * (2 * 3e-5 / eps - (3e-5 / eps) ** 2), rel=1e-9)
        assert_close(g.reshape(4, 3).sum(axis=0), np.zeros(3), abs_=1e-14 * lam)   # momentum balance


@pytest.mark.parametrize("scale", [1e-5, 1e-3])      # inside and outside the smoothing radius eps
def test_friction_fd_on_two_sheets(scale):
    x_prev, mesh = _two_sheets()
    cands = find_candidates(x_prev, mesh, DHAT)
    fs = friction_setup(x_prev, cands, mesh, DHAT, KAPPA)
    assert len(fs) > 10
    eps = 1e-4
    rng = np.random.default_rng(5)
    x = (x_prev + scale * rng.normal(size=x_prev.shape)).ravel()
    h = 1e-3 * scale
    g = friction_gradient(x, x_prev, fs, eps)
    assert_close(g, fd_gradient(lambda y: friction_energy(y, x_prev, fs, eps), x, h=h))
    r, c, v = friction_hessian(x, x_prev, fs, eps, project_psd=False)
    H = sp.coo_matrix((v, (r, c)), shape=(54, 54)).toarray()
    assert_close(H, fd_jacobian(lambda y: friction_gradient(y, x_prev, fs, eps), x, h=h), rel=1e-5)
    w = np.linalg.eigvalsh(H)
    assert w.min() >= -1e-10 * w.max()                 # the smoothed friction Hessian is PSD


def test_frictionless_bodies_have_no_friction_pairs():
    x, mesh = _single_pair(0.0, 0.0)
    fs = friction_setup(x, find_candidates(x, mesh, DHAT), mesh, DHAT, KAPPA)
    assert len(fs) == 0
    assert friction_energy(x + 0.01, x, fs, 1e-4) == 0.0


def test_projected_friction_hessian_equals_unprojected_psd_one():
    """The smoothed friction Hessian is PSD by construction, so the closed-form 2x2 clamp must leave
    it unchanged (a wrong eigen-system in the projection would not)."""
    x_prev, mesh = _two_sheets()
    fs = friction_setup(x_prev, find_candidates(x_prev, mesh, DHAT), mesh, DHAT, KAPPA)
    rng = np.random.default_rng(8)
    for scale in (1e-5, 3e-5, 1e-3):
        x = x_prev + scale * rng.normal(size=x_prev.shape)
        r, c, v = friction_hessian(x, x_prev, fs, 1e-4, project_psd=False)
        A = sp.coo_matrix((v, (r, c)), shape=(54, 54)).toarray()
        r, c, v = friction_hessian(x, x_prev, fs, 1e-4, project_psd=True)
        B = sp.coo_matrix((v, (r, c)), shape=(54, 54)).toarray()
        assert np.abs(A).max() > 0
        assert_close(B, A, rel=1e-12, abs_=1e-12 * np.abs(A).max())
