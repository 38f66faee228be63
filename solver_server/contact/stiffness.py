"""Adaptive barrier stiffness kappa (IPC paper, Li et al. 2020, Sec. 4.3 "Adaptive barrier stiffness").

Artists never tune kappa. The rule (documented in docs/contact.md):

* kappa_min = s_min * m / b''(d0), with m the mass scale (kg, average vertex mass),
  d0 = 1e-8 * bbox diagonal (m, clamped below dhat/2) and s_min = 1e11: the barrier at a
  very small gap is as stiff as the IPC paper asks. kappa_max = 100 kappa_min.
* initial kappa balances the gradients: argmin_k |g_E + k g_B|^2 = -g_E.g_B / |g_B|^2, clamped
  to [kappa_min, kappa_max]; kappa_min when no pair is active or g_E is not given.
* during a solve, kappa doubles (up to kappa_max) whenever the minimum contact distance is
  below eps = 1e-3 dhat in two successive Newton iterations and still decreases.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from .barrier import barrier_second_derivative
from .broad_phase import Candidates
from .mesh import CollisionMesh
from .potential import barrier_gradient

MIN_STIFFNESS_SCALE = 1.0e11
MAX_OVER_MIN = 100.0


def bbox_diagonal(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64).reshape(-1, 3)
    if x.shape[0] == 0:
        return 0.0
    return float(np.linalg.norm(x.max(axis=0) - x.min(axis=0)))


def kappa_bounds(x: np.ndarray, dhat: float, mass_scale: float,
                 min_stiffness_scale: float = MIN_STIFFNESS_SCALE) -> Tuple[float, float]:
    """(kappa_min, kappa_max) in J/m^2 for positions x (m), dhat (m) and mass scale (kg)."""
    bd = bbox_diagonal(x)
    d0 = 1e-8 * bd
    if not (0.0 < d0 < 0.5 * dhat):
        d0 = 0.5 * dhat
    kmin = float(min_stiffness_scale) * float(mass_scale) / barrier_second_derivative(d0, float(dhat))
    return kmin, MAX_OVER_MIN * kmin


def adaptive_kappa(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float, mass_scale: float,
                   grad_elastic: Optional[np.ndarray] = None,
                   min_stiffness_scale: float = MIN_STIFFNESS_SCALE) -> float:
    """Initial barrier stiffness (J/m^2) from the gradient balance, clamped to kappa_bounds.

    grad_elastic: (3n,) gradient of the rest of the incremental potential at x (same energy units
    as the barrier energy the caller adds, kappa * sum b).
    """
    kmin, kmax = kappa_bounds(x, dhat, mass_scale, min_stiffness_scale)
    if grad_elastic is None:
        return kmin
    gb = barrier_gradient(x, cands, mesh, dhat, 1.0)
    gg = float(gb @ gb)
    if gg <= 0.0:
        return kmin
    k = -float(np.asarray(grad_elastic, dtype=np.float64).ravel() @ gb) / gg
    return float(min(max(k, kmin), kmax))


def update_kappa(kappa: float, d_min: float, d_min_prev: float, dhat: float, kappa_max: float = np.inf,
                 eps_scale: float = 1e-3) -> float:
    """Double kappa (capped at kappa_max) when the minimum contact distance (m) stays below
    eps_scale * dhat over two successive iterations and keeps decreasing; else keep it."""
    eps = eps_scale * dhat
    if d_min_prev < eps and d_min < eps and d_min < d_min_prev:
        return float(min(kappa_max, 2.0 * kappa))
    return float(kappa)
