"""Rayleigh stiffness-proportional material damping (``Material.damping`` k_d, seconds).

The damping force of a body is f_d = -k_d K v, with K the (PSD-projected) elastic Hessian at the
step's start x^n (lagged, so the term is a convex quadratic within a step) and v the integrator's
velocity (x - x_hat) / h_e (ipc/bdf2.py). It derives from the dissipation potential (seed 003,
"Use damping energy to control restitution", (k_d / 2) v^T d2P/dx2 v, here with P the elastic energy)

    Phi(x) = 1/(2 h_e) (x - x_hat)^T K_d (x - x_hat),    K_d = k_d K   (k_d per body, per entry)

which the incremental potential adds as h_e^2 Phi = h_e/2 (x - x_hat)^T K_d (x - x_hat). A mode of
angular frequency w gets the damping ratio zeta = k_d w / 2: it loses exp(-2 pi zeta) of its
amplitude per period, and a bounce, which stores the impact in the body's elastic deformation,
returns less. Rigid motion is untouched (K annihilates it), so free flight stays exact. Only
elastic elements are damped (solids, cloth, rods); stiff (affine) bodies are not.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def vertex_damping(system, scene) -> np.ndarray:
    """(N,) s: each vertex's Material.damping (0 on colliders and stiff bodies)."""
    kd = np.zeros(system.n)
    mats = {b.name: b.material for b in scene.bodies}
    for blk in system.blocks:
        m = mats.get(blk.name)
        if m is not None and blk.role in ("solid", "cloth", "rod"):
            kd[blk.offset:blk.offset + blk.n_nodes] = float(getattr(m, "damping", 0.0))
    return kd


class StepDamping:
    """K_d = k_d K(x^n) of one step: the matrix over the 3N vertex DOFs and its values in the elastic
    COO pattern's order (for the Newton matrix)."""

    def __init__(self, elastic, x_n: np.ndarray, kd: np.ndarray):
        rows, cols, vals = elastic.hessian(x_n)
        rows = np.asarray(rows, np.int64)
        self.vals = kd[rows // 3] * np.asarray(vals, np.float64)       # N/m * s
        n3 = 3 * x_n.shape[0]
        self.K = sp.csr_matrix((self.vals, (rows, np.asarray(cols, np.int64))), shape=(n3, n3))

    def energy(self, dx: np.ndarray) -> float:
        """1/2 dx^T K_d dx (J s / m^2 * m^2 -> J s); dx (N, 3) m."""
        d = dx.ravel()
        return 0.5 * float(d @ (self.K @ d))

    def gradient(self, dx: np.ndarray) -> np.ndarray:
        """K_d dx (3N,)."""
        return self.K @ dx.ravel()
