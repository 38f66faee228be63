"""Linear tetrahedral finite elements for volumetric soft bodies (book: "Linear finite elements",
"3D elastodynamics").

F = D_s D_m^{-1} per tet, D_s = [x1 - x0, x2 - x0, x3 - x0]; energy = sum_e V_e psi(F_e) (joules).
psi and its derivatives come from :mod:`isotropic_models` in singular values; P = U diag(psi_i) V^T and
dP/dF is assembled in the SVD frame with each block (the 3x3 psi_ij block and the a/b eigenvalues of the
three 2x2 twist blocks) clamped to be PSD, so the element Hessian V_e B^T (dP/dF) B is PSD without a
12x12 eigendecomposition. Positions in metres; mu, lam in Pa; volumes in m^3.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver_server.threads import ordered_sum

from .fem_common import polar_svd
from .isotropic_models import psi_of_F, psi_sigma, stress_of_F

_CHUNK = 128   # tets per parallel work item of the energy and gradient kernels


def rest_shape(X: np.ndarray, tets: np.ndarray) -> tuple:
    """Per-tet inverse rest basis D_m^{-1} (T, 3, 3) and rest volume (T,) in m^3 (positive for
    positively oriented tets)."""
    x0 = X[tets[:, 0]]
    Dm = np.stack([X[tets[:, 1]] - x0, X[tets[:, 2]] - x0, X[tets[:, 3]] - x0], axis=2)
    vol = np.linalg.det(Dm) / 6.0
    return np.linalg.inv(Dm), vol


@njit(cache=True, fastmath=False)
def deformation_gradient(x, t, Dm_inv):
    Ds = np.empty((3, 3))
    for c in range(3):
        for k in range(3):
            Ds[c, k] = x[t[k + 1], c] - x[t[0], c]
    return Ds @ Dm_inv


@njit(cache=True, fastmath=False)
def _deformation_gradient_into(x, t, Dm_inv, F):
    """F = D_s D_m^-1 written into the (3, 3) scratch F."""
    for c in range(3):
        d1 = x[t[1], c] - x[t[0], c]
        d2 = x[t[2], c] - x[t[0], c]
        d3 = x[t[3], c] - x[t[0], c]
        for j in range(3):
            F[c, j] = d1 * Dm_inv[0, j] + d2 * Dm_inv[1, j] + d3 * Dm_inv[2, j]


@njit(cache=True, fastmath=False)
def tet_shape_gradients(Dm_inv):
    """(4, 3): dF_ij / dx_{a,i} = dN[a, j]."""
    d = np.empty((4, 3))
    for j in range(3):
        d[0, j] = -(Dm_inv[0, j] + Dm_inv[1, j] + Dm_inv[2, j])
        for a in range(3):
            d[a + 1, j] = Dm_inv[a, j]
    return d


@njit(cache=True, fastmath=False, parallel=True)
def tet_energy(x, tets, Dm_inv, vol, mu, lam, model):
    """Total elastic energy (J). +inf if a neo-Hookean tet is inverted."""
    T = tets.shape[0]
    out = np.empty(T)
    for ch in prange((T + _CHUNK - 1) // _CHUNK):
        F = np.empty((3, 3))          # scratch once per work item (no allocation or SVD per tet)
        for e in range(ch * _CHUNK, min(T, (ch + 1) * _CHUNK)):
            _deformation_gradient_into(x, tets[e], Dm_inv[e], F)
            out[e] = vol[e] * psi_of_F(model[e], mu[e], lam[e], F)
    return ordered_sum(out)


@njit(cache=True, fastmath=False, parallel=True)
def tet_gradient_elems(x, tets, Dm_inv, vol, mu, lam, model):
    """Per-tet gradients (T, 12): dE/dx of the tet's four vertices."""
    T = tets.shape[0]
    out = np.zeros((T, 12))
    for ch in prange((T + _CHUNK - 1) // _CHUNK):
        F = np.empty((3, 3))
        P = np.empty((3, 3))
        g = np.empty(3)
        h = np.empty((3, 3))
        ab = np.empty((3, 2))
        for e in range(ch * _CHUNK, min(T, (ch + 1) * _CHUNK)):
            _deformation_gradient_into(x, tets[e], Dm_inv[e], F)
            if not stress_of_F(model[e], mu[e], lam[e], F, P):
                U, s, V = polar_svd(F)     # fixed corotated, or an inverted neo-Hookean tet
                psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
                P[:, :] = (U * g) @ V.T
            D = Dm_inv[e]
            for c in range(3):
                acc0 = 0.0
                for j in range(3):
                    pj = P[c, j]
                    out[e, 3 + 3 * 0 + c] += vol[e] * pj * D[0, j]
                    out[e, 3 + 3 * 1 + c] += vol[e] * pj * D[1, j]
                    out[e, 3 + 3 * 2 + c] += vol[e] * pj * D[2, j]
                    acc0 -= pj * (D[0, j] + D[1, j] + D[2, j])
                out[e, c] = vol[e] * acc0
    return out


@njit(cache=True, fastmath=False)
def dPdF_projected(U, s, V, h, ab, project):
    """9x9 dP/dF (row index 3*i + j of F_ij) from the SVD-frame blocks, each block PSD-clamped when
    ``project``."""
    M = np.zeros((9, 9))
    A = h.copy()
    if project:
        w, Q = np.linalg.eigh(0.5 * (A + A.T))
        for i in range(3):
            if w[i] < 0.0:
                w[i] = 0.0
        A = (Q * w) @ Q.T
    for i in range(3):
        for j in range(3):
            M[4 * i, 4 * j] = A[i, j]  # (i,i),(j,j)
    for k in range(3):
        i = 0 if k < 2 else 1
        j = 1 if k == 0 else 2
        a = ab[k, 0]
        b = ab[k, 1]
        if project:
            a = max(a, 0.0)
            b = max(b, 0.0)
        ij = 3 * i + j
        ji = 3 * j + i
        M[ij, ij] = 0.5 * (a + b)
        M[ji, ji] = 0.5 * (a + b)
        M[ij, ji] = 0.5 * (a - b)
        M[ji, ij] = 0.5 * (a - b)
    Qb = np.empty((9, 9))  # column (p,q) = vec(u_p v_q^T)
    for i in range(3):
        for j in range(3):
            for p in range(3):
                for q in range(3):
                    Qb[3 * i + j, 3 * p + q] = U[i, p] * V[j, q]
    return Qb @ M @ Qb.T


@njit(cache=True, fastmath=False, parallel=True)
def tet_hessian_elems(x, tets, Dm_inv, vol, mu, lam, model, project):
    """Per-tet Hessians (T, 12, 12), PSD-projected when ``project``."""
    T = tets.shape[0]
    out = np.zeros((T, 12, 12))
    for e in prange(T):
        F = deformation_gradient(x, tets[e], Dm_inv[e])
        U, s, V = polar_svd(F)
        g = np.empty(3)
        h = np.empty((3, 3))
        ab = np.empty((3, 2))
        psi_sigma(model[e], mu[e], lam[e], s, g, h, ab)
        K = dPdF_projected(U, s, V, h, ab, project)
        dN = tet_shape_gradients(Dm_inv[e])
        for a in range(4):
            for c in range(3):
                for b in range(4):
                    for d in range(3):
                        acc = 0.0
                        for j in range(3):
                            kj = 3 * c + j
                            for l in range(3):
                                acc += K[kj, 3 * d + l] * dN[a, j] * dN[b, l]
                        out[e, 3 * a + c, 3 * b + d] = vol[e] * acc
    return out


@njit(cache=True, fastmath=False, parallel=True)
def tet_volumes(x, tets):
    """Signed volumes (T,) in m^3 of the tets at positions x."""
    T = tets.shape[0]
    out = np.empty(T)
    for e in prange(T):
        t = tets[e]
        a = x[t[1]] - x[t[0]]
        b = x[t[2]] - x[t[0]]
        c = x[t[3]] - x[t[0]]
        out[e] = (a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                  + a[2] * (b[0] * c[1] - b[1] * c[0])) / 6.0
    return out
