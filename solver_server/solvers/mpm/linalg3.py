"""3x3 singular value decomposition for the constitutive models (allocation-free, numba).

MPM plasticity (book §28, "return mapping ... in the diagonalized SVD space") needs F = U Σ V^T per
particle per step. ``svd3`` computes the *rotation-variant* SVD: U and V are proper rotations
(det = +1) and the smallest singular value carries the sign of det F, which keeps fixed-corotated
stress well defined for inverted elements. Method: cyclic Jacobi on the symmetric F^T F gives V
and Σ^2; the columns of U are then built by Gram-Schmidt from F V, so small singular values stay
accurate in direction and σ_3 = u_3 · F v_3 gets its sign.

All functions write into caller-provided arrays so the hot loops never allocate.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, fastmath=False, error_model="numpy")
def sym_eig3(A: np.ndarray, V: np.ndarray) -> None:
    """Diagonalise the symmetric 3x3 A in place by cyclic Jacobi rotations; V receives the
    eigenvectors as columns (A_in = V diag(A_out) V^T)."""
    for i in range(3):
        for j in range(3):
            V[i, j] = 1.0 if i == j else 0.0
    scale = A[0, 0] * A[0, 0] + A[1, 1] * A[1, 1] + A[2, 2] * A[2, 2] + 1e-300
    for _sweep in range(12):
        off = A[0, 1] * A[0, 1] + A[0, 2] * A[0, 2] + A[1, 2] * A[1, 2]
        if off <= 1e-32 * scale:
            break
        for pair in range(3):
            if pair == 0:
                p, q = 0, 1
            elif pair == 1:
                p, q = 0, 2
            else:
                p, q = 1, 2
            apq = A[p, q]
            if apq == 0.0:
                continue
            theta = (A[q, q] - A[p, p]) / (2.0 * apq)
            if abs(theta) > 1e150:
                t = 0.5 / theta
            else:
                t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                if theta < 0.0:
                    t = -t
            c = 1.0 / math.sqrt(t * t + 1.0)
            s = t * c
            for k in range(3):
                akp = A[k, p]
                akq = A[k, q]
                A[k, p] = c * akp - s * akq
                A[k, q] = s * akp + c * akq
            for k in range(3):
                apk = A[p, k]
                aqk = A[q, k]
                A[p, k] = c * apk - s * aqk
                A[q, k] = s * apk + c * aqk
            for k in range(3):
                vkp = V[k, p]
                vkq = V[k, q]
                V[k, p] = c * vkp - s * vkq
                V[k, q] = s * vkp + c * vkq


@njit(cache=True, fastmath=False, error_model="numpy")
def svd3(F: np.ndarray, U: np.ndarray, sig: np.ndarray, V: np.ndarray, work: np.ndarray) -> None:
    """F (3, 3) = U diag(sig) V^T with U, V rotations, sig[0] >= sig[1] >= |sig[2]|, sign(sig[2]) =
    sign(det F). ``work`` is a (3, 3) scratch array."""
    for i in range(3):
        for j in range(3):
            acc = 0.0
            for k in range(3):
                acc += F[k, i] * F[k, j]
            work[i, j] = acc
    sym_eig3(work, V)
    # sort eigenvalues (diagonal of work) descending, permuting V's columns
    for a in range(2):
        best = a
        for b in range(a + 1, 3):
            if work[b, b] > work[best, best]:
                best = b
        if best != a:
            tmp = work[a, a]
            work[a, a] = work[best, best]
            work[best, best] = tmp
            for k in range(3):
                tv = V[k, a]
                V[k, a] = V[k, best]
                V[k, best] = tv
    detv = (V[0, 0] * (V[1, 1] * V[2, 2] - V[1, 2] * V[2, 1])
            - V[0, 1] * (V[1, 0] * V[2, 2] - V[1, 2] * V[2, 0])
            + V[0, 2] * (V[1, 0] * V[2, 1] - V[1, 1] * V[2, 0]))
    if detv < 0.0:
        for k in range(3):
            V[k, 2] = -V[k, 2]
    # columns of F V into U
    for j in range(3):
        for i in range(3):
            U[i, j] = F[i, 0] * V[0, j] + F[i, 1] * V[1, j] + F[i, 2] * V[2, j]
    # u0
    n0 = math.sqrt(U[0, 0] ** 2 + U[1, 0] ** 2 + U[2, 0] ** 2)
    sig[0] = n0
    if n0 > 1e-30:
        for i in range(3):
            U[i, 0] /= n0
    else:
        U[0, 0] = 1.0
        U[1, 0] = 0.0
        U[2, 0] = 0.0
    # u1 = normalise(F v1 - (u0 . F v1) u0)
    d = U[0, 0] * U[0, 1] + U[1, 0] * U[1, 1] + U[2, 0] * U[2, 1]
    for i in range(3):
        U[i, 1] -= d * U[i, 0]
    n1 = math.sqrt(U[0, 1] ** 2 + U[1, 1] ** 2 + U[2, 1] ** 2)
    sig[1] = n1
    if n1 > 1e-30 * (n0 + 1e-300):
        for i in range(3):
            U[i, 1] /= n1
    else:
        # any unit vector orthogonal to u0
        if abs(U[0, 0]) < 0.9:
            ax, ay, az = 1.0, 0.0, 0.0
        else:
            ax, ay, az = 0.0, 1.0, 0.0
        cx = U[1, 0] * az - U[2, 0] * ay
        cy = U[2, 0] * ax - U[0, 0] * az
        cz = U[0, 0] * ay - U[1, 0] * ax
        nc = math.sqrt(cx * cx + cy * cy + cz * cz)
        U[0, 1] = cx / nc
        U[1, 1] = cy / nc
        U[2, 1] = cz / nc
        sig[1] = 0.0
    # u2 = u0 x u1; sigma2 = u2 . F v2 (signed)
    fx = U[0, 2]
    fy = U[1, 2]
    fz = U[2, 2]
    U[0, 2] = U[1, 0] * U[2, 1] - U[2, 0] * U[1, 1]
    U[1, 2] = U[2, 0] * U[0, 1] - U[0, 0] * U[2, 1]
    U[2, 2] = U[0, 0] * U[1, 1] - U[1, 0] * U[0, 1]
    sig[2] = U[0, 2] * fx + U[1, 2] * fy + U[2, 2] * fz


@njit(cache=True, fastmath=False, error_model="numpy")
def compose_usv(U: np.ndarray, sig: np.ndarray, V: np.ndarray, out: np.ndarray) -> None:
    """out = U diag(sig) V^T."""
    for i in range(3):
        for j in range(3):
            out[i, j] = U[i, 0] * sig[0] * V[j, 0] + U[i, 1] * sig[1] * V[j, 1] + U[i, 2] * sig[2] * V[j, 2]


@njit(cache=True, fastmath=False, error_model="numpy")
def compose_udu(U: np.ndarray, diag: np.ndarray, out: np.ndarray) -> None:
    """out = U diag(diag) U^T (symmetric)."""
    for i in range(3):
        for j in range(i, 3):
            v = U[i, 0] * diag[0] * U[j, 0] + U[i, 1] * diag[1] * U[j, 1] + U[i, 2] * diag[2] * U[j, 2]
            out[i, j] = v
            out[j, i] = v
