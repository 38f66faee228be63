#!/usr/bin/env python
"""Run Clearance's benchmarks and write docs/benchmarks.md.

Each area has its own script (scripts/bench_<area>.py) that measures Clearance against a peer in
the same run (a memory copy, IPC Toolkit, Blender's cloth, Taichi) and prints a markdown section.
This driver runs the chosen areas as separate processes (so one area's JIT warm-up or memory does
not disturb another), collects their output and writes the report with the machine's description.

    python scripts/bench.py                 # every area, full sizes
    python scripts/bench.py --quick         # smaller sizes, minutes instead of tens of minutes
    python scripts/bench.py protocol mpm    # only these areas (the others keep their last results)
    python scripts/bench.py --compose-only  # only rewrite docs/benchmarks.md from docs/bench/*.md

Each area's latest output is kept in docs/bench/<area>.md (with its date and machine) and
docs/benchmarks.md is composed from those files, so areas can be re-measured one at a time.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AREAS = {
    "protocol": "bench_protocol.py",
    "kernels": "bench_kernels.py",
    "ipc": "bench_ipc.py",
    "mpm": "bench_mpm.py",
    "fast": "bench_fast.py",
    "accurate": "bench_accurate.py",
    "coldstart": "bench_coldstart.py",
    "abd": "bench_abd.py",
    "tet10": "bench_tet10.py",
}
TITLES = {
    "protocol": "Protocol throughput: 1,000,000-vertex float32 frames over tcp loopback vs a memory copy",
    "kernels": "Contact kernels: distances, CCD and barrier vs IPC Toolkit (ipctk)",
    "ipc": "IPC solver: drape vs Blender's cloth, stack, scaling",
    "mpm": "MPM: particle-steps per second vs Taichi (CPU)",
    "fast": "Fast solver (block descent): drape vs Blender's cloth and vs the Accurate solver",
    "accurate": "Accurate path (Newton IPC): before / after the cheaper stopping rule, friction solve and Cholesky",
    "coldstart": "Cold and warm start: the first bake compiles the solver kernels; compiling ahead",
    "tet10": "Quadratic vs linear tetrahedra: cantilever against Euler-Bernoulli, cost per step",
    "abd": "Stiff bodies (ABD): 100 cubes of 1,016 vertices falling into a pile, Fast vs Blender's rigid body (Bullet); ABD vs stiff FEM",
}


def machine() -> str:
    """One line describing the CPU, core count, memory and Python/numba versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import numba
        nb = f", numba {numba.__version__}"
    except ImportError:
        nb = ""
    return f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}{nb}, {platform.system()} {platform.release()}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("areas", nargs="*", choices=[[], *AREAS], default=[], help="areas to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="smaller problem sizes")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--compose-only", action="store_true",
                    help="run nothing: rewrite the report from docs/bench/<area>.md (after editing one by hand)")
    args = ap.parse_args(argv)
    areas = [] if args.compose_only else (args.areas or list(AREAS))
    parts_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "bench")
    os.makedirs(parts_dir, exist_ok=True)
    stamp = f"_Measured {datetime.date.today().isoformat()}{' (quick sizes)' if args.quick else ''} on {machine()}._"
    failed = 0
    for area in areas:
        script = os.path.join(ROOT, "scripts", AREAS[area])
        cmd = [sys.executable, script] + (["--quick"] if args.quick else [])
        print(f"== {area}: {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            failed += 1
            sys.stderr.write(proc.stderr[-4000:])
            print(f"== {area} FAILED (exit {proc.returncode}); its previous results are kept")
            continue
        with open(os.path.join(parts_dir, f"{area}.md"), "w") as f:
            f.write(f"## {TITLES[area]}\n\n{proc.stdout.strip()}\n\n{stamp} Whole script: {dt:.0f} s.\n")
    sections = []
    for area in AREAS:
        part = os.path.join(parts_dir, f"{area}.md")
        if os.path.exists(part):
            with open(part) as f:
                sections.append(f.read().strip())
        else:
            sections.append(f"## {area}\n\nNot measured yet: `python scripts/bench.py {area}`.")
    head = (
        "# Benchmarks\n\n"
        "Written by `python scripts/bench.py` (see its docstring); each area's section comes from\n"
        "docs/bench/<area>.md and states when and where it was measured. Every figure is measured with\n"
        "its peer in the same run on the same machine, so compare ratios within a section.\n"
    )
    with open(args.out, "w") as f:
        f.write(head + "\n" + "\n\n".join(sections) + "\n")
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
