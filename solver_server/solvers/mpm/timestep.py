"""The MPM time step (explicit, so bounded by a CFL rule; the book only says "MPM needs a small dt").

dt <= CFL dx / v_max                    particles move less than a fraction of a cell per step;
dt <= CFL dx / c,  c = sqrt((lambda + 2 mu) / rho)  the fastest elastic (P) wave crosses less than
                                        a fraction of a cell (sqrt(K / rho) for water);
dt <= rho dx^2 / (6 eta)                explicit viscosity (diffusion number 1/6 in 3D).
The solver takes the largest dt allowed at the start of every substep, so the substep count per
frame follows the motion and is never a user setting.
"""
from __future__ import annotations

import math

CFL = 0.4


def max_dt(dx: float, v_max: float, wave_speed: float, viscous_limit: float = math.inf, cfl: float = CFL) -> float:
    """Largest stable step (s) for grid spacing dx (m), particle speed v_max (m/s), wave speed (m/s)
    and a precomputed viscous limit (s)."""
    limit = viscous_limit
    if wave_speed > 0:
        limit = min(limit, cfl * dx / wave_speed)
    if v_max > 0:
        limit = min(limit, cfl * dx / v_max)
    return limit


def viscous_dt(dx: float, density: float, viscosity: float) -> float:
    """rho dx^2 / (6 eta) (s); infinite without viscosity."""
    return math.inf if viscosity <= 0 else density * dx * dx / (6.0 * viscosity)
