"""No energy from nowhere: a step that does no external work may not raise the total energy.

Implicit Euler converged on the incremental potential dissipates (each step decreases inertia +
potential; lagged friction and damping only remove energy). BDF-2 is second order but not dissipative
step by step: after an impact it can leave with more energy than it arrived with (measured: a soft cube
dropped 0.2 m gained 1.2 J in one frame at 1 substep), and a budget-limited block-descent step can
create energy too. After every step with no external work (no keyframed collider or pin moved),
:class:`EnergyGuard` compares the total energy

    E = sum_i 1/2 m_i |v_i|^2 + sum_b 1/2 tr(qdot_b^T Mbar_b qdot_b)      kinetic (J)
        - sum_i m_i g . x_i - sum_b m_b g . p_b                          gravity (J)
        + Psi_el(x) + kappa B(x)                                          elastic + barrier (J)

with the step before; when it rose, the velocities are scaled down so that the kinetic energy takes
exactly the excess back (to zero when the potential alone rose), and the stepper's BDF-2 history is
restarted from that state. The positions, and so the no-intersection guarantee, are untouched. The
orthogonality energy of affine bodies (kappa_A V |A A^T - I|^2, ~0 for bodies rigid to 1e-3) is left out.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

RISE_TOL = 1e-6
"""A rise below RISE_TOL x (|E| + the kinetic energy) is round-off and the step's own tolerance, not a
gain worth correcting (J / J)."""


class EnergyGuard:
    """Total energy (module doc) of a System's DOF state, and the correction of a step that raised it."""

    def __init__(self, system, gravity, contact=None):
        self.s = system
        self.g = np.asarray(gravity, np.float64)
        self.contact = contact
        n = system.n
        self.m = np.where(system.dynamic[:n], system.mass[:n], 0.0)
        self.last: Optional[float] = None   # E after the last step (J), None before the first
        self.corrections = 0                 # steps whose velocities were scaled down

    def kinetic(self, vz: np.ndarray) -> float:
        """Kinetic energy (J) of the DOF velocities vz: lumped vertex masses and each body's Mbar."""
        n = self.s.n
        v = vz[:n]
        kin = 0.5 * float((self.m * (v * v).sum(1)).sum())
        ab = self.s.affine
        if ab is not None and ab.n:
            for b in range(ab.n):
                r = int(ab.row0[b])
                qd = vz[r:r + 4]
                kin += 0.5 * float(np.einsum("rs,ri,si->", ab.mbar[b], qd, qd))
        return kin

    def potential(self, z: np.ndarray) -> float:
        """Gravity, elastic and barrier energy (J) of the DOF positions z."""
        s = self.s
        x = z[:s.n]
        pot = -float((self.m * (x @ self.g)).sum()) + float(s.elastic.energy(x))
        ab = s.affine
        if ab is not None and ab.n:
            for b in range(ab.n):
                pot -= float(ab.mbar[b, 0, 0] * (z[int(ab.row0[b])] @ self.g))
        if self.contact is not None:
            xs = s.dof_map.to_x(z)
            pot += float(self.contact.energy(xs, self.contact.candidates(xs)))
        return pot

    def start(self, z: np.ndarray, vz: np.ndarray) -> None:
        """Remember the energy of the state a step starts from (a bake's start or a resume)."""
        self.last = self.potential(z) + self.kinetic(vz)

    def after_step(self, z: np.ndarray, vz: np.ndarray, external_work: bool) -> bool:
        """Check the step that ended at (z, vz); scale vz in place when it raised the energy with no
        external work. Returns True when it did (the caller restarts its BDF-2 history). The energy
        kept for the next step is computed as :meth:`start` computes it, so a resumed bake continues
        bit for bit."""
        pot = self.potential(z)
        kin = self.kinetic(vz)
        e = pot + kin
        prev, self.last = self.last, e
        if external_work or prev is None or e - prev <= RISE_TOL * (abs(prev) + kin):
            return False
        keep = max(prev - pot, 0.0)
        vz *= float(np.sqrt(keep / kin)) if kin > 0.0 else 0.0
        self.last = pot + self.kinetic(vz)
        self.corrections += 1
        return True
