"""Frames whose solver steps did not converge: the frame-stats keys and the user-facing summary.

A backend whose iterative solver stops at its iteration cap (Newton IPC: Max Newton Iterations;
block descent: its sweep budget) before meeting its tolerance marks the frame in its stats
(``Frame.stats`` on the wire, ``stats.json`` in the cache folder):

``converged``           bool, False when any step of the frame missed its tolerance
``unconverged_steps``   int, how many of the frame's ``steps`` did
``steps``               int, solver steps in the frame
``unconverged_objects`` str, the objects most likely involved, one name per line
                        (body names never contain control characters, see Body.validate)
``warning``             str, one sentence naming them and the likely cause (too fast, too stiff)

:func:`summarize` turns the stats of a whole bake into the one warning the add-on reports and
``clearance-server bake`` prints. Pure Python (vendored into the add-on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

CONVERGED = "converged"
UNCONVERGED_STEPS = "unconverged_steps"
STEPS = "steps"
UNCONVERGED_OBJECTS = "unconverged_objects"
WARNING = "warning"


def frame_unconverged(stats: dict) -> bool:
    """True when a frame's stats say a step missed its tolerance."""
    return stats.get(CONVERGED) is False


def split_objects(stats: dict) -> list:
    """The object names of a frame's ``unconverged_objects`` (empty when there are none)."""
    text = stats.get(UNCONVERGED_OBJECTS) or ""
    return [n for n in text.split("\n") if n] if isinstance(text, str) else []


def frame_ranges(frames: Iterable[int]) -> str:
    """'3, 7–9, 12' for frames {3, 7, 8, 9, 12}."""
    fs = sorted(set(int(f) for f in frames))
    parts, i = [], 0
    while i < len(fs):
        j = i
        while j + 1 < len(fs) and fs[j + 1] == fs[j] + 1:
            j += 1
        parts.append(str(fs[i]) if i == j else f"{fs[i]}–{fs[j]}")
        i = j + 1
    return ", ".join(parts)


@dataclass
class ConvergenceReport:
    """Collects the frames of one bake as they arrive; :meth:`summary` is the warning."""

    frames: dict = field(default_factory=dict)   # frame -> stats of the frames that did not converge
    total: int = 0                                # solved frames seen

    def add(self, frame: int, stats: Optional[dict]) -> Optional[str]:
        """Record one solved frame; returns its warning text when it did not converge."""
        stats = stats or {}
        self.total += 1
        if not frame_unconverged(stats):
            self.frames.pop(int(frame), None)   # a frame sent again after a resume, now converged
            return None
        self.frames[int(frame)] = stats
        return str(stats.get(WARNING) or f"frame {frame} did not converge")

    def objects(self) -> list:
        """Objects named by the unconverged frames, most often named first."""
        count: dict = {}
        for st in self.frames.values():
            for n in split_objects(st):
                count[n] = count.get(n, 0) + 1
        return sorted(count, key=lambda n: (-count[n], n))

    def summary(self) -> Optional[str]:
        """One warning for the whole bake, or None when every frame converged."""
        return summarize(self.frames, self.total)


def summarize(frames: dict, total: int) -> Optional[str]:
    """The bake's warning from ``frames`` (frame -> stats of each unconverged frame) out of
    ``total`` solved frames: which frames, which objects, and the likely cause (the warning of
    the worst frame, the one with most unconverged steps)."""
    if not frames:
        return None
    worst = max(frames, key=lambda f: (int(frames[f].get(UNCONVERGED_STEPS) or 0), -f))
    why = frames[worst].get(WARNING) or ""
    n = len(frames)
    head = (f"{n} of {max(total, n)} frames did not converge (frame{'s' if n > 1 else ''} {frame_ranges(frames)}); "
            "the result may be softer, lag or miss the set tolerance there")
    return f"{head}. Frame {worst}: {why}" if why else head + "."
