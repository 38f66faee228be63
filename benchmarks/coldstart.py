"""Cold and warm start of a bake: the first bake compiles the solver kernels, later ones load them.

For each solver quality (Fast, Accurate) a 3-frame IPC bake of a soft box falling onto a floor
collider (it lands in the first frame, so the contact kernels compile too) runs twice through
``clearance-server bake`` in fresh processes:

- **cold**: an empty kernel cache (a fresh ``NUMBA_CACHE_DIR``), as after an install or update;
- **warm**: the same cache again, as every later bake.

Reported: wall time of the whole process (start, compile, bake, write) and the kernels numba
compiled (counted from the ``compiling solver kernels N`` progress lines the bake prints).

Compile ahead (``warmup_only=yes``, also part of the full run): with an empty cache, ``python -m
solver_server.runtime.warmup`` (what the add-on runs right after installing the solver and before starting
a server with a cold cache), then the same warm-up with ``--if-cold`` (what every later server start
pays), then the Fast box bake: how long the artist's first bake takes once the warm-up ran.

    python -m benchmarks [--quick] coldstart [warmup_only=yes]   # --quick: Fast only; warmup_only: compile-ahead only
"""
from __future__ import annotations

import dataclasses
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

from protocol import save_scene
from tests.server.test_convergence_warning import box_on_floor

from .report import Table, log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE = "Cold and warm start: the first bake compiles the solver kernels; compiling ahead"

KERNEL = re.compile(r"compiling solver kernels (\d+)")


def timed(cmd: list, env: dict) -> tuple:
    """(wall seconds, CPU seconds, stdout) of one process. CPU time (user + system of the process and
    its children) is the figure that does not grow with other jobs' load on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(r.stdout[-1000:] + r.stderr[-2000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dt, cpu, r.stdout


def _kernels(stdout: str) -> int:
    return max((int(m.group(1)) for m in (KERNEL.search(x) for x in stdout.splitlines()) if m), default=0)


def bake_once(scene_path: str, out: str, env: dict) -> tuple:
    """(wall s, CPU s, kernels compiled) of one ``clearance-server bake`` process."""
    dt, cpu, out_text = timed([sys.executable, "-m", "solver_server", "bake", scene_path, "--out", out], env)
    return dt, cpu, _kernels(out_text)


def warmup_once(env: dict, *extra: str) -> tuple:
    """(wall s, CPU s, kernels compiled) of one ``python -m solver_server.runtime.warmup`` process."""
    dt, cpu, out_text = timed([sys.executable, "-m", "solver_server.runtime.warmup", *extra], env)
    return dt, cpu, _kernels(out_text)


def compile_ahead(tmp: str) -> list:
    """Rows (step, seconds, kernels) of the compile-ahead sequence from an empty cache."""
    scene = box_on_floor(speed=3.0, frames=3)
    scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, solver_quality="fast"))
    path = os.path.join(tmp, "warm_fast.clrscene")
    save_scene(path, scene)
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=os.path.join(tmp, "numba_warmup"),
               CLEARANCE_STATE_DIR=os.path.join(tmp, "state_warmup"))
    rows = []
    for step, run in (("warm-up, empty cache (after install)", lambda: warmup_once(env)),
                      ("warm-up --if-cold, warmed cache (every server start)", lambda: warmup_once(env, "--if-cold")),
                      ("first Fast bake after the warm-up", lambda: bake_once(path, os.path.join(tmp, "out_w"), env))):
        dt, cpu, n = run()
        rows.append((step, dt, cpu, n))
        log("coldstart", f"{step}: {dt:.1f} s ({cpu:.1f} s CPU), {n} kernels compiled")
    return rows


def section(quick: bool = False, warmup_only: bool = False) -> list:
    rows, ahead = [], []
    with tempfile.TemporaryDirectory(prefix="clearance_coldstart_") as tmp:
        ahead = compile_ahead(tmp)
        for quality in () if warmup_only else ("fast",) if quick else ("fast", "accurate"):
            scene = box_on_floor(speed=3.0, frames=3)
            scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, solver_quality=quality))
            path = os.path.join(tmp, f"{quality}.clrscene")
            save_scene(path, scene)
            env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=os.path.join(tmp, f"numba_{quality}"),
                       CLEARANCE_STATE_DIR=os.path.join(tmp, f"state_{quality}"))
            for run in ("cold", "warm"):
                dt, cpu, n = bake_once(path, os.path.join(tmp, f"out_{quality}_{run}"), env)
                rows.append((quality, run, f"{dt:.1f}", f"{cpu:.1f}", n))
                log("coldstart", f"{quality} {run}: {dt:.1f} s ({cpu:.1f} s CPU), {n} kernels compiled")
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    parts = []
    if rows:
        parts += ["3-frame IPC bake of a soft box landing on a floor, `clearance-server bake` in a fresh process; cold = "
                  "empty kernel cache (fresh `NUMBA_CACHE_DIR`), warm = the same cache again. Kernels counted from the "
                  "bake's `compiling solver kernels N` lines (numba's own helpers included).",
                  Table(["solver quality", "start", "wall time (s)", "CPU time (s)", "kernels compiled"], rows)]
    parts += ["Compile ahead: `python -m solver_server.runtime.warmup` (a soft box and a cloth sheet landing on a floor, "
              "Fast, 3 frames) from an empty cache, as the add-on runs it after installing the solver; then again with "
              "`--if-cold`, as before every server start; then the Fast box bake above, the artist's first bake.",
              Table(["step", "wall time (s)", "CPU time (s)", "kernels compiled"],
                    [(step, f"{dt:.1f}", f"{cpu:.1f}", n) for step, dt, cpu, n in ahead]),
              f"Load average at the end: {' '.join(load)} (the machine is shared: wall times grow with load, CPU "
              f"times (user + system, the process and its threads) much less)."]
    return parts
