"""What one time step reports, whichever solver took it (Newton IPC or block descent)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepStats:
    """newton_iterations: Newton iterations (or block-descent sweeps) the step took; contacts: active
    barrier pairs at its end; min_distance: smallest contact distance (m); converged: the step met its
    stop test (integrators/stop_test.py); residual: when it did not, the larger of its two residuals at
    the end (m/s; 0 when converged); seconds: wall time of the step (s); local_solves: Newton's local-refinement
    solves (small factorisations, solvers/newton/newton.py local_refine; not counted in newton_iterations)."""
    newton_iterations: int = 0
    contacts: int = 0
    min_distance: float = float("inf")
    converged: bool = True
    residual: float = 0.0
    seconds: float = 0.0
    local_solves: int = 0
