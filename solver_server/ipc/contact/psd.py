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
