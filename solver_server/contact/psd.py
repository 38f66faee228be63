"""Projection of small symmetric matrices onto the positive semi-definite cone.

Newton needs a PSD Hessian; per-pair projection (eigen-decomposition, negative eigenvalues
clamped to zero) is the standard IPC choice (book: "3D Frictional Self-Contact", Hessian PSD).
"""
import numpy as np
from numba import njit


@njit(cache=True, fastmath=False)
def project_psd(H):
    """Return the PSD projection of symmetric H (k, k); H is symmetrised first."""
    S = 0.5 * (H + H.T)
    w, V = np.linalg.eigh(S)
    if w[0] >= 0.0:
        return S
    for i in range(w.shape[0]):
        if w[i] < 0.0:
            w[i] = 0.0
    return (V * w) @ V.T


def _translation_complement() -> np.ndarray:
    """Orthonormal basis (12, 9) of the 12-DOF space orthogonal to rigid translations of 4 vertices."""
    T = np.zeros((12, 3))
    for i in range(4):
        T[3 * i:3 * i + 3] = np.eye(3) / 2.0
    Q = np.linalg.svd(np.eye(12) - T @ T.T)[0][:, :9]
    return np.ascontiguousarray(Q)


_Q9 = _translation_complement()


@njit(cache=True, fastmath=False)
def project_psd_translation_invariant(H):
    """PSD projection of a 12x12 pair Hessian whose energy is invariant to translating all 4
    vertices (true for distances, barriers and mollifiers): H = Q (Q^T H Q) Q^T exactly, so the
    eigen-decomposition runs on 9x9 instead of 12x12 with the same result."""
    Q = _Q9
    K = Q.T @ (0.5 * (H + H.T)) @ Q
    w, V = np.linalg.eigh(K)
    if w[0] >= 0.0:
        return Q @ K @ Q.T
    for i in range(w.shape[0]):
        if w[i] < 0.0:
            w[i] = 0.0
    W = Q @ V
    return (W * w) @ W.T
