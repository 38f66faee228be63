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


@njit(cache=True, fastmath=False)
def _cauchy_green(F):
    """The six entries (C00, C11, C22, C01, C02, C12) of C = F^T F for the 3x3 F."""
    return (F[0, 0] * F[0, 0] + F[1, 0] * F[1, 0] + F[2, 0] * F[2, 0],
            F[0, 1] * F[0, 1] + F[1, 1] * F[1, 1] + F[2, 1] * F[2, 1],
            F[0, 2] * F[0, 2] + F[1, 2] * F[1, 2] + F[2, 2] * F[2, 2],
            F[0, 0] * F[0, 1] + F[1, 0] * F[1, 1] + F[2, 0] * F[2, 1],
            F[0, 0] * F[0, 2] + F[1, 0] * F[1, 2] + F[2, 0] * F[2, 2],
            F[0, 1] * F[0, 2] + F[1, 1] * F[1, 2] + F[2, 1] * F[2, 2])


@njit(cache=True, fastmath=False)
def _top_two_eigenvalues_sym3(c00, c01, c02, c11, c12, c22):
    """The two largest eigenvalues (l0 >= l1) of a symmetric 3x3 matrix, by the trigonometric solution
    of its characteristic cubic (absolute accuracy ~ rounding times the matrix norm)."""
    q = (c00 + c11 + c22) / 3.0
    b00 = c00 - q
    b11 = c11 - q
    b22 = c22 - q
    p2 = (b00 * b00 + b11 * b11 + b22 * b22 + 2.0 * (c01 * c01 + c02 * c02 + c12 * c12)) / 6.0
    if p2 <= 1e-300:
        return q, q
    p = math.sqrt(p2)
    det = (b00 * (b11 * b22 - c12 * c12) - c01 * (c01 * b22 - c12 * c02) + c02 * (c01 * c12 - b11 * c02))
    r = 0.5 * det / (p * p2)
    r = min(1.0, max(-1.0, r))
    phi = math.acos(r) / 3.0
    l0 = q + 2.0 * p * math.cos(phi)
    l2 = q + 2.0 * p * math.cos(phi + 2.0 * math.pi / 3.0)
    return l0, 3.0 * q - l0 - l2


@njit(cache=True, fastmath=False)
def psi_of_F(model, mu, lam, F):
    """Energy density psi (J/m^3) at the 3x3 deformation gradient F, without an SVD: the same value
    as psi_sigma at F's signed singular values (tested against it). Neo-Hookean, stable neo-Hookean
    and StVK need only |F|^2, det F and F^T F; fixed corotated needs sum s_i, from the two largest
    eigenvalues of F^T F (s0, s1) and s2 = det F / (s0 s1), which keeps the sign and the accuracy of a
    nearly flat element. +inf where the model is not defined (neo-Hookean with J <= 0). Used by the
    energy kernels, which the line search calls several times per Newton iteration."""
    c00, c11, c22, c01, c02, c12 = _cauchy_green(F)
    J = (F[0, 0] * (F[1, 1] * F[2, 2] - F[1, 2] * F[2, 1]) - F[0, 1] * (F[1, 0] * F[2, 2] - F[1, 2] * F[2, 0])
         + F[0, 2] * (F[1, 0] * F[2, 1] - F[1, 1] * F[2, 0]))
    I = c00 + c11 + c22
    if model == 0:
        if J <= 0.0:
            return np.inf
        lnJ = math.log(J)
        return 0.5 * mu * (I - 3.0) - mu * lnJ + 0.5 * lam * lnJ * lnJ
    if model == 1:
        mu_s, lam_s, alpha, rest = _snh_params(mu, lam)
        return 0.5 * mu_s * (I - 3.0) + 0.5 * lam_s * (J - alpha) ** 2 - 0.5 * mu_s * math.log(I + 1.0) - rest
    if model == 2:
        l0, l1 = _top_two_eigenvalues_sym3(c00, c01, c02, c11, c12, c22)
        s0 = math.sqrt(max(l0, 0.0))
        s1 = math.sqrt(max(l1, 0.0))
        s2 = J / (s0 * s1) if s0 * s1 > 0.0 else 0.0
        # sum (s_i - 1)^2 = |F|^2 - 2 sum s_i + 3
        return mu * (I - 2.0 * (s0 + s1 + s2) + 3.0) + 0.5 * lam * (J - 1.0) ** 2
    e00 = 0.5 * (c00 - 1.0)
    e11 = 0.5 * (c11 - 1.0)
    e22 = 0.5 * (c22 - 1.0)
    tr = e00 + e11 + e22
    ee = e00 * e00 + e11 * e11 + e22 * e22 + 0.5 * (c01 * c01 + c02 * c02 + c12 * c12)
    return mu * ee + 0.5 * lam * tr * tr


