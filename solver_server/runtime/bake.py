"""``clearance-server bake``: bake a scene file to .pc2 files without any socket.

Runs the same job loop as the server (:func:`runner.run_job`) in this process, writes the
frames/state cache into the output folder, then one ``<body name>.pc2`` per simulated body
(names sanitised for the file system) covering every frame from frame_start, and stats.json.
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import Optional, TextIO

from protocol.convergence import UNCONVERGED_OBJECTS, WARNING, ConvergenceReport
from protocol.pc2 import PC2Writer
from protocol.scene import INTEGRATORS, SOLVER_QUALITIES, Scene, SceneError
from .cache import JobCache
from .runner import run_job

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


def safe_filename(name: str) -> str:
    """A file-system-safe stem for a body name (same on every OS)."""
    stem = _UNSAFE.sub("_", name).strip("._") or "body"
    if stem.lower() in _RESERVED:
        stem = "_" + stem
    return stem[:120]


def pc2_names(names: list) -> dict:
    """body name -> unique file name ``<stem>.pc2`` (collisions get a numeric suffix)."""
    out, used = {}, set()
    for n in names:
        stem = safe_filename(n)
        cand, i = stem, 1
        while cand.lower() in used:
            i += 1
            cand = f"{stem}_{i}"
        used.add(cand.lower())
        out[n] = cand + ".pc2"
    return out


def restrict_frames(scene: Scene, a: int, b: int) -> Scene:
    """The scene baked over frames a..b only (animated samples sliced; bodies start from their
    exported rest state at frame a)."""
    s = scene.settings
    if not (s.frame_start <= a < b <= s.frame_end):
        raise SceneError(f"--frames {a} {b} must lie within the scene's range {s.frame_start}..{s.frame_end} "
                         "with A < B", "", "frame_end")
    k0, k1 = a - s.frame_start, b - s.frame_start + 1
    bodies = tuple(dataclasses.replace(
        body,
        animation=None if body.animation is None else body.animation[k0:k1],
        pin_targets=None if body.pin_targets is None else body.pin_targets[k0:k1]) for body in scene.bodies)
    return dataclasses.replace(scene, settings=dataclasses.replace(s, frame_start=a, frame_end=b), bodies=bodies)


def write_pc2_files(cache: JobCache, out_dir: str, frame_start: int, frame_end: int) -> dict:
    """Write one .pc2 per body from the cached frames; returns body name -> path."""
    first = cache.read_frame(frame_start)
    files = pc2_names(list(first))
    writers = {n: PC2Writer(os.path.join(out_dir, f), len(first[n]), frame_start) for n, f in files.items()}
    try:
        for f in range(frame_start, frame_end + 1):
            pos = first if f == frame_start else cache.read_frame(f)
            for n, w in writers.items():
                w.append(pos[n])
    finally:
        for w in writers.values():
            w.close()
    return {n: os.path.join(out_dir, f) for n, f in files.items()}


def with_solver_quality(scene: Scene, quality: str) -> Scene:
    """The scene with ``settings.solver_quality`` replaced (``--solver-quality``), so a farm can
    bake one scene file with either IPC solver without rewriting the file. Raises SceneError
    naming ``solver_quality`` for a value that is not one of SOLVER_QUALITIES."""
    if quality not in SOLVER_QUALITIES:
        raise SceneError(f"unknown solver quality {quality!r}; use one of {SOLVER_QUALITIES}", "", "solver_quality")
    return dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, solver_quality=quality))


def with_integrator(scene: Scene, integrator: str) -> Scene:
    """The scene with ``settings.integrator`` replaced (``--integrator``); SceneError naming
    ``integrator`` for a value that is not one of INTEGRATORS."""
    if integrator not in INTEGRATORS:
        raise SceneError(f"unknown integrator {integrator!r}; use one of {INTEGRATORS}", "", "integrator")
    return dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, integrator=integrator))


def bake(scene: Scene, out_dir: str, frames: Optional[tuple] = None, resume: bool = False,
         log: TextIO = sys.stdout, solver_quality: Optional[str] = None, integrator: Optional[str] = None) -> int:
    """Bake to ``out_dir``; returns a process exit code (0 success, 1 failure, 2 cancelled).

    ``frames`` (A, B) bakes that sub-range; ``solver_quality`` ("fast" or "accurate") overrides
    the scene's, ``integrator`` ("implicit_euler" or "bdf2") likewise. The overridden scene is the one
    hashed for ``resume``, so resuming with the other quality or integrator is refused like any other
    changed setting."""
    if frames is not None:
        scene = restrict_frames(scene, *frames)
    if solver_quality is not None:
        scene = with_solver_quality(scene, solver_quality)
    if integrator is not None:
        scene = with_integrator(scene, integrator)
    os.makedirs(out_dir, exist_ok=True)
    s = scene.settings
    print(f"backend {s.backend}, solver quality {s.solver_quality}, integrator {s.integrator}"
          + ("" if s.backend == "ipc" else " (used by the ipc backend only)"), file=log, flush=True)
    result = {}
    report = ConvergenceReport()

    mode = ["building"]

    def emit(ev: tuple) -> None:
        if ev[0] == "progress":
            mode[0] = ev[1]
            print(f"[{ev[1]}] frame {ev[2]} {100 * ev[3]:5.1f}% {ev[4]}", file=log, flush=True)
        elif ev[0] == "frame":
            st = ev[4]
            extra = " ".join(f"{k}={st[k]:.3g}" if isinstance(st[k], float) else f"{k}={st[k]}" for k in st
                             if k not in (WARNING, UNCONVERGED_OBJECTS))
            what = "kept from the cache" if mode[0] == "resuming" else "done"
            print(f"frame {ev[1]} {what} {extra}", file=log, flush=True)
            if ev[1] != s.frame_start:
                warning = report.add(ev[1], st)
                if warning:
                    print(f"warning: frame {ev[1]} did not converge: {warning}", file=log, flush=True)
        elif ev[0] == "end":
            result["end"] = ev

    state = run_job(scene, out_dir, resume, emit)
    end = result["end"]
    if state != "done":
        where = f" (object {end[6]!r}, field {end[5]!r})" if end[6] or end[5] else ""
        print(f"bake {state}: {end[4]}{where}", file=sys.stderr, flush=True)
        return 1 if state == "failed" else 2
    paths = write_pc2_files(JobCache(out_dir), out_dir, s.frame_start, s.frame_end)
    for n, p in paths.items():
        print(f"wrote {p} ({n})", file=log, flush=True)
    print(f"bake done: {end[2]} frames in {out_dir}", file=log, flush=True)
    summary = report.summary()
    if summary:
        print(f"warning: {summary}", file=log, flush=True)
    return 0
