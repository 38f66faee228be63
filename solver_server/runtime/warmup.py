"""Compile ahead: ``clearance-server warmup`` compiles the solver kernels before the first bake.

numba compiles a kernel the first time it is called, so a cold first bake spends minutes compiling
(docs/benchmarks.md, "Cold and warm start"). The add-on runs this command right after it installs
the solver, and before it starts a server whose kernel cache is cold, so the artist sees
``compiling solver kernels 12/~58`` while setting up the shot rather than a frozen first frame.

It bakes a tiny built-in scene (a soft box and a cloth sheet landing on a floor, 3 frames, in a
temporary folder) for each requested solver quality: the kernels a real bake of solids, cloth and
colliders needs are then in the on-disk cache (:mod:`solver_server.runtime.kernel_cache`), and a marker
``warm-warmup-<quality>`` records it so ``--if-cold`` returns at once afterwards (the marker lives
in the cache folder of the current sources, so an update compiles again).

``--scene FILE`` warms a bake of that scene file instead (or besides, with ``--solver-quality``): the
built-in scene compiles the mesh solvers' kernels only, so a farm that bakes MPM shots warms with one
of them; its marker is ``warm-warmup-scene-<scene hash>``.

Printed, one line per compiled kernel: ``compiling solver kernels 12/~58: module.kernel (41 s)``,
then ``warm-up done: 260 kernels compiled for fast in 204 s; kernel cache: <folder>``.
Also ``python -m solver_server.runtime.warmup`` (what the add-on runs: it needs no console script).
"""
from __future__ import annotations

import io
import os
import re
import sys
import tempfile
import time
from typing import Iterable, TextIO

from . import kernel_cache

QUALITIES = ("fast", "accurate")
_KERNEL = re.compile(r"compiling solver kernels \d+.*")
DESCRIPTION = ("Compile the solver kernels ahead of the first bake: one line per kernel, then a summary "
               "(kernels, seconds, kernel cache folder). Exit codes: 0 compiled or already warm, 1 a warm-up "
               "bake failed, 2 bad arguments, 3 the kernel cache folder cannot be written")


def marker_name(quality: str) -> str:
    """The kernel_cache marker of a finished warm-up of ``quality``."""
    return f"warmup-{quality}"


def is_warm(quality: str) -> bool:
    """True when a warm-up of ``quality`` finished with the current sources."""
    return kernel_cache.is_warm(marker_name(quality))


def warmup_scene(quality: str = "fast"):
    """A soft 0.2 m box thrown onto a floor and a 7x7-vertex cloth sheet falling onto it beside the
    box: both touch the floor within the 3 frames, so contact, friction and CCD kernels compile. For
    "accurate" also a box of quadratic tets (its elastic_tet10 kernels: ~130 s of compile on a loaded
    machine otherwise paid by the first quadratic bake)."""
    import numpy as np
    from protocol.scene import Body, Material, Scene, Settings

    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64) * 0.1
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    box_tris = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))], np.int32)
    box = Body("Warm-up Box", "solid", corners + (0.0, 0.0, 0.2), box_tris, material=Material(youngs_modulus=1e5),
               initial_velocity=(0.0, 0.0, -3.0))
    n = 7
    u = np.linspace(-0.2, 0.2, n)
    gx, gy = np.meshgrid(u, u, indexing="ij")
    sheet_v = np.column_stack([gx.ravel() + 0.6, gy.ravel(), np.full(n * n, 0.03)]).astype(np.float64)
    idx = np.arange(n * n).reshape(n, n)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    sheet_t = np.concatenate([np.column_stack([a, b, c]), np.column_stack([a, c, d])]).astype(np.int32)
    sheet = Body("Warm-up Sheet", "cloth", sheet_v, sheet_t,
                 material=Material(density=200.0, youngs_modulus=1e6, thickness=0.002),
                 initial_velocity=(0.0, 0.0, -1.0))
    floor = Body("Warm-up Floor", "collider",
                 np.array([(-1.5, -1.5, 0), (1.5, -1.5, 0), (1.5, 1.5, 0), (-1.5, 1.5, 0)], np.float64),
                 np.array([(0, 1, 2), (0, 2, 3)], np.int32))
    settings = Settings(frame_start=1, frame_end=4, backend="ipc", solver_quality=quality)
    bodies = (box, sheet, floor)
    if quality == "accurate":  # quadratic tets (Material.element) are an Accurate-only option: compile them too
        quad = Body("Warm-up Quadratic Box", "solid", corners + (-0.6, 0.0, 0.2), box_tris,
                    material=Material(youngs_modulus=1e5, element="quadratic"), initial_velocity=(0.0, 0.0, -3.0))
        bodies = (box, quad, sheet, floor)
    return Scene(settings, bodies, name=f"warm-up ({quality})")


