"""What one time step reports, whichever solver took it (Newton IPC or block descent)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StepStats:
    """newton_iterations: Newton iterations (or block-descent sweeps) the step took; contacts: active
    barrier pairs at its end; min_distance: smallest contact distance (m); converged: the step met its
    stop test; seconds: wall time of the step (s)."""
    newton_iterations: int = 0
    contacts: int = 0
    min_distance: float = float("inf")
    converged: bool = True
    seconds: float = 0.0
