"""The ``none`` backend: returns the input motion, no physics.

Bodies with ``animation`` follow it (sample ``frame - frame_start``), the others stay at their
input vertices with their pinned vertices moved to ``pin_targets`` when given. Used to test
the whole pipeline (protocol, jobs, caches, write-back) without a solver, and as a
"pass-through" bake. Two Settings fields are test aids honoured only here:
``debug_frame_delay`` (seconds slept per frame, for cancel and resume tests) and
``debug_fail_after`` (raise a SceneError after that many frames, for failure tests).
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np

from protocol.scene import Scene, SceneError
from .base import Backend, FrameResult, ProgressFn


class NoneBackend(Backend):
    """Pass-through backend: positions are the input animation / rest vertices."""

    name = "none"

    def __init__(self, scene: Scene, progress: Optional[ProgressFn] = None):
        super().__init__(scene, progress)
        self._bodies = scene.simulated()
        self._advanced = 0

    def _positions(self, frame: int) -> dict:
        k = frame - self.scene.settings.frame_start
        out = {}
        for b in self._bodies:
            if b.animation is not None:
                p = np.array(b.animation[k], dtype=np.float32)
            else:
                p = b.vertices.astype(np.float32)
                if b.pin_targets is not None and b.pin_indices.size:
                    p[b.pin_indices] = b.pin_targets[k]
            out[b.name] = p
        return out

    def initial_positions(self) -> dict:
        return self._positions(self.scene.settings.frame_start)

    def advance(self) -> FrameResult:
        s = self.scene.settings
        t0 = time.perf_counter()
        if s.debug_frame_delay > 0:
            time.sleep(s.debug_frame_delay)
        if s.debug_fail_after and self._advanced >= s.debug_fail_after:
            raise SceneError(f"debug_fail_after={s.debug_fail_after}: failing at frame {self.frame + 1} on request",
                             "", "debug_fail_after")
        if self.frame >= s.frame_end:
            raise RuntimeError(f"already at the last frame {s.frame_end}")
        self.frame += 1
        self._advanced += 1
        pos = self._positions(self.frame)
        return FrameResult(self.frame, pos, {"newton_iterations": 0, "contacts": 0,
                                             "seconds": time.perf_counter() - t0})

    def get_state(self) -> dict:
        return {"frame": np.array([self.frame], np.int64)}

    def set_state(self, state: dict, frame: int) -> None:
        if int(np.asarray(state["frame"])[0]) != frame:
            raise ValueError(f"state is of frame {int(state['frame'][0])}, not {frame}")
        self.frame = frame