class _KernelLines(io.TextIOBase):
    """A log that forwards only the bake's kernel lines ('compiling solver kernels ...'), once each."""

    def __init__(self, out: TextIO):
        self.out = out
        self.last = ""
        self.count = 0

    def write(self, text: str) -> int:
        for line in text.splitlines():
            m = _KERNEL.search(line)
            if m and m.group(0) != self.last:   # the server repeats its last progress as a heartbeat
                self.last = m.group(0)
                self.count += 1
                print(self.last, file=self.out, flush=True)
        return len(text)


EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CACHE = 0, 1, 2, 3
"""Exit codes: compiled (or already warm), a warm-up bake failed, bad arguments, the kernel cache
folder cannot be written (compiled kernels would be lost when the process ends)."""


def _targets(qualities: Iterable[str], scene_files: Iterable[str]):
    """[(label, marker, Scene)] to warm: the built-in scene per quality, then each scene file.
    Raises SceneError / ProtocolError / OSError for a scene file that cannot be read or is refused."""
    from protocol import load_scene
    from .cache import scene_hash
    out = [(quality, marker_name(quality), warmup_scene(quality)) for quality in qualities]
    for path in scene_files:
        scene = load_scene(path)
        scene.validate()
        out.append((f"scene {os.path.basename(path)}", f"warmup-scene-{scene_hash(scene)[:16]}", scene))
    return out


def warmup(qualities: Iterable[str] = ("fast",), if_cold: bool = False, log: TextIO = sys.stdout,
           scene_files: Iterable[str] = ()) -> int:
    """Compile the kernels of each solver quality (the built-in scene) and of each scene file;
    returns a process exit code (:data:`EXIT_OK` ...).

    Prints one line per compiled kernel, then a summary: kernels compiled, seconds, cache folder."""
    from .bake import bake
    qualities = list(qualities)
    for quality in qualities:
        if quality not in QUALITIES:
            print(f"clearance-server warmup: unknown solver quality {quality!r}; use {QUALITIES}", file=sys.stderr)
            return EXIT_USAGE
    try:
        targets = _targets(qualities, scene_files)
    except Exception as e:   # a scene file that cannot be read or is refused
        print(f"clearance-server warmup: cannot warm up with this scene file: {e}", file=sys.stderr)
        return EXIT_USAGE
    folder = kernel_cache.active_dir()
    if not kernel_cache.is_writable():
        print(f"clearance-server warmup: cannot write the kernel cache folder {folder}: compiled kernels would be "
              f"lost when this process ends. Set CLEARANCE_STATE_DIR (or NUMBA_CACHE_DIR) to a writable folder",
              file=sys.stderr, flush=True)
        return EXIT_CACHE
    t_all, compiled, warmed = time.perf_counter(), 0, []
    for label, marker, scene in targets:
        if if_cold and kernel_cache.is_warm(marker):
            print(f"warm-up {label}: kernels already compiled", file=log, flush=True)
            continue
        print(f"warm-up {label}: compiling solver kernels (once per install or update; minutes on a slow "
              f"machine)", file=log, flush=True)
        t0 = time.perf_counter()
        lines = _KernelLines(log)
        with tempfile.TemporaryDirectory(prefix="clearance_warmup_") as tmp:
            code = bake(scene, os.path.join(tmp, "out"), log=lines)
        if code != 0:
            print(f"clearance-server warmup: the {label} warm-up bake failed (exit code {code}); the kernels "
                  f"compiled so far stay in {folder}", file=sys.stderr, flush=True)
            return EXIT_FAILED
        kernel_cache.mark_warm(marker)
        compiled += lines.count
        warmed.append(label)
        print(f"warm-up {label}: done in {time.perf_counter() - t0:.0f} s ({lines.count} kernels compiled)",
              file=log, flush=True)
    what = f"{compiled} kernels compiled for {' and '.join(warmed)}" if warmed else "nothing to compile"
    print(f"warm-up done: {what} in {time.perf_counter() - t_all:.0f} s; kernel cache: {folder}", file=log,
          flush=True)
    return EXIT_OK


def add_arguments(p) -> None:
    """The warm-up's options (shared by ``clearance-server warmup`` and ``python -m solver_server.runtime.warmup``)."""
    p.add_argument("--solver-quality", choices=QUALITIES, action="append",
                   help="solver whose kernels to compile (repeatable; default: fast, the default of new scenes)")
    p.add_argument("--scene", action="append", metavar="FILE",
                   help="also (without --solver-quality: only) compile the kernels a bake of this .clrscene needs, "
                        "e.g. an MPM shot, which the built-in scene does not cover (repeatable)")
    p.add_argument("--if-cold", action="store_true", help="return at once when a warm-up of these sources finished")


def run(args) -> int:
    """Run the warm-up for parsed :func:`add_arguments` options."""
    scenes = args.scene or []
    qualities = args.solver_quality or ([] if scenes else ["fast"])
    return warmup(qualities, if_cold=args.if_cold, scene_files=scenes)


def main(argv=None) -> int:
    """``python -m solver_server.runtime.warmup [--solver-quality fast|accurate ...] [--scene FILE ...] [--if-cold]``
    (the same as ``clearance-server warmup``)."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m solver_server.runtime.warmup", description=DESCRIPTION)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
