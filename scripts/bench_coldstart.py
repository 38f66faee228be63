#!/usr/bin/env python
"""Cold and warm start of a bake: the first bake compiles the solver kernels, later ones load them.

For each solver quality (Fast, Accurate) a 3-frame IPC bake of a soft box falling onto a floor
collider (it lands in the first frame, so the contact kernels compile too) runs twice through
``clearance-server bake`` in fresh processes:

- **cold**: an empty kernel cache (a fresh ``NUMBA_CACHE_DIR``), as after an install or update;
- **warm**: the same cache again, as every later bake.

Reported: wall time of the whole process (start, compile, bake, write) and the kernels numba
compiled (counted from the ``compiling solver kernels N`` progress lines the bake prints).
Prints a markdown section (scripts/bench.py style).

    python scripts/bench_coldstart.py [--quick]     # --quick: Fast only
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "server"))

from protocol import save_scene  # noqa: E402
from test_convergence_warning import box_on_floor  # noqa: E402

KERNEL = re.compile(r"compiling solver kernels (\d+)")


def bake_once(scene_path: str, out: str, env: dict) -> tuple:
    """(seconds, kernels compiled, first-kernel seconds) of one ``clearance-server bake`` process."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "solver_server", "bake", scene_path, "--out", out],
                       cwd=ROOT, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    counts = [int(m.group(1)) for m in (KERNEL.search(x) for x in r.stdout.splitlines()) if m]
    return dt, max(counts, default=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="clearance_coldstart_") as tmp:
        for quality in ("fast",) if args.quick else ("fast", "accurate"):
            scene = box_on_floor(speed=3.0, frames=3)
            scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, solver_quality=quality))
            path = os.path.join(tmp, f"{quality}.clrscene")
            save_scene(path, scene)
            env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=os.path.join(tmp, f"numba_{quality}"),
                       CLEARANCE_STATE_DIR=os.path.join(tmp, f"state_{quality}"))
            for run in ("cold", "warm"):
                dt, n = bake_once(path, os.path.join(tmp, f"out_{quality}_{run}"), env)
                rows.append((quality, run, dt, n))
                print(f"{quality} {run}: {dt:.1f} s, {n} kernels compiled", file=sys.stderr, flush=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print("3-frame IPC bake of a soft box landing on a floor, `clearance-server bake` in a fresh process; cold = "
          "empty kernel cache (fresh `NUMBA_CACHE_DIR`), warm = the same cache again. Kernels counted from the "
          "bake's `compiling solver kernels N` lines (numba's own helpers included).\n")
    print("| solver quality | start | wall time (s) | kernels compiled |")
    print("| --- | --- | --- | --- |")
    for quality, run, dt, n in rows:
        print(f"| {quality} | {run} | {dt:.1f} | {n} |")
    print(f"\nLoad average at the end: {' '.join(load)} (the machine is shared; cold times grow with load).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
