"""Constitutive guarantees after the return mappings, on real impacts: stresses stay on or inside
each yield surface, snow singular values stay in their clamp range, water keeps no shear."""
import numpy as np
import pytest

from solver_server.backends.mpm_backend import MPMBackend
from solver_server.solvers.mpm.materials import (MU_I_DELTA, MU_I_I0, SINE_MAX, SOLID_FRACTION, inertial_number, lame,
                                        mohr_coulomb_return, mohr_coulomb_sine, mu_of_inertial_number, preset)
from .scenes import granular, scene


def dropped(material, frames=6):
    be = MPMBackend(scene([granular("Body", (0.35, 0.35, 0.05), (0.6, 0.6, 0.3), material)], frames=frames,
                          domain=((0, 0, 0), (1, 1, 1)), friction=0.5))
    for _ in range(frames):
        be.advance()
    return be.solver


def dev_norm(tau):
    tr = np.trace(tau, axis1=1, axis2=2)
    dev = tau - tr[:, None, None] / 3 * np.eye(3)
    return np.linalg.norm(dev, axis=(1, 2)), tr


def mc_excess(tau, sinphi):
    """(tau_max - tau_min) + sin(phi_MC) (tau_max + tau_min) per particle (<= 0 inside the cone)."""
    ev = np.linalg.eigvalsh(tau)
    return (ev[:, 2] - ev[:, 0]) + sinphi * (ev[:, 2] + ev[:, 0]), ev.sum(axis=1)


def test_sand_stress_stays_in_the_mohr_coulomb_cone():
    mat = preset("sand", friction_angle=35.0, particle_spacing=0.025, grain_size=0.0)   # rate-independent
    s = dropped(mat)
    f, tr = mc_excess(s.tau, mohr_coulomb_sine(35.0))
    scale = np.abs(tr).max()
    assert (tr < -1.0).sum() > 100                      # a real compressed pile
    assert np.all(tr <= 1e-9 * scale)                    # no tension
    assert np.all(f <= 1e-9 * scale)                     # inside or on the cone
    assert np.sum(f >= -1e-6 * np.abs(tr)) > 10          # some particles yield (on the cone)
    assert np.any(s.plastic > 0.0)                       # plastic shear strain accumulated


def test_mohr_coulomb_return_mapping():
    """Principal Hencky strains: inside the cone unchanged; outside, projected onto the cone at the
    same volume and Lode angle (deviator scaled); expansion to the stress-free tip."""
    mu, lam = lame(3.5e5, 0.3)
    sinphi = mohr_coulomb_sine(30.0)
    assert sinphi == pytest.approx(np.tan(np.radians(30.0)))
    rng = np.random.default_rng(1)
    n_in = n_out = 0
    for _ in range(400):
        eps = rng.normal(0.0, 1e-2, 3)
        eps -= rng.uniform(0.0, 3e-2)
        before = eps.copy()
        dgamma = mohr_coulomb_return(eps, mu, lam, sinphi)
        tau = 2 * mu * before + lam * before.sum()
        f0 = (tau.max() - tau.min()) + sinphi * (tau.max() + tau.min())
        if before.sum() >= 0:
            assert np.all(eps == 0.0)
            continue
        tau = 2 * mu * eps + lam * eps.sum()
        f1 = (tau.max() - tau.min()) + sinphi * (tau.max() + tau.min())
        assert eps.sum() == pytest.approx(before.sum(), abs=1e-15)         # no plastic volume change
        dev0, dev1 = before - before.mean(), eps - eps.mean()
        if f0 <= 0:
            n_in += 1
            assert np.array_equal(eps, before) and dgamma == 0.0
        else:
            n_out += 1
            assert abs(f1) <= 1e-9 * np.abs(tau).max()                    # on the cone
            k = np.linalg.norm(dev1) / np.linalg.norm(dev0)
            assert 0 <= k < 1 and np.allclose(dev1, k * dev0, atol=1e-15)  # same Lode angle
            assert dgamma == pytest.approx(np.linalg.norm(dev0 - dev1))
    assert n_in > 20 and n_out > 20