@njit(cache=True, fastmath=False)
def stress_of_F(model, mu, lam, F, P):
    """First Piola stress P = d psi / dF (Pa) into the 3x3 P without an SVD, for the models whose
    stress is a polynomial in F and its cofactor cof F = J F^-T (neo-Hookean, stable neo-Hookean,
    StVK). Returns False, leaving P undefined, for fixed corotated (it needs the rotation of F) and
    for an inverted neo-Hookean element; the caller then uses the SVD form."""
    if model == 2:
        return False
    if model == 3:
        c00, c11, c22, c01, c02, c12 = _cauchy_green(F)
        tr = 0.5 * (c00 + c11 + c22 - 3.0)
        s00 = mu * (c00 - 1.0) + lam * tr
        s11 = mu * (c11 - 1.0) + lam * tr
        s22 = mu * (c22 - 1.0) + lam * tr
        s01 = mu * c01
        s02 = mu * c02
        s12 = mu * c12
        for r in range(3):
            f0 = F[r, 0]
            f1 = F[r, 1]
            f2 = F[r, 2]
            P[r, 0] = f0 * s00 + f1 * s01 + f2 * s02
            P[r, 1] = f0 * s01 + f1 * s11 + f2 * s12
            P[r, 2] = f0 * s02 + f1 * s12 + f2 * s22
        return True
    # cofactor matrix of F (dJ/dF)
    k00 = F[1, 1] * F[2, 2] - F[1, 2] * F[2, 1]
    k01 = F[1, 2] * F[2, 0] - F[1, 0] * F[2, 2]
    k02 = F[1, 0] * F[2, 1] - F[1, 1] * F[2, 0]
    k10 = F[0, 2] * F[2, 1] - F[0, 1] * F[2, 2]
    k11 = F[0, 0] * F[2, 2] - F[0, 2] * F[2, 0]
    k12 = F[0, 1] * F[2, 0] - F[0, 0] * F[2, 1]
    k20 = F[0, 1] * F[1, 2] - F[0, 2] * F[1, 1]
    k21 = F[0, 2] * F[1, 0] - F[0, 0] * F[1, 2]
    k22 = F[0, 0] * F[1, 1] - F[0, 1] * F[1, 0]
    J = F[0, 0] * k00 + F[0, 1] * k01 + F[0, 2] * k02
    if model == 0:
        if J <= 0.0:
            return False
        a = mu
        c = (lam * math.log(J) - mu) / J
    else:
        mu_s, lam_s, alpha, rest = _snh_params(mu, lam)
        I = 0.0
        for r in range(3):
            for q in range(3):
                I += F[r, q] * F[r, q]
        a = mu_s * (1.0 - 1.0 / (I + 1.0))
        c = lam_s * (J - alpha)
    P[0, 0] = a * F[0, 0] + c * k00
    P[0, 1] = a * F[0, 1] + c * k01
    P[0, 2] = a * F[0, 2] + c * k02
    P[1, 0] = a * F[1, 0] + c * k10
    P[1, 1] = a * F[1, 1] + c * k11
    P[1, 2] = a * F[1, 2] + c * k12
    P[2, 0] = a * F[2, 0] + c * k20
    P[2, 1] = a * F[2, 1] + c * k21
    P[2, 2] = a * F[2, 2] + c * k22
    return True
