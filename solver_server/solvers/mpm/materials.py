"""MPM materials: presets, packed parameters and the per-particle constitutive update.

Every particle stores its deformation gradient F (the *elastic* part F_E, book §28 "F = F_E F_P"),
one scalar of plastic state and a material index. ``constitutive`` runs once per particle per step
right after G2P: it applies the material's return mapping to the trial F_E and returns the Kirchhoff
stress tau = P F^T (Pa) that the next P2G scatters. Doing both on one SVD keeps the cost at one SVD
per particle per step.

Models (SI units; mu, lambda are the Lamé parameters from E and nu):
- ``elastic`` (jelly): fixed corotated, tau = 2 mu (F - R) F^T + lambda (J - 1) J I.
- ``snow``: Stomakhin et al. 2013 — singular values clamped to [1 - theta_c, 1 + theta_s]; the
  plastic volume ratio J_P (plastic state) hardens mu, lambda by h = exp(xi (1 - J_P)), clamped to
  [0.1, 5] for robustness; fixed corotated stress.
- ``sand``: Mohr-Coulomb friction in Hencky (log) strain, returned like the book's Drucker-Prager
  mapping (§31 "Drucker-Prager Elastoplasticity", Klar et al. 2016): expansion goes to the cone tip
  (stress free), otherwise the deviatoric log strain is scaled towards the hydrostatic axis at fixed
  volume (no plastic dilatancy) until the principal stresses satisfy
  tau_max - tau_min <= -sin(phi_MC) (tau_max + tau_min).
  StVK-Hencky stress tau = U (2 mu eps + lambda tr(eps) I) U^T.
  Why not the book's Drucker-Prager cone: with alpha = sqrt(2/3) 2 sin(phi) / (3 - sin(phi)) the cone
  matches Mohr-Coulomb only in triaxial compression and circumscribes it elsewhere. A slope is
  locally in plane strain, where that cone acts like Mohr-Coulomb with sin(phi_eff) = 3 alpha / sqrt(2)
  (phi_eff = 44 deg for phi = 30, 71 deg for phi = 40): slopes far steeper than phi stand. With
  Mohr-Coulomb the steepest stable slope of a cohesionless material is phi itself, whatever the
  intermediate principal stress (infinite-slope argument), in 2D sections and in 3D cones alike.
  The cone is calibrated for flowing sand (mohr_coulomb_sine: sin(phi_MC) = tan(phi), Davis 1968).
  Plastic state = accumulated plastic shear (log) strain. No Tampubolon volume correction: it left a
  third of a settled pile stress free (dilated, waiting to be recompacted) and flattened piles by
  a further 1.5 deg (docs/mpm.md).
  Rate dependence (``Material.grain_size`` d > 0): the friction coefficient of the cone follows the
  mu(I) rheology (GDR MiDi 2004, Jop et al. 2006), mu(I) = mu_s + (mu_2 - mu_s) / (1 + I_0 / I) with
  the inertial number I = gamma_dot d / sqrt(p / rho_s), mu_s = tan(phi) (the pile angle, as above)
  and the shear rate gamma_dot = sqrt(2 dev(D) : dev(D)) of the APIC velocity gradient (D = sym C).
  sin(phi_MC) = mu(I) replaces tan(phi) in the return (same calibration as the static cone).
- ``water``: weakly compressible, F reset to J^(1/3) I each step (no shear memory); Tait pressure
  p = K/7 (J^-7 - 1) with K = E / (3 (1 - 2 nu)), no tension (J capped at 1); viscous Kirchhoff
  stress 2 eta J sym(grad v) with grad v ~ C (APIC).
- ``mud`` (plasticine): von Mises on Hencky strain with yield stress tau_Y (book §28 "von Mises
  Yield Criterion, Log-Strain Formulation") plus optional viscosity; plastic state = accumulated
  plastic log strain.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from numba import njit

from protocol.scene import Material
from .linalg3 import svd3, compose_usv, compose_udu

ELASTIC, SNOW, SAND, WATER, MUD = 0, 1, 2, 3, 4
CODES = {"elastic": ELASTIC, "snow": SNOW, "sand": SAND, "water": WATER, "mud": MUD}

# column layout of the packed parameter table (one row per material)
(P_TYPE, P_MU, P_LAMBDA, P_DENSITY, P_ALPHA, P_XI, P_THETA_C, P_THETA_S, P_VISC, P_YIELD, P_BULK, P_SINPHI,
 P_GRAIN, P_MU_S) = range(14)
NPARAM = 14

MU_I_DELTA = 0.26
"""mu_2 - mu_s of the mu(I) rheology (Jop, Forterre & Pouliquen 2006, glass beads:
tan 32.76 deg - tan 20.9 deg = 0.26): the friction gained by fast, dilute flow."""
MU_I_I0 = 0.279
"""I_0 of the mu(I) rheology (Jop et al. 2006): the inertial number at which half of MU_I_DELTA is
reached."""
SOLID_FRACTION = 0.6
"""Grain density rho_s = Material.density / SOLID_FRACTION (a random packing of sand grains: the
material's density is the bulk density)."""

SNOW_HARDENING_MIN = 0.1
SNOW_HARDENING_MAX = 5.0
TAIT_GAMMA = 7.0
SINE_MAX = 0.97
"""Largest sin(phi_MC) (phi_MC = 76 deg): keeps the cone open for friction angles near 45 deg and above."""
SIGMA_FLOOR = 0.05  # singular value floor before taking logs (book's Drucker-Prager code)

PRESETS = {
    "elastic": dict(mpm_material="elastic", density=1000.0, youngs_modulus=5.0e4, poisson_ratio=0.3),
    "snow": dict(mpm_material="snow", density=400.0, youngs_modulus=1.4e5, poisson_ratio=0.2, hardening=10.0,
                 critical_compression=2.5e-2, critical_stretch=7.5e-3),
    "sand": dict(mpm_material="sand", density=1600.0, youngs_modulus=3.537e5, poisson_ratio=0.3, friction_angle=30.0),
    "water": dict(mpm_material="water", density=1000.0, youngs_modulus=1.0e5, poisson_ratio=0.3, viscosity=1.0e-3),
    "mud": dict(mpm_material="mud", density=1800.0, youngs_modulus=2.0e5, poisson_ratio=0.35, yield_stress=1.0e3,
                viscosity=5.0),
}


def preset(name: str, **overrides) -> Material:
    """A Material with recommended MPM values for ``name`` (elastic, snow, sand, water, mud)."""
    if name not in PRESETS:
        raise ValueError(f"unknown MPM preset {name!r}; use one of {sorted(PRESETS)}")
    values = dict(PRESETS[name])
    values.update(overrides)
    return dataclasses.replace(Material(), **values)


def lame(E: float, nu: float) -> tuple:
    """Lamé parameters (mu, lambda) in Pa from Young's modulus E (Pa) and Poisson ratio nu."""
    return E / (2.0 * (1.0 + nu)), E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))


