"""The orthogonality (stiffness) energy of an affine body (Lan et al. 2022, "Affine Body Dynamics";
the textbook's chapter "Rigid Body Simulation"):

    E_orth(A) = kappa_A * V * || A A^T - I ||_F^2          (J)

kappa_A (Pa) is the body's stiffness, V (m^3) its volume, A (3x3, dimensionless) the affine part of
x = A X + p. E_orth vanishes exactly on rotations (and reflections, which the line search never
reaches from A = I since det A = 0 costs kappa_A V) and is invariant under A -> R A, so it exerts no
net force and no torque: linear and angular momentum are untouched by it.

Stiffness choice: kappa_A = max(E, 1e8 Pa) with E the material's Young's modulus (1e8 Pa is the
ABD paper's default and the floor the stiff FEM role used). Resulting rigidity: near A = R the
energy is 4 kappa_A V |S|_F^2 in the symmetric strain S (A = R (I + S)), so a generalised load Q
(N m, = sum_i f_i X_i^T over the body's vertices, e.g. contact forces times lever arms) produces
|A A^T - I|_F ~= 2 |S|_F <= |Q|_F / (4 kappa_A V). For a 0.1-1 m body of density 1000 kg/m^3 resting
under gravity this is ~rho g L / (4 kappa_A) = 2.5e-6 to 2.5e-5; impacts at a few m/s in one 1/24 s
step stay below 1e-4. The tests hold every frame to RIGIDITY_TOL = 1e-3.

Layout: A is flattened row-major, a[3 k + j] = A[k, j]. Gradient (9,) in J; Hessian (9, 9) in J,
the exact one or its PSD projection (eigenvalues clamped at 0) for Newton.
"""
from __future__ import annotations

import numpy as np
from numba import njit

STIFF_FLOOR = 1.0e8      # Pa, lower bound of kappa_A
RIGIDITY_TOL = 1.0e-3    # |A A^T - I|_F every frame in the tests (see module doc for the estimate)


def stiffness(youngs_modulus: float) -> float:
    """kappa_A (Pa) for a body of Young's modulus E (Pa): max(E, 1e8 Pa)."""
    return max(float(youngs_modulus), STIFF_FLOOR)


@njit(cache=True, fastmath=False)
def _c_matrix(a):
    A = a.reshape(3, 3)
    C = A @ A.T
    for i in range(3):
        C[i, i] -= 1.0
    return A, C


@njit(cache=True, fastmath=False)
def orth_energy(a: np.ndarray, kV: float) -> float:
    """kappa_A V ||A A^T - I||_F^2 (J); a (9,) row-major A, kV = kappa_A * V (J)."""
    _, C = _c_matrix(a)
    return kV * float((C * C).sum())


@njit(cache=True, fastmath=False)
def orth_gradient(a: np.ndarray, kV: float) -> np.ndarray:
    """dE/dA = 4 kappa_A V (A A^T - I) A, flattened (9,), J."""
    A, C = _c_matrix(a)
    return (4.0 * kV * (C @ A)).reshape(9)


@njit(cache=True, fastmath=False)
def orth_hessian(a: np.ndarray, kV: float, project: bool) -> np.ndarray:
    """d^2E/dA^2 (9, 9), J: H[kj, lm] = 4 kappa_A V (delta_kl (A^T A)_mj + A_km A_lj + C_kl delta_jm),
    PSD-projected (eigenvalues clamped at 0) when project is True."""
    A, C = _c_matrix(a)
    AtA = A.T @ A
    H = np.zeros((9, 9))
    for k in range(3):
        for j in range(3):
            for l in range(3):
                for m in range(3):
                    v = A[k, m] * A[l, j]
                    if k == l:
                        v += AtA[m, j]
                    if j == m:
                        v += C[k, l]
                    H[3 * k + j, 3 * l + m] = 4.0 * kV * v
    if project:
        w, Q = np.linalg.eigh(H)
        for i in range(9):
            if w[i] < 0.0:
                w[i] = 0.0
        H = (Q * w) @ Q.T
        H = 0.5 * (H + H.T)
    return H


def rigidity_error(A: np.ndarray) -> float:
    """|A A^T - I|_F (dimensionless): how far the affine part is from a rotation."""
    A = np.asarray(A, np.float64).reshape(3, 3)
    return float(np.linalg.norm(A @ A.T - np.eye(3)))
