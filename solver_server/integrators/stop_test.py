"""The one stop test of an implicit step, for every solver path (issue 23).

A step x of the incremental potential E (J, the h^2-scaled convention of solvers/newton/integrator.py:
gradient g = M (x - y) + h^2 grad(Psi + kappa B + D)) has *converged* when both residuals, in velocity
units (m/s), are below the scene's Newton Tolerance ``tol``:

- the **step residual** |p|_inf / h, p = -H^-1 g the Newton step at x (H the PSD-projected Hessian): how
  far, in velocity, the converged step still is from x (the IPC reference code's test);
- the **body residual** max over bodies b and axes of |sum_{i in b} g_i| / (sum_{i in b} m_i) / h: the
  error of each body's mean velocity from its net force. A safety net for lagged friction in the
  sticking regime, whose stiff Hessian mu lambda / (eps_v h) makes p tiny although the net force is
  not (the step test alone stopped a block that should slide after one iteration). It does not see
  local force errors that are small against a body's weight (a few cloth vertices flipping between
  the static and sliding branches of the friction kink), on purpose: they cost 27-30% of a drape's
  Newton iterations under a per-DOF force test.

``STOP_RULE = "step+rms"`` replaces the body residual by the mass-weighted RMS force residual
sqrt(sum_i g_i^2 / m_i / sum_i m_i) / h over all DOFs with mass (the rule before; for comparison).

A solver that stops before both residuals are below ``tol`` (an iteration cap, a budget) reports the
step unconverged with the residual it reached (StepStats.residual); none reports a budget-limited
step as converged.
"""
from __future__ import annotations

import numpy as np

STOP_RULE = "step"  # or "step+rms" (the rule before, kept for comparison); see the module doc


def step_residual(p_free: np.ndarray, h: float) -> float:
    """|p|_inf / h (m/s) of the Newton step p (m) over the free DOFs; 0 when there are none."""
    return float(np.abs(p_free).max()) / h if p_free.size else 0.0


def force_residual(g: np.ndarray, mass: np.ndarray, h: float) -> float:
    """Mass-weighted RMS velocity error sqrt(sum g^2 / m / sum m) / h (m/s) over the DOFs with mass."""
    has_m = mass > 0
    if not has_m.any():
        return 0.0
    m = mass[has_m]
    return float(np.sqrt((g[has_m] ** 2 / m).sum() / m.sum())) / h


def body_residual(g: np.ndarray, mass: np.ndarray, group, h: float) -> float:
    """Largest per-body net-force velocity error max_{b, axis} |sum_{i in b} g_i| / sum_{i in b} m_i / h
    (m/s) over the free DOFs with mass. g (f,) gradient of the incremental potential (J/m, i.e. h^2 x
    force), mass (f,) kg, group (f,) int body label or None (all DOFs one body). Free DOFs come in
    whole x, y, z triples, so DOF k's axis is k % 3."""
    has_m = mass > 0
    if not has_m.any():
        return 0.0
    idx = np.nonzero(has_m)[0]
    grp = np.zeros(idx.size, np.int64) if group is None else np.asarray(group, np.int64)[idx]
    key = grp * 3 + (idx % 3)
    nb = int(key.max()) + 1
    f = np.bincount(key, weights=g[idx], minlength=nb)
    m = np.bincount(key, weights=mass[idx], minlength=nb)
    ok = m > 0
    return float(np.abs(f[ok] / m[ok]).max()) / h if ok.any() else 0.0


def net_force_residual(g: np.ndarray, mass: np.ndarray, group, h: float) -> float:
    """The force-side residual of the stop test (m/s), per ``STOP_RULE``."""
    if STOP_RULE == "step+rms":
        return force_residual(g, mass, h)
    return body_residual(g, mass, group, h)


def converged(step_res: float, force_res: float, tol: float) -> bool:
    """The stop test: both residuals (m/s) below the tolerance ``tol`` (m/s)."""
    return step_res < tol and force_res < tol