def drucker_prager_alpha(friction_angle_deg: float) -> float:
    """alpha_DP = sqrt(2/3) 2 sin(phi) / (3 - sin(phi)) (book §31, Klar et al. 2016): the Drucker-Prager
    cone through the Mohr-Coulomb compression meridian. Kept for reference and the benchmark; the
    sand kernel uses Mohr-Coulomb (sin phi) directly, see the module docstring."""
    s = math.sin(math.radians(friction_angle_deg))
    return math.sqrt(2.0 / 3.0) * 2.0 * s / (3.0 - s)


def mohr_coulomb_sine(friction_angle_deg: float) -> float:
    """sin(phi_MC) of the Mohr-Coulomb cone for a pile slope (angle of repose) of phi degrees.

    The return mapping is non-dilatant (plastic flow at constant volume, like Klar et al.'s), so a
    flowing layer slides along planes of maximum shear, where the stress ratio is
    tau / sigma_n = sin(phi_MC) rather than tan(phi_MC) (Davis 1968). A layer flowing down a slope of
    angle beta has tau / sigma_n = tan(beta) on slope-parallel planes, so it stops at
    tan(beta) = sin(phi_MC): the cone is set to sin(phi_MC) = tan(phi), capped at SINE_MAX (phi
    at or above ~44 deg)."""
    return min(math.tan(math.radians(friction_angle_deg)), SINE_MAX)


