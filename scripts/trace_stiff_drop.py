"""Trace one stiff cube of benchmarks/abd.py's pile dropped onto the ground, as an affine body (ABD) or
as a stiff FEM solid (E = 1e8 Pa), with the Fast or the Accurate solver: per frame the centre height, its
vertical speed (finite difference over the frame), the lowest vertex, the cube's height (its z extent:
0.1 m when undeformed), the solver's iterations and the contact pairs at the end of the frame.

    python scripts/trace_stiff_drop.py fast fem [--div 13] [--frames 6] [--sweeps 0]

Written to find out why the stiff FEM cubes of the ABD vs stiff FEM comparison (docs/bench/abd.md) had no
contacts at the end of frame 4: --sweeps N raises the Fast solver's sweep budget per step (default 16)
to see whether the result changes once the block descent is given more work. The cube starts 1 cm
above the ground (the pile's bottom layer) and lands during frame 1-2; static sag under its own weight
at E = 1e8 Pa is rho g L^2 / 2E = 0.25 um, so a height that departs from 0.1 m by more than ~1e-6 m is
not the physics of the material.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import abd as bench_abd  # noqa: E402
from solver_server.backends.mesh_backend import MeshBackend  # noqa: E402


def trace(quality: str, fem: bool, div: int, frames: int, sweeps: int = 0) -> None:
    sc = bench_abd.make_scene(1, div, frames, quality, side=1)
    b = MeshBackend(sc)
    if fem:
        bench_abd._as_stiff_fem(b, sc)
    if sweeps and quality == "fast":
        b.stepper.max_sweeps = sweeps
    name = sc.bodies[0].name
    c_prev = b.system.body_positions(b.stepper.x)[name].mean(0)
    dt = sc.settings.dt
    unit = "sweeps" if quality == "fast" else "Newton it."
    print(f"{quality} {'stiff FEM' if fem else 'ABD'}, div {div} ({len(sc.bodies[0].vertices)} surface vertices), "
          f"{b.system.n} vertices, {len(b.system.elastic.tets)} tets, kappa {b.contact.kappa:.3g}"
          + (f", {sweeps} sweeps per step" if sweeps and quality == "fast" else ""), flush=True)
    print("frame | centre z (mm) | v_z (mm/s) | lowest z (mm) | height (mm) | iterations | contacts | CPU s")
    for f in range(frames):
        c0 = time.process_time()
        r = b.advance()
        P = b.system.body_positions(b.stepper.x)[name].astype(np.float64)
        c = P.mean(0)
        vz = (c[2] - c_prev[2]) / dt
        c_prev = c
        print(f"{f + 1} | {1e3 * c[2]:.3f} | {1e3 * vz:+.1f} | {1e3 * P[:, 2].min():.3f} | {1e3 * np.ptp(P[:, 2]):.3f} | "
              f"{r.stats['newton_iterations']} {unit} | {r.stats['contacts']} | {time.process_time() - c0:.1f}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("quality", choices=("fast", "accurate"))
    ap.add_argument("kind", choices=("abd", "fem"))
    ap.add_argument("--div", type=int, default=13)
    ap.add_argument("--frames", type=int, default=6)
    ap.add_argument("--sweeps", type=int, default=0, help="Fast: sweep budget per step (0: the solver's)")
    a = ap.parse_args()
    trace(a.quality, a.kind == "fem", a.div, a.frames, a.sweeps)


if __name__ == "__main__":
    main()
