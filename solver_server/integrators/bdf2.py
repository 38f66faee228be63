"""Time integrators of the incremental potential: implicit Euler and BDF-2 (``Settings.integrator``).

Both solve one minimisation per step (seed 003, "Restitution <=> energy conservation of time stepping"):

    x^{n+1} = argmin_x 1/2 |x - x_tilde|_M^2 + h_e^2 P(x),    v^{n+1} = (x^{n+1} - x_hat) / h_e

    implicit Euler   h_e = h,        x_hat = x^n,                          v_hat = v^n
    BDF-2            h_e = 2 h / 3,  x_hat = (4 x^n - x^{n-1}) / 3,        v_hat = (4 v^n - v^{n-1}) / 3
    x_tilde = x_hat + h_e v_hat   (BDF-2: 4/3 x^n - 1/3 x^{n-1} + 8/9 h v^n - 2/9 h v^{n-1})

BDF-2, y_{n+2} - 4/3 y_{n+1} + 1/3 y_n = 2/3 h f(y_{n+2}) applied to (x, v), is exactly this with
(2/3 h)^2 = 4/9 h^2 in front of P. Written this way the two share every term of the solvers: the
potential P (elasticity, gravity, barrier), lagged friction whose slip velocity is (x - x_hat) / h_e,
and CCD, which still runs from the intersection-free x^n (x_hat and x_tilde are only targets), so the
no-intersection guarantee is untouched. Implicit Euler damps a mode of angular frequency w by
1/sqrt(1 + (w h)^2) per step; BDF-2's error is second order, so far less of a bounce is lost.

Start: a step with no history (the first one, or after a resumed state) takes x^{n-1}, v^{n-1} as the
state one step back under gravity alone (x^n - h v^n + h^2/2 a_g, v^n - h a_g), which makes free flight
exact from the first step (a_g: g on vertex rows and affine-body translation rows, 0 on the L A rows).
Units: SI (m, m/s, s).
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

INTEGRATORS = ("implicit_euler", "bdf2")


def gravity_rows(sys, gravity: np.ndarray) -> np.ndarray:
    """(n_z, 3) m/s^2: the free-flight acceleration of every row of the DOF array z: g on vertex rows
    and affine-body translation rows, 0 on the L A^T rows (solver_server/bodies/affine.py)."""
    a = np.zeros((sys.dof_map.n_z, 3))
    a[:sys.n] = gravity
    if sys.affine is not None:
        a[np.asarray(sys.affine.row0, np.int64)] = gravity
    return a


class History:
    """The previous step's state and the integrator's targets (x_hat, v_hat, h_e) for the next one."""

    def __init__(self, integrator: str, a_g: np.ndarray):
        if integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator {integrator!r}; use one of {INTEGRATORS}")
        self.integrator = integrator
        self.a_g = a_g
        self.x_prev: Optional[np.ndarray] = None
        self.v_prev: Optional[np.ndarray] = None

    def reset(self) -> None:
        """Forget the previous step (the state was set from outside): the next step starts afresh."""
        self.x_prev = self.v_prev = None

    def checkpoint(self) -> dict:
        """The previous step's state as arrays for a resume file ({} before the first BDF-2 step)."""
        if self.x_prev is None:
            return {}
        return {"bdf2_x_prev": self.x_prev.copy(), "bdf2_v_prev": self.v_prev.copy()}

    def restore(self, state) -> None:
        """Take the previous step's state from ``state`` (a checkpoint(), possibly in a larger dict);
        a state without it (an older resume file) restarts BDF-2 from the resumed state alone."""
        if "bdf2_x_prev" in state and "bdf2_v_prev" in state:
            self.x_prev = np.array(state["bdf2_x_prev"], np.float64)
            self.v_prev = np.array(state["bdf2_v_prev"], np.float64)
        else:
            self.reset()

    def targets(self, x_n: np.ndarray, v_n: np.ndarray, h: float) -> Tuple[np.ndarray, np.ndarray, float]:
        """(x_hat (n_z, 3) m, v_hat (n_z, 3) m/s, h_e s) of the step from (x_n, v_n) of length h."""
        if self.integrator == "implicit_euler":
            return x_n, v_n, h
        if self.x_prev is None or self.x_prev.shape != x_n.shape:
            xp = x_n - h * v_n + 0.5 * h * h * self.a_g
            vp = v_n - h * self.a_g
        else:
            xp, vp = self.x_prev, self.v_prev
        return (4.0 * x_n - xp) / 3.0, (4.0 * v_n - vp) / 3.0, 2.0 * h / 3.0

    def push(self, x_n: np.ndarray, v_n: np.ndarray) -> None:
        """Remember the state the step just taken started from."""
        if self.integrator != "implicit_euler":
            self.x_prev = np.array(x_n, copy=True)
            self.v_prev = np.array(v_n, copy=True)