def pack(material: Material) -> np.ndarray:
    """One row of the packed parameter table for ``material``."""
    mu, lam = lame(material.youngs_modulus, material.poisson_ratio)
    row = np.zeros(NPARAM)
    row[P_TYPE] = CODES[material.mpm_material]
    row[P_MU] = mu
    row[P_LAMBDA] = lam
    row[P_DENSITY] = material.density
    row[P_ALPHA] = drucker_prager_alpha(material.friction_angle)
    row[P_XI] = material.hardening
    row[P_THETA_C] = material.critical_compression
    row[P_THETA_S] = material.critical_stretch
    row[P_VISC] = material.viscosity
    row[P_YIELD] = material.yield_stress
    row[P_BULK] = material.youngs_modulus / (3.0 * (1.0 - 2.0 * material.poisson_ratio))
    row[P_SINPHI] = mohr_coulomb_sine(material.friction_angle)
    row[P_GRAIN] = material.grain_size if material.mpm_material == "sand" else 0.0
    row[P_MU_S] = math.tan(math.radians(material.friction_angle))
    return row


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def mu_of_inertial_number(mu_s, inertial):
    """mu(I) = mu_s + MU_I_DELTA / (1 + I_0 / I) (dimensionless; I >= 0, I = inf gives mu_2)."""
    if inertial <= 0.0:
        return mu_s
    return mu_s + MU_I_DELTA / (1.0 + MU_I_I0 / inertial)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def inertial_number(C, eps_trace, mu, lam, grain, rho_s):
    """I = gamma_dot d / sqrt(p / rho_s) for the velocity gradient C (1/s), the trial Hencky volume
    strain eps_trace (p = -(lam + 2 mu / 3) tr eps, Pa), grain size d (m) and grain density rho_s
    (kg/m^3); inf when the pressure is not positive (loose, flying sand)."""
    tr = (C[0, 0] + C[1, 1] + C[2, 2]) / 3.0
    s = 0.0
    for i in range(3):
        for j in range(3):
            d = 0.5 * (C[i, j] + C[j, i])
            if i == j:
                d -= tr
            s += d * d
    gamma_dot = math.sqrt(2.0 * s)
    p = -(lam + 2.0 * mu / 3.0) * eps_trace
    if p <= 0.0:
        return math.inf
    return gamma_dot * grain / math.sqrt(p / rho_s)


def wave_speed(material: Material) -> float:
    """Fastest elastic wave speed (m/s) the material can carry, for the CFL rule: the P-wave speed
    sqrt((lambda + 2 mu) h / rho), h the largest snow hardening; sqrt(K / rho) for water."""
    mu, lam = lame(material.youngs_modulus, material.poisson_ratio)
    rho = material.density
    if material.mpm_material == "water":
        return math.sqrt(material.youngs_modulus / (3.0 * (1.0 - 2.0 * material.poisson_ratio)) / rho)
    h = SNOW_HARDENING_MAX if material.mpm_material == "snow" else 1.0
    return math.sqrt((lam + 2.0 * mu) * h / rho)


def initial_plastic_state(material: Material) -> float:
    """Plastic scalar at rest: J_P = 1 for snow, 0 otherwise."""
    return 1.0 if material.mpm_material == "snow" else 0.0


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def mohr_coulomb_return(eps, mu, lam, sinphi):
    """Return-map the principal Hencky strains eps (3,) in place onto the cohesionless Mohr-Coulomb
    cone for Lame parameters mu, lam (Pa) and sin(phi); returns the plastic shear strain removed.

    Stresses tau_i = 2 mu eps_i + lam tr(eps) (tension positive). Expansion (tr eps >= 0): cone tip,
    eps = 0 (book §31 case II). Otherwise, with m = tr/3 and the deviator e = eps - m, the yield
    function f = (tau_max - tau_min) + sin(phi) (tau_max + tau_min) is linear in a scale k of the
    deviator: f(k) = 2 mu k D + sin(phi) (4 mu + 6 lam) m with D = e_max (1 + sin) - e_min (1 - sin)
    >= 0. If f(1) > 0 the deviator is scaled by k = -sin(phi) (4 mu + 6 lam) m / (2 mu D), which
    puts the stress on the cone at the same volume and Lode angle (radial return, no dilatancy,
    as Klar et al.'s Drucker-Prager mapping)."""
    tr = eps[0] + eps[1] + eps[2]
    if tr >= 0.0:
        nrm = math.sqrt(eps[0] * eps[0] + eps[1] * eps[1] + eps[2] * eps[2])
        eps[0] = 0.0
        eps[1] = 0.0
        eps[2] = 0.0
        return nrm
    m = tr / 3.0
    e0 = eps[0] - m
    e1 = eps[1] - m
    e2 = eps[2] - m
    emax = max(e0, max(e1, e2))
    emin = min(e0, min(e1, e2))
    dev = 2.0 * mu * (emax * (1.0 + sinphi) - emin * (1.0 - sinphi))
    press = -sinphi * (4.0 * mu + 6.0 * lam) * m  # > 0: the cone's radius at this volume
    if dev <= press:
        return 0.0
    k = press / dev
    eps[0] = m + k * e0
    eps[1] = m + k * e1
    eps[2] = m + k * e2
    return (1.0 - k) * math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)


