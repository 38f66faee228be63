"""Isotropic hyperelastic energy densities written in the singular values of F.

Every model gives, for one deformation gradient F = U diag(s) V^T (polar SVD, det U = det V = 1,
so s[2] < 0 marks an inverted element):

* psi(s)            energy density, J/m^3 (Pa)
* psi_i             d psi / d s_i (principal stresses, Pa)
* psi_ij            d^2 psi / d s_i d s_j (3x3)
* a_k, b_k          for each pair (i, j) = (0,1), (0,2), (1,2): a = (psi_i - psi_j)/(s_i - s_j) computed
                    analytically (stable when s_i = s_j) and b = (psi_i + psi_j)/(s_i + s_j), the two
                    eigenvalues of the 2x2 "twist/stretch" blocks of dP/dF (book: "Stress derivatives",
                    Stomakhin et al. 2012).

Models (ids used by the kernels):
  0 neo_hookean        the book's form: mu/2 (|F|^2 - 3) - mu ln J + lambda/2 (ln J)^2 (infinite for J <= 0)
  1 stable_neo_hookean Smith et al. 2018: mu'/2 (|F|^2 - 3) + lambda'/2 (J - alpha)^2 - mu'/2 ln(|F|^2 + 1)
                       with alpha = 1 + 3 mu'/(4 lambda'), mu' = 4/3 mu, lambda' = lambda + 5/6 mu (the
                       reparametrisation that makes the rest Hessian match linear elasticity), minus its rest
                       value so psi(I) = 0.
  2 fixed_corotated    Stomakhin 2012: mu sum (s_i - 1)^2 + lambda/2 (J - 1)^2
  3 stvk               Green strain: mu |E|^2 + lambda/2 tr(E)^2, E = (F^T F - I)/2
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

MODEL_IDS = {"neo_hookean": 0, "stable_neo_hookean": 1, "fixed_corotated": 2, "stvk": 3}
PAIRS = ((0, 1), (0, 2), (1, 2))


def lame(youngs_modulus: float, poisson_ratio: float) -> tuple:
    """Young's modulus (Pa) and Poisson ratio -> Lame parameters (mu, lambda) in Pa."""
    mu = youngs_modulus / (2.0 * (1.0 + poisson_ratio))
    lam = youngs_modulus * poisson_ratio / ((1.0 + poisson_ratio) * (1.0 - 2.0 * poisson_ratio))
    return mu, lam


@njit(cache=True, fastmath=False)
def _snh_params(mu, lam):
    mu_s = 4.0 / 3.0 * mu
    lam_s = lam + 5.0 / 6.0 * mu
    alpha = 1.0 + 0.75 * mu_s / lam_s
    rest = 0.5 * lam_s * (1.0 - alpha) ** 2 - 0.5 * mu_s * math.log(4.0)
    return mu_s, lam_s, alpha, rest


@njit(cache=True, fastmath=False)
def psi_sigma(model, mu, lam, s, grad, hess, ab):
    """Energy density at singular values ``s`` (3,); fills grad (3,), hess (3,3), ab (3,2).

    Returns +inf (and leaves the outputs undefined) where the model is not defined (neo-Hookean
    with J <= 0)."""
    s0, s1, s2 = s[0], s[1], s[2]
    J = s0 * s1 * s2
    Js = np.empty(3)  # J / s_i = product of the other two
    Js[0] = s1 * s2
    Js[1] = s0 * s2
    Js[2] = s0 * s1
    if model == 0:
        if J <= 0.0:
            return np.inf
        lnJ = math.log(J)
        I = s0 * s0 + s1 * s1 + s2 * s2
        val = 0.5 * mu * (I - 3.0) - mu * lnJ + 0.5 * lam * lnJ * lnJ
        for i in range(3):
            grad[i] = mu * (s[i] - 1.0 / s[i]) + lam * lnJ / s[i]
            for j in range(3):
                if i == j:
                    hess[i, i] = mu * (1.0 + 1.0 / (s[i] * s[i])) + lam * (1.0 - lnJ) / (s[i] * s[i])
                else:
                    hess[i, j] = lam / (s[i] * s[j])
        for k in range(3):
            i = 0 if k < 2 else 1
            j = 1 if k == 0 else 2
            ab[k, 0] = mu + (mu - lam * lnJ) / (s[i] * s[j])
        _fill_b(s, grad, ab)
        return val
    elif model == 1:
        mu_s, lam_s, alpha, rest = _snh_params(mu, lam)
        I = s0 * s0 + s1 * s1 + s2 * s2
        val = 0.5 * mu_s * (I - 3.0) + 0.5 * lam_s * (J - alpha) ** 2 - 0.5 * mu_s * math.log(I + 1.0) - rest
        c = mu_s / (I + 1.0)
        for i in range(3):
            grad[i] = mu_s * s[i] + lam_s * (J - alpha) * Js[i] - c * s[i]
        for i in range(3):
            for j in range(3):
                h = lam_s * Js[i] * Js[j] + 2.0 * c / (I + 1.0) * s[i] * s[j]
                if i == j:
                    h += mu_s - c
                else:
                    k = 3 - i - j
                    h += lam_s * (J - alpha) * s[k]
                hess[i, j] = h
        for k in range(3):
            i = 0 if k < 2 else 1
            j = 1 if k == 0 else 2
            o = 3 - i - j
            ab[k, 0] = mu_s - c - lam_s * (J - alpha) * s[o]
        _fill_b(s, grad, ab)
        return val
    elif model == 2:
        val = mu * ((s0 - 1.0) ** 2 + (s1 - 1.0) ** 2 + (s2 - 1.0) ** 2) + 0.5 * lam * (J - 1.0) ** 2
        for i in range(3):
            grad[i] = 2.0 * mu * (s[i] - 1.0) + lam * (J - 1.0) * Js[i]
        for i in range(3):
            for j in range(3):
                h = lam * Js[i] * Js[j]
                if i == j:
                    h += 2.0 * mu
                else:
                    h += lam * (J - 1.0) * s[3 - i - j]
                hess[i, j] = h
        for k in range(3):
            i = 0 if k < 2 else 1
            j = 1 if k == 0 else 2
            ab[k, 0] = 2.0 * mu - lam * (J - 1.0) * s[3 - i - j]
        _fill_b(s, grad, ab)
        return val
    else:
        e = np.empty(3)
        for i in range(3):
            e[i] = 0.5 * (s[i] * s[i] - 1.0)
        tr = e[0] + e[1] + e[2]
        val = mu * (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]) + 0.5 * lam * tr * tr
        for i in range(3):
            grad[i] = (2.0 * mu * e[i] + lam * tr) * s[i]
        for i in range(3):
            for j in range(3):
                h = lam * s[i] * s[j]
                if i == j:
                    h += 2.0 * mu * s[i] * s[i] + 2.0 * mu * e[i] + lam * tr
                hess[i, j] = h
        for k in range(3):
            i = 0 if k < 2 else 1
            j = 1 if k == 0 else 2
            ab[k, 0] = mu * (s[i] * s[i] + s[i] * s[j] + s[j] * s[j] - 1.0) + lam * tr
        _fill_b(s, grad, ab)
        return val


@njit(cache=True, fastmath=False)
def _fill_b(s, grad, ab):
    for k in range(3):
        i = 0 if k < 2 else 1
        j = 1 if k == 0 else 2
        den = s[i] + s[j]
        if abs(den) < 1e-6:
            den = 1e-6 if den >= 0.0 else -1e-6
        ab[k, 1] = (grad[i] + grad[j]) / den
