"""PBNG (seed 001) on the seed's quasistatic cases converges to the Newton solution of the same energy.

The stretched (and twisted) block of seed 001 Sec. 10.1 and the clamped bar sagging under gravity
(Sec. 10.6, where PBD converges to the undeformed bar): Newton is driven to a residual 1e-8 of the
start (its round-off floor here); PBNG's sweeps must reduce the residual by orders of magnitude, end within a small fraction
of the bar's width of Newton's equilibrium, keep every tet positive, and the accelerations must
beat plain PBNG at equal sweeps (the paper's Fig. 9).
"""
import numpy as np
import pytest

from solver_server.blockdescent.quasistatic import lattice_bar, newton_solve, pbng_solve

CELLS = (8, 2, 2)  # small: a PBNG sweep pays an SVD per tet and vertex (see docs/solver.md)


def _newton(prob):
    tr = newton_solve(prob, max_iter=60, tol=1e-8 * prob.residual(prob.x0))
    assert tr.residual[-1] <= 1e-8 * tr.residual[0], tr.residual
    assert prob.elastic.min_tet_volume_ratio(tr.x) > 0.0
    return tr


@pytest.fixture(scope="module")
def stretched():
    prob = lattice_bar(CELLS, stretch=1.5, twist_deg=60.0)
    return prob, _newton(prob)


@pytest.fixture(scope="module")
def sagging():
    prob = lattice_bar(CELLS, youngs_modulus=1.0e5, stretch=1.0, density=1000.0, gravity=(0.0, 0.0, -9.81))
    prob.fixed[:] = prob.x0[:, 0] <= 1e-9  # only the left end clamped
    return prob, _newton(prob)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["chebyshev", "sor"])
def test_pbng_converges_to_newton_on_the_stretched_twisted_block(stretched, mode):
    prob, ref = stretched
    tr = pbng_solve(prob, 1500, mode=mode, every=100)
    assert prob.elastic.min_tet_volume_ratio(tr.x) > 0.0
    assert tr.residual[-1] < 1e-4 * tr.residual[0], tr.residual
    err = np.abs(tr.x - ref.x).max()
    assert err < 1e-3 * 0.1, err  # 0.1% of the bar's 0.1 m width


@pytest.mark.slow
def test_pbng_sags_like_newton_where_pbd_would_stay_rigid(sagging):
    prob, ref = sagging
    tip = prob.x0[:, 0] >= prob.x0[:, 0].max() - 1e-9
    sag = prob.x0[tip, 2].mean() - ref.x[tip, 2].mean()
    assert sag > 0.01, sag  # a visible sag (m): the load is not lost as in PBD
    tr = pbng_solve(prob, 8000, mode="chebyshev", every=1000)  # bending: the slowest mode for Gauss-Seidel
    assert prob.elastic.min_tet_volume_ratio(tr.x) > 0.0
    pb_sag = prob.x0[tip, 2].mean() - tr.x[tip, 2].mean()
    assert abs(pb_sag - sag) < 0.01 * sag, (pb_sag, sag)


def test_acceleration_beats_plain_pbng_at_equal_sweeps(stretched):
    prob, _ = stretched
    plain = pbng_solve(prob, 300, mode="plain", every=300)
    cheb = pbng_solve(prob, 300, mode="chebyshev", every=300)
    sor = pbng_solve(prob, 300, mode="sor", every=300)
    assert cheb.residual[-1] < 0.5 * plain.residual[-1], (cheb.residual, plain.residual)
    assert sor.residual[-1] < 0.5 * plain.residual[-1], (sor.residual, plain.residual)