@njit(cache=True, fastmath=False, error_model="numpy")
def constitutive(F, C, plastic, prm, U, sig, V, work, diag, tau):
    """Return-map the trial elastic F (3, 3) in place for the material row ``prm`` and write the
    Kirchhoff stress (Pa) into tau (3, 3). C is the APIC velocity gradient (1/s) for viscosity.
    U, V, work (3, 3) and sig, diag (3,) are scratch. Returns the new plastic scalar."""
    kind = int(prm[P_TYPE])
    mu = prm[P_MU]
    lam = prm[P_LAMBDA]
    if kind == WATER:
        J = (F[0, 0] * (F[1, 1] * F[2, 2] - F[1, 2] * F[2, 1])
             - F[0, 1] * (F[1, 0] * F[2, 2] - F[1, 2] * F[2, 0])
             + F[0, 2] * (F[1, 0] * F[2, 1] - F[1, 1] * F[2, 0]))
        if J > 1.0:
            J = 1.0
        if J < 0.1:
            J = 0.1
        c = J ** (1.0 / 3.0)
        for i in range(3):
            for j in range(3):
                F[i, j] = c if i == j else 0.0
        p = prm[P_BULK] / TAIT_GAMMA * (J ** (-TAIT_GAMMA) - 1.0)
        eta = prm[P_VISC]
        for i in range(3):
            for j in range(3):
                tau[i, j] = eta * J * (C[i, j] + C[j, i])
            tau[i, i] -= J * p
        return plastic

    svd3(F, U, sig, V, work)
    if kind == ELASTIC or kind == SNOW:
        if kind == SNOW:
            lo = 1.0 - prm[P_THETA_C]
            hi = 1.0 + prm[P_THETA_S]
            jold = sig[0] * sig[1] * sig[2]
            for d in range(3):
                s = sig[d]
                if s < lo:
                    s = lo
                elif s > hi:
                    s = hi
                sig[d] = s
            jnew = sig[0] * sig[1] * sig[2]
            plastic = plastic * jold / jnew
            compose_usv(U, sig, V, F)
            h = math.exp(prm[P_XI] * (1.0 - plastic))
            if h < SNOW_HARDENING_MIN:
                h = SNOW_HARDENING_MIN
            elif h > SNOW_HARDENING_MAX:
                h = SNOW_HARDENING_MAX
            mu *= h
            lam *= h
        J = sig[0] * sig[1] * sig[2]
        for d in range(3):
            diag[d] = 2.0 * mu * (sig[d] - 1.0) * sig[d] + lam * (J - 1.0) * J
        compose_udu(U, diag, tau)
        return plastic

    # Hencky-strain models: sand (Mohr-Coulomb) and mud (von Mises)
    for d in range(3):
        s = sig[d]
        if s < SIGMA_FLOOR:
            s = SIGMA_FLOOR
        diag[d] = math.log(s)
    if kind == SAND:
        sinphi = prm[P_SINPHI]
        if prm[P_GRAIN] > 0.0:
            inertial = inertial_number(C, diag[0] + diag[1] + diag[2], mu, lam, prm[P_GRAIN],
                                       prm[P_DENSITY] / SOLID_FRACTION)
            sinphi = min(mu_of_inertial_number(prm[P_MU_S], inertial), SINE_MAX)
        plastic += mohr_coulomb_return(diag, mu, lam, sinphi)
        for d in range(3):
            sig[d] = math.exp(diag[d])
        compose_usv(U, sig, V, F)
    else:  # MUD
        m = (diag[0] + diag[1] + diag[2]) / 3.0
        nrm = math.sqrt((diag[0] - m) ** 2 + (diag[1] - m) ** 2 + (diag[2] - m) ** 2)
        dgamma = nrm - prm[P_YIELD] / (2.0 * mu)
        if dgamma > 0.0 and nrm > 0.0:
            for d in range(3):
                diag[d] -= dgamma / nrm * (diag[d] - m)
            plastic += dgamma
            for d in range(3):
                sig[d] = math.exp(diag[d])
            compose_usv(U, sig, V, F)
    tr = diag[0] + diag[1] + diag[2]
    for d in range(3):
        diag[d] = 2.0 * mu * diag[d] + lam * tr
    compose_udu(U, diag, tau)
    eta = prm[P_VISC]
    if kind == MUD and eta > 0.0:
        J = math.exp(tr)
        for i in range(3):
            for j in range(3):
                tau[i, j] += eta * J * (C[i, j] + C[j, i])
    return plastic
