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
- ``sand``: Drucker-Prager in Hencky (log) strain with the book's return mapping (§31
  "Drucker-Prager Elastoplasticity") and Tampubolon volume correction (plastic state = diff_log_J);
  StVK-Hencky stress tau = U (2 mu eps + lambda tr(eps) I) U^T.
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
P_TYPE, P_MU, P_LAMBDA, P_DENSITY, P_ALPHA, P_XI, P_THETA_C, P_THETA_S, P_VISC, P_YIELD, P_BULK = range(11)
NPARAM = 11

SNOW_HARDENING_MIN = 0.1
SNOW_HARDENING_MAX = 5.0
TAIT_GAMMA = 7.0
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
    """alpha_DP = sqrt(2/3) 2 sin(phi) / (3 - sin(phi)) (book §31, Klar et al. 2016)."""
    s = math.sin(math.radians(friction_angle_deg))
    return math.sqrt(2.0 / 3.0) * 2.0 * s / (3.0 - s)


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
    return row


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

    # Hencky-strain models: sand (Drucker-Prager) and mud (von Mises)
    for d in range(3):
        s = sig[d]
        if s < SIGMA_FLOOR:
            s = SIGMA_FLOOR
        diag[d] = math.log(s)
    if kind == SAND:
        jtr = sig[0] * sig[1] * sig[2]
        for d in range(3):
            diag[d] += plastic / 3.0
        tr = diag[0] + diag[1] + diag[2]
        if tr >= 0.0:
            diag[0] = 0.0
            diag[1] = 0.0
            diag[2] = 0.0
        else:
            m = tr / 3.0
            nrm = math.sqrt((diag[0] - m) ** 2 + (diag[1] - m) ** 2 + (diag[2] - m) ** 2 + 1e-8)
            dgamma = nrm + (3.0 * lam + 2.0 * mu) / (2.0 * mu) * tr * prm[P_ALPHA]
            if dgamma > 0.0:
                for d in range(3):
                    diag[d] -= dgamma / nrm * (diag[d] - m)
        for d in range(3):
            sig[d] = math.exp(diag[d])
        jnew = sig[0] * sig[1] * sig[2]
        if jtr > 0.0:
            plastic += math.log(jtr) - math.log(jnew)
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
