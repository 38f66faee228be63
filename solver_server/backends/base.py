"""The interface every solver backend implements (none, ipc, mpm).

A backend is built from a validated :class:`protocol.scene.Scene`. The job runner
(solver_server/runtime/jobs.py) calls :meth:`Backend.advance` once per frame, streams and
caches what it returns, and saves :meth:`Backend.get_state` beside every finished frame so
that a cancelled or crashed bake can resume with :meth:`Backend.set_state`.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from protocol.scene import Scene

ProgressFn = Callable[[str, float], None]
"""progress(state, fraction): state is e.g. "compiling", "building", "solving"; fraction in [0, 1]."""


@dataclass
class FrameResult:
    """One finished frame.

    ``positions``: body name -> (n, 3) float32 world positions, in the body's own vertex
    order, for every simulated body (all roles but collider).
    ``stats``: per-frame figures for stats.json and progress messages; keys used by the UI:
    ``newton_iterations`` (int, summed over substeps), ``contacts`` (int, max over substeps),
    ``seconds`` (float, wall time of the frame), plus any backend-specific extras.
    """

    frame: int
    positions: dict
    stats: dict = field(default_factory=dict)


class Backend(ABC):
    """A solver for one scene. Not thread-safe; one instance per job."""

    name: str = "base"

    def __init__(self, scene: Scene, progress: Optional[ProgressFn] = None):
        self.scene = scene
        self.progress = progress or (lambda state, fraction: None)
        self.frame = scene.settings.frame_start

    @abstractmethod
    def initial_positions(self) -> dict:
        """body name -> (n, 3) float32 positions at frame_start (before any step)."""

    @abstractmethod
    def advance(self) -> FrameResult:
        """Simulate from ``self.frame`` to ``self.frame + 1``, update ``self.frame`` and return it."""

    @abstractmethod
    def get_state(self) -> dict:
        """Everything needed to continue from ``self.frame``: name -> numpy array (positions,
        velocities, plastic state ...). Saved as .npz beside the frame."""

    @abstractmethod
    def set_state(self, state: dict, frame: int) -> None:
        """Restore a state saved by :meth:`get_state` at ``frame``; the next advance() gives frame+1."""
