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

Inversion: the line search rejects any state where det F <= 0 at one of the CHECK points (the 4
quadrature points, the 4 corners and the 6 mid-edge points); see :func:`tet10_min_det`.
det F is a cubic polynomial over a curved element, so positivity at those 14 points is what is
enforced, not positivity everywhere inside the element.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

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
def tet10_energy(x, tets, Dm_inv, vol, mu, lam, model):
    """Total elastic energy (J); +inf if the model is undefined at a quadrature point (neo-Hookean, J <= 0)."""
    T = tets.shape[0]
    out = np.empty(T)
    for e in prange(T):
        g = np.empty(3)
        h = np.empty((3, 3))
        ab = np.empty((3, 2))
        acc = 0.0
        for q in range(4):
            F = _F(x, tets[e], shape_gradients(Dm_inv[e], QUAD_L[q]))
            U, s, V = polar_svd(F)
            acc += psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
        out[e] = 0.25 * vol[e] * acc
    return out.sum()


@njit(cache=True, fastmath=False, parallel=True)
def tet10_gradient_elems(x, tets, Dm_inv, vol, mu, lam, model):
    """Per-element gradients (T, 30): dE/dx of the element's ten nodes (N)."""
    T = tets.shape[0]
    out = np.zeros((T, 30))
    for e in prange(T):
        g = np.empty(3)
        h = np.empty((3, 3))
        ab = np.empty((3, 2))
        w = 0.25 * vol[e]
        for q in range(4):
            dN = shape_gradients(Dm_inv[e], QUAD_L[q])
            F = _F(x, tets[e], dN)
            U, s, V = polar_svd(F)
            psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
            P = (U * g) @ V.T
            for n in range(10):
                for c in range(3):
                    acc = 0.0
                    for j in range(3):
                        acc += P[c, j] * dN[n, j]
                    out[e, 3 * n + c] += w * acc
    return out


@njit(cache=True, fastmath=False, parallel=True)
def tet10_hessian_elems(x, tets, Dm_inv, vol, mu, lam, model, project):
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
        for q in range(4):
            dN = shape_gradients(Dm_inv[e], QUAD_L[q])
            F = _F(x, tets[e], dN)
            U, s, V = polar_svd(F)
            psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
            K = dPdF_projected(U, s, V, h, ab, project)
            for n in range(10):
                for c in range(3):
                    for j in range(3):
                        B[3 * c + j, 3 * n + c] = dN[n, j]
            out[e] += w * (B.T @ (K @ B))
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
