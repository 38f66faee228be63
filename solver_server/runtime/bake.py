"""``clearance-server bake``: bake a scene file to .pc2 files without any socket.

Runs the same job loop as the server (:func:`runner.run_job`) in this process, then writes one .pc2 per
simulated body covering every frame from frame_start. Two layouts, chosen by the scene:

- **The add-on's** (the scene carries its objects' world matrices, ``Body.world_matrices``: every scene the
  Blender add-on exports since protocol 1.7): the output folder is laid out like the add-on's own cache folder,
  the frames/state cache and stats.json in ``<out>/server/``, and each .pc2 named as the add-on names it
  (``protocol.cache_layout.pc2_file_name``) and written in the object's space of each frame
  (``cache_layout.to_local``, the add-on's own conversion), so the folder plays in Blender as the add-on's Bake
  does (Physics > Clearance Bake > Load Farm Bake). Granular bodies write their particles in world space.
- **World space** (a scene without world matrices: other tools, files exported before 1.7): the cache and
  stats.json in ``<out>``, ``<body name>.pc2`` per body (names sanitised for the file system), world space.

The log says which one it wrote.
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import Optional, TextIO

from protocol.cache_layout import SERVER_DIR, pc2_file_name, to_local
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
    """The scene baked over frames a..b only (every per-frame sample sliced: animation, pin targets, keyed
    pressure, world matrices, force fields; bodies start from their exported rest state at frame a)."""
    s = scene.settings
    if not (s.frame_start <= a < b <= s.frame_end):
        raise SceneError(f"--frames {a} {b} must lie within the scene's range {s.frame_start}..{s.frame_end} "
                         "with A < B", "", "frame_end")
    k0, k1 = a - s.frame_start, b - s.frame_start + 1
    bodies = tuple(dataclasses.replace(
        body,
        animation=None if body.animation is None else body.animation[k0:k1],
        pin_targets=None if body.pin_targets is None else body.pin_targets[k0:k1],
        pressure_samples=None if body.pressure_samples is None else body.pressure_samples[k0:k1],
        world_matrices=None if body.world_matrices is None else body.world_matrices[k0:k1]) for body in scene.bodies)
    fields = tuple(dataclasses.replace(
        f, strength=f.strength[k0:k1], matrix=f.matrix[k0:k1], flow=f.flow[k0:k1] if f.flow.size else f.flow)
        for f in scene.force_fields)
    return dataclasses.replace(scene, settings=dataclasses.replace(s, frame_start=a, frame_end=b), bodies=bodies,
                               force_fields=fields)


def object_space(scene: Scene) -> bool:
    """True when the scene carries world matrices (an add-on export): the bake then writes the add-on's layout
    in object space (module docstring)."""
    return any(b.world_matrices is not None for b in scene.simulated())


def output_files(scene: Scene, out_dir: str) -> dict:
    """body name -> the .pc2 path the bake writes for it (the add-on's names in object-space mode)."""
    names = [b.name for b in scene.simulated()]
    if object_space(scene):
        return {b.name: os.path.join(out_dir, pc2_file_name(b.name, b.role)) for b in scene.simulated()}
    return {n: os.path.join(out_dir, f) for n, f in pc2_names(names).items()}


def check_outputs(files: dict) -> None:
    """Refuse (SceneError naming the file) an output .pc2 path that is a symbolic link or not a regular file:
    the bake writes only its own files, never through a link."""
    for name, path in files.items():
        if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
            raise SceneError(f"{path} (the cache of {name}) is a symbolic link or not a regular file; the bake "
                             "never writes through one: remove it or choose another --out folder", name, "out")


def write_pc2_files(cache: JobCache, out_dir: str, frame_start: int, frame_end: int,
                    scene: Optional[Scene] = None) -> dict:
    """Write one .pc2 per body from the cached frames; returns body name -> path.

    With ``scene`` carrying world matrices each body's frame f is written in the object's space of frame f
    (granular bodies and bodies without matrices stay in world space), under the add-on's file names."""
    first = cache.read_frame(frame_start)
    if scene is not None and object_space(scene):
        paths = output_files(scene, out_dir)
        matrices = {b.name: b.world_matrices for b in scene.simulated() if b.role != "granular"}
    else:
        paths = {n: os.path.join(out_dir, f) for n, f in pc2_names(list(first)).items()}
        matrices = {}
    writers = {n: PC2Writer(p, len(first[n]), frame_start) for n, p in paths.items()}
    try:
        for f in range(frame_start, frame_end + 1):
            pos = first if f == frame_start else cache.read_frame(f)
            for n, w in writers.items():
                m = matrices.get(n)
                w.append(pos[n] if m is None else to_local(pos[n], m[min(f - frame_start, len(m) - 1)]))
    finally:
        for w in writers.values():
            w.close()
    return paths


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
    local = object_space(scene)
    cache_dir = os.path.join(out_dir, SERVER_DIR) if local else out_dir
    check_outputs(output_files(scene, out_dir))
    if local:
        print(f"output: object space (the scene carries its objects' world matrices), the add-on's cache layout: "
              f".pc2 files in {out_dir}, frame cache in {cache_dir}; play them in Blender with Physics > Clearance "
              "Bake > Load Farm Bake", file=log, flush=True)
    else:
        print(f"output: world space (the scene file has no world matrices): .pc2 files and frame cache in {out_dir}",
              file=log, flush=True)
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

    state = run_job(scene, cache_dir, resume, emit)
    end = result["end"]
    if state != "done":
        where = f" (object {end[6]!r}, field {end[5]!r})" if end[6] or end[5] else ""
        print(f"bake {state}: {end[4]}{where}", file=sys.stderr, flush=True)
        return 1 if state == "failed" else 2
    paths = write_pc2_files(JobCache(cache_dir), out_dir, s.frame_start, s.frame_end, scene)
    spaces = {b.name: "object space" if (local and b.role != "granular" and b.world_matrices is not None)
              else "world space" for b in scene.simulated()}
    for n, p in paths.items():
        print(f"wrote {p} ({n}, {spaces.get(n, 'world space')})", file=log, flush=True)
    print(f"bake done: {end[2]} frames in {out_dir}", file=log, flush=True)
    summary = report.summary()
    if summary:
        print(f"warning: {summary}", file=log, flush=True)
    return 0
