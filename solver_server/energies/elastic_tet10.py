"""Quadratic (10-node) tetrahedral finite elements for solids (``Material.element = "quadratic"``).

Why: linear tets have a constant F per element, so a bending field (strain linear across the
section) is only representable with spurious shear and a clamped beam of linear tets is far too
stiff ("shear/bending locking"; 44% short of Euler-Bernoulli at 20x2x2 cubes of 6 tets). Quadratic
tets carry a linear strain field and bend correctly at coarse resolution (tests/ipc/test_tet10.py).

Node order (T, 10): corners 0..3, then the mid-edge nodes of edges EDGES = (0,1), (1,2), (0,2), (0,3),
(1,3), (2,3). The rest element is straight-sided (mid-edge nodes at the edge midpoints), so the
barycentric gradients grad L_a are constant: grad L_{1,2,3} are the rows of D_m^{-1} (as for the
linear tet) and grad L_0 = -their sum. Shape functions N_a = L_a (2 L_a - 1) (corners) and
N_ab = 4 L_a L_b (mid-edges); F(L) = sum_n x_n (dN_n/dX)^T varies linearly over the element.

Energy: sum_e sum_q w_q psi(F(L_q)) with the 4-point degree-2 rule (w_q = V_e / 4), exact for the
linearised stiffness. psi and the per-point PSD-clamped dP/dF come from the same kernels as the
linear tet (isotropic_models.psi_sigma, elastic_tet.dPdF_projected), so every element Hessian
sum_q w_q B_q^T (dP/dF)_q B_q is PSD. Units: positions m, mu/lam Pa, volumes m^3, energy J.

Volumetric term ("mixed", the default): with the full 4-point rule a near-incompressible solid
(nu -> 0.5) still locks, because every quadrature point carries its own stiff volume constraint. The
mixed element keeps each point's energy but swaps the model's volumetric part U(J) (lam/2 (ln J)^2
neo-Hookean, lam/2 (J - 1)^2 stable neo-Hookean / fixed corotated; :func:`vol_energy`) for U of the
element's mean dilatation Jbar = mean_q J_q (mean-dilatation / P2-P0 integration):

    E_e = sum_q w_q [psi(F_q) - U(J_q)] + V_e U(Jbar).

At small strain this is linear elasticity with lam/2 (tr eps)^2 integrated at one point and
mu eps:eps at four (no zero-energy mode); a homogeneous deformation gives exactly psi. Hessian: per
point the SVD-frame blocks of psi - U and of U'(Jbar) J(F) (from d^2 J / dF^2), each PSD-clamped,
plus V max(U''(Jbar), 0) grad Jbar grad Jbar^T: PSD. StVK (its volume term is not a function of J)
and ``mixed=False`` use the plain 4-point rule.

Inversion: the line search rejects any state where det F <= 0 at one of the CHECK points (the 4
quadrature points, the 4 corners and the 6 mid-edge points); see :func:`tet10_min_det`.
det F is a cubic polynomial over a curved element, so positivity at those 14 points is what is
enforced, not positivity everywhere inside the element.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver_server.threads import ordered_sum

from .elastic_tet import dPdF_projected
from .fem_common import polar_svd
from .isotropic_models import psi_sigma

EDGES = np.array([[0, 1], [1, 2], [0, 2], [0, 3], [1, 3], [2, 3]], np.int32)

_QA = 0.5854101966249685
_QB = 0.1381966011250105
QUAD_L = np.array([[_QA, _QB, _QB, _QB], [_QB, _QA, _QB, _QB], [_QB, _QB, _QA, _QB], [_QB, _QB, _QB, _QA]])
"""Barycentric coordinates (4, 4) of the 4-point degree-2 rule (equal weights V/4)."""

CHECK_L = np.concatenate([QUAD_L, np.eye(4),
                          0.5 * (np.eye(4)[EDGES[:, 0]] + np.eye(4)[EDGES[:, 1]])])
"""Barycentric coordinates (14, 4) where det F > 0 is required: quadrature points, corners, mid-edges."""


def add_midedge_nodes(nodes: np.ndarray, tets: np.ndarray) -> tuple:
    """Quadratic mesh from a linear one: (nodes10 (N + M, 3), tets10 (T, 10) int32). The M new
    nodes are the midpoints of the unique tet edges, appended after the N given nodes (so corner
    indices, and the artist's vertices first, are unchanged)."""
    tets = np.asarray(tets, np.int64)
    N = len(nodes)
    e = np.sort(tets[:, EDGES].reshape(-1, 2), axis=1)
    uniq, inv = np.unique(e[:, 0] * N + e[:, 1], return_inverse=True)
    a, b = uniq // N, uniq % N
    mid = 0.5 * (nodes[a] + nodes[b])
    t10 = np.concatenate([tets, N + inv.reshape(-1, 6)], axis=1).astype(np.int32)
    return np.concatenate([nodes, mid]), t10


def lumped_mass(tets10: np.ndarray, vol: np.ndarray, density: float, n_nodes: int) -> np.ndarray:
    """HRZ-lumped mass (kg) per node: the diagonal of the consistent T10 mass matrix (corner
    6/420 rho V, mid-edge 32/420 rho V) rescaled to the element mass: rho V / 36 per corner,
    4 rho V / 27 per mid-edge node (row-sum lumping would give the corners negative mass)."""
    m = np.zeros(n_nodes)
    np.add.at(m, tets10[:, :4].ravel(), np.repeat(density * vol / 36.0, 4))
    np.add.at(m, tets10[:, 4:].ravel(), np.repeat(density * vol * 4.0 / 27.0, 6))
    return m


@njit(cache=True, fastmath=False)
def _grad_bary(Dm_inv):
    """(4, 3) constant gradients grad L_a (1/m) of the rest element."""
    g = np.empty((4, 3))
    for j in range(3):
        g[0, j] = -(Dm_inv[0, j] + Dm_inv[1, j] + Dm_inv[2, j])
        for a in range(3):
            g[a + 1, j] = Dm_inv[a, j]
    return g


@njit(cache=True, fastmath=False)
def shape_gradients(Dm_inv, L):
    """(10, 3) dN_n/dX (1/m) at barycentric point L (4,)."""
    gL = _grad_bary(Dm_inv)
    d = np.empty((10, 3))
    for a in range(4):
        for j in range(3):
            d[a, j] = (4.0 * L[a] - 1.0) * gL[a, j]
    for k in range(6):
        a = EDGES[k, 0]
        b = EDGES[k, 1]
        for j in range(3):
            d[4 + k, j] = 4.0 * (L[b] * gL[a, j] + L[a] * gL[b, j])
    return d


@njit(cache=True, fastmath=False)
def vol_energy(model, lam, J):
    """The model's volumetric function U(J) (Pa) and its first two J-derivatives: lam/2 (ln J)^2 for
    neo-Hookean (inf for J <= 0), lam/2 (J - 1)^2 for stable neo-Hookean and fixed corotated. psi - U
    stays bounded below for these three (stable neo-Hookean keeps 5 mu / 6 of its volume stiffness per
    point). StVK's volume term is not a function of J: it has no mixed form (see ``uses_mixed``)."""
    if model == 0:
        if J <= 0.0:
            return np.inf, 0.0, 0.0
        lnJ = np.log(J)
        return 0.5 * lam * lnJ * lnJ, lam * lnJ / J, lam * (1.0 - lnJ) / (J * J)
    return 0.5 * lam * (J - 1.0) ** 2, lam * (J - 1.0), lam


@njit(cache=True, fastmath=False)
def uses_mixed(model, mixed):
    """The mean-dilatation term applies to neo-Hookean, stable neo-Hookean and fixed corotated."""
    return mixed and model != 3


@njit(cache=True, fastmath=False)
def _sub_vol(model, lam, s, g, h, ab):
    """Subtract the model's U(J) from a singular-value energy's (g, h, ab) in place; returns U (Pa)."""
    J = s[0] * s[1] * s[2]
    U, U1, U2 = vol_energy(model, lam, J)
    Js = np.array([s[1] * s[2], s[0] * s[2], s[0] * s[1]])
    for i in range(3):
        g[i] -= U1 * Js[i]
        for j in range(3):
            h[i, j] -= U2 * Js[i] * Js[j]
            if i != j:
                h[i, j] -= U1 * s[3 - i - j]
    for k in range(3):
        m = 2 - k  # the index not in PAIRS[k] = (0,1), (0,2), (1,2)
        ab[k, 0] += U1 * s[m]
        ab[k, 1] -= U1 * s[m]
    return U


@njit(cache=True, fastmath=False)
def _det_sigma(c, s, g, h, ab):
    """(g, h, ab) of f = c J(F) in singular values (J = s0 s1 s2)."""
    for i in range(3):
        g[i] = c * s[(i + 1) % 3] * s[(i + 2) % 3]
        for j in range(3):
            h[i, j] = 0.0 if i == j else c * s[3 - i - j]
    for k in range(3):
        m = 2 - k
        ab[k, 0] = -c * s[m]
        ab[k, 1] = c * s[m]


@njit(cache=True, fastmath=False)
def _mean_J(x, t, Dm_inv):
    acc = 0.0
    for q in range(4):
        acc += np.linalg.det(_F(x, t, shape_gradients(Dm_inv, QUAD_L[q])))
    return 0.25 * acc


@njit(cache=True, fastmath=False)
def _F(x, t, dN):
    F = np.zeros((3, 3))
    for n in range(10):
        v = t[n]
        for c in range(3):
            xc = x[v, c]
            for j in range(3):
                F[c, j] += xc * dN[n, j]
    return F


@njit(cache=True, fastmath=False, parallel=True)
def tet10_energy(x, tets, Dm_inv, vol, mu, lam, model, mixed):
    """Total elastic energy (J); +inf if the model is undefined at a quadrature point (neo-Hookean, J <= 0).
    ``mixed``: mean-dilatation volumetric term (module doc)."""
    T = tets.shape[0]
    out = np.empty(T)
    for e in prange(T):
        g = np.empty(3)
        h = np.empty((3, 3))
        ab = np.empty((3, 2))
        acc = 0.0
        mix = uses_mixed(model[e], mixed)
        for q in range(4):
            F = _F(x, tets[e], shape_gradients(Dm_inv[e], QUAD_L[q]))
            U, s, V = polar_svd(F)
            p = psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
            if mix and np.isfinite(p):
                p -= _sub_vol(model[e], lam[e], s, g, h, ab)
            acc += p
        out[e] = 0.25 * vol[e] * acc
        if mix:
            out[e] += vol[e] * vol_energy(model[e], lam[e], _mean_J(x, tets[e], Dm_inv[e]))[0]
    return ordered_sum(out)


@njit(cache=True, fastmath=False, parallel=True)
def tet10_gradient_elems(x, tets, Dm_inv, vol, mu, lam, model, mixed):
    """Per-element gradients (T, 30): dE/dx of the element's ten nodes (N)."""
    T = tets.shape[0]
    out = np.zeros((T, 30))
    for e in prange(T):
        g = np.empty(3)
        h = np.empty((3, 3))
        ab = np.empty((3, 2))
        w = 0.25 * vol[e]
        mix = uses_mixed(model[e], mixed)
        cJ = vol_energy(model[e], lam[e], _mean_J(x, tets[e], Dm_inv[e]))[1] if mix else 0.0
        for q in range(4):
            dN = shape_gradients(Dm_inv[e], QUAD_L[q])
            F = _F(x, tets[e], dN)
            U, s, V = polar_svd(F)
            psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
            if mix:
                _sub_vol(model[e], lam[e], s, g, h, ab)
                for i in range(3):
                    g[i] += cJ * s[(i + 1) % 3] * s[(i + 2) % 3]  # + U'(Jbar) dJ/dF
            P = (U * g) @ V.T
            for n in range(10):
                for c in range(3):
                    acc = 0.0
                    for j in range(3):
                        acc += P[c, j] * dN[n, j]
                    out[e, 3 * n + c] += w * acc
    return out


@njit(cache=True, fastmath=False, parallel=True)
def tet10_hessian_elems(x, tets, Dm_inv, vol, mu, lam, model, mixed, project):
    """Per-element Hessians (T, 30, 30) in N/m: sum over quadrature points of w B^T (dP/dF) B with
    dP/dF PSD-clamped per point when ``project`` (so the sum is PSD)."""
    T = tets.shape[0]
    out = np.zeros((T, 30, 30))
    for e in prange(T):
        g = np.empty(3)
        h = np.empty((3, 3))
        ab = np.empty((3, 2))
        w = 0.25 * vol[e]
        B = np.zeros((9, 30))  # dvec(F)/dx, row 3*c + j
        gJ = np.zeros(30)      # grad Jbar
        mix = uses_mixed(model[e], mixed)
        U1b = U2b = 0.0
        if mix:
            _, U1b, U2b = vol_energy(model[e], lam[e], _mean_J(x, tets[e], Dm_inv[e]))
            if project:
                U2b = max(U2b, 0.0)
        for q in range(4):
            dN = shape_gradients(Dm_inv[e], QUAD_L[q])
            F = _F(x, tets[e], dN)
            U, s, V = polar_svd(F)
            psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
            if mix:
                _sub_vol(model[e], lam[e], s, g, h, ab)
            K = dPdF_projected(U, s, V, h, ab, project)
            for n in range(10):
                for c in range(3):
                    for j in range(3):
                        B[3 * c + j, 3 * n + c] = dN[n, j]
            if mix:
                _det_sigma(U1b, s, g, h, ab)
                K += dPdF_projected(U, s, V, h, ab, project)
                cof = (U * np.array([s[1] * s[2], s[0] * s[2], s[0] * s[1]])) @ V.T
                gJ += 0.25 * (B.T @ cof.reshape(9))
            out[e] += w * (B.T @ (K @ B))
        if mix:
            out[e] += vol[e] * U2b * np.outer(gJ, gJ)
    return out


@njit(cache=True, fastmath=False, parallel=True)
def tet10_min_det(x, tets, Dm_inv, check_L):
    """Per-element minimum (T,) of det F over the barycentric points ``check_L`` (P, 4).
    det F = current / rest volume ratio of the material near that point; <= 0 means inverted."""
    T = tets.shape[0]
    out = np.empty(T)
    for e in prange(T):
        m = np.inf
        for p in range(check_L.shape[0]):
            d = np.linalg.det(_F(x, tets[e], shape_gradients(Dm_inv[e], check_L[p])))
            if d < m:
                m = d
        out[e] = m
    return out