def test_mud_deviatoric_stress_is_bounded_by_the_yield_stress():
    mat = preset("mud", yield_stress=200.0, viscosity=0.0, particle_spacing=0.025)
    s = dropped(mat)
    nd, _ = dev_norm(s.tau)
    assert nd.max() <= 200.0 * (1 + 1e-6)
    assert nd.max() >= 0.99 * 200.0 and s.plastic.max() > 0
    # a weak mud slumps, a strong one keeps its 0.25 m height
    strong = dropped(preset("mud", yield_stress=1e5, viscosity=0.0, particle_spacing=0.025), frames=12)
    weak = dropped(preset("mud", yield_stress=20.0, viscosity=0.0, particle_spacing=0.025), frames=12)
    height = lambda sol: np.ptp(sol.x[:, 2])
    assert height(strong) > 0.2 and height(weak) < 0.8 * height(strong)


def test_snow_singular_values_stay_in_the_clamp_and_it_hardens():
    mat = preset("snow", particle_spacing=0.025)
    s = dropped(mat)
    sv = np.linalg.svd(s.F, compute_uv=False)
    assert sv.min() >= 1 - mat.critical_compression - 1e-9
    assert sv.max() <= 1 + mat.critical_stretch + 1e-9
    assert s.plastic.min() < 0.99                        # compacted on impact: J_P < 1 (hardening)


def test_water_keeps_isotropic_deformation_and_no_tension():
    mat = preset("water", particle_spacing=0.025, viscosity=0.0)
    s = dropped(mat)
    off = s.F - np.einsum("nii->n", s.F)[:, None, None] / 3 * np.eye(3)
    assert np.abs(off).max() < 1e-12                     # F = J^(1/3) I
    assert np.linalg.det(s.F).max() <= 1.0 + 1e-12        # no tension (J <= 1)
    nd, tr = dev_norm(s.tau)
    assert nd.max() < 1e-9 * np.abs(tr).max() and tr.max() <= 0


def test_mu_of_i_limits_and_the_inertial_number_of_simple_shear():
    """mu(I) = mu_s + (mu_2 - mu_s) / (1 + I0 / I): mu_s at rest, halfway at I = I0, mu_2 for fast
    dilute flow; I = gamma_dot d / sqrt(p / rho_s) with gamma_dot the simple-shear rate."""
    mu_s = np.tan(np.radians(30.0))
    assert mu_of_inertial_number(mu_s, 0.0) == mu_s
    assert mu_of_inertial_number(mu_s, MU_I_I0) == pytest.approx(mu_s + MU_I_DELTA / 2)
    assert mu_of_inertial_number(mu_s, np.inf) == pytest.approx(mu_s + MU_I_DELTA)
    mu, lam = lame(3.5e5, 0.3)
    rate, d, rho_s, tr = 7.0, 1e-3, 1600.0 / SOLID_FRACTION, -0.01
    C = np.zeros((3, 3))
    C[0, 2] = rate                                     # v_x = rate z, plus a rotation-free volume change
    C[1, 1] = C[2, 2] = -0.5
    p = -(lam + 2 * mu / 3) * tr
    assert inertial_number(C, tr, mu, lam, d, rho_s) == pytest.approx(
        np.sqrt(rate ** 2 + 2 * (0.5 ** 2 / 9 * 6)) * d / np.sqrt(p / rho_s), rel=1e-12)
    C[1, 1] = C[2, 2] = 0.0
    assert inertial_number(C, tr, mu, lam, d, rho_s) == pytest.approx(rate * d / np.sqrt(p / rho_s), rel=1e-12)
    assert inertial_number(C, 0.0, mu, lam, d, rho_s) == np.inf   # no pressure: fully dynamic


def test_mu_i_sand_stress_stays_between_the_static_and_dynamic_cones():
    """With a grain size the cone widens with the shear rate, never beyond mu_2 = mu_s + 0.26."""
    mat = preset("sand", friction_angle=30.0, particle_spacing=0.025, grain_size=2e-3)
    s = dropped(mat)
    scale = None
    f2, tr = mc_excess(s.tau, min(np.tan(np.radians(30.0)) + MU_I_DELTA, SINE_MAX))
    scale = np.abs(tr).max()
    assert (tr < -1.0).sum() > 100
    assert np.all(f2 <= 1e-9 * scale)                   # inside the dynamic cone
    assert np.all(tr <= 1e-9 * scale)
