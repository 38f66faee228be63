"""PBNG vs Newton on the seed's quasistatic stretching block (seed 001 Sec. 10.1), at equal residual.

The block (a bar 0.4 x 0.1 x 0.1 m of 6-tet cubes, corotated, E = 1e5 Pa, nu = 0.3, no gravity)
has both ends clamped, one end pulled to 1.5x the length and the ends twisted by +-30 deg; the start
is the rest shape with only the ends moved. Both solvers minimise the same energy (the project's
tet kernels) from the same start: Newton = projected Newton with the project's sparse solver and a
backtracking line search; PBNG = coloured per-vertex Newton sweeps with Chebyshev acceleration
(solver_server/blockdescent/quasistatic.py). Reported: wall time to reach 1e-2, 1e-3, 1e-4 and
1e-6 of the start residual |grad E| (N), and the ratio Newton / PBNG. The paper reports PBNG 6-7x
faster than Newton on its muscle scene at visual accuracy and slower than Newton at tight residuals.

Usage: python scripts/bench_pbng.py [--cells 32 8 8] [--sweeps 4000] [--plot docs/img/pbng_residual.png]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from solver_server.blockdescent.quasistatic import lattice_bar, newton_solve, pbng_solve  # noqa: E402

LEVELS = (1e-2, 1e-3, 1e-4, 1e-6)


def run(cells, sweeps: int, parallel: bool) -> dict:
    prob = lattice_bar(tuple(cells), stretch=1.5, twist_deg=60.0)
    # warm the JIT on a tiny copy so compile time is not timed
    small = lattice_bar((4, 2, 2), stretch=1.5, twist_deg=60.0)
    newton_solve(small, max_iter=2)
    for mode in ("chebyshev", "plain"):
        pbng_solve(small, 4, mode=mode, every=2, parallel=parallel)
    r0 = prob.residual(prob.x0)
    newton = newton_solve(prob, max_iter=80, tol=1e-9 * r0)
    out = {"cells": list(cells), "vertices": int(prob.x0.shape[0]), "tets": int(len(prob.elastic.tets)),
           "r0": r0, "newton": newton, "pbng": {}}
    for mode in ("chebyshev", "plain"):
        out["pbng"][mode] = pbng_solve(prob, sweeps, mode=mode, every=max(sweeps // 200, 1), parallel=parallel)
    return out


def markdown(res: dict) -> str:
    r0 = res["r0"]
    n = res["newton"]
    lines = [f"Seed 001 stretching block, {res['cells'][0]}x{res['cells'][1]}x{res['cells'][2]} cubes: "
             f"{res['vertices']} vertices, {res['tets']} tets; start residual {r0:.3g} N. Wall time (s) to reach "
             "a residual (fraction of the start):", "",
             "| residual | Newton s (iterations) | PBNG Chebyshev s (sweeps) | PBNG plain s (sweeps) | Newton / PBNG Chebyshev |",
             "|---|---|---|---|---|"]
    for lv in LEVELS:
        cells = [f"{lv:g}"]
        tn = n.seconds_to(lv * r0)
        it_n = next((i for i, r in zip(n.iterations, n.residual) if r <= lv * r0), None)
        cells.append("not reached" if tn is None else f"{tn:.2f} ({it_n})")
        tc = None
        for mode in ("chebyshev", "plain"):
            tr = res["pbng"][mode]
            t = tr.seconds_to(lv * r0)
            sw = next((i for i, r in zip(tr.iterations, tr.residual) if r <= lv * r0), None)
            cells.append(f"not reached in {tr.iterations[-1]}" if t is None else f"{t:.2f} ({sw})")
            if mode == "chebyshev":
                tc = t
        cells.append(f"{tn / tc:.2f}x" if (tn is not None and tc) else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(res: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    r0 = res["r0"]
    n = res["newton"]
    ax.semilogy(n.seconds, np.asarray(n.residual) / r0, "o-", label="Newton (projected, sparse direct)")
    for mode, style in (("chebyshev", "-"), ("plain", "--")):
        tr = res["pbng"][mode]
        ax.semilogy(tr.seconds, np.asarray(tr.residual) / r0, style, label=f"PBNG {mode}")
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("residual / start residual")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, nargs=3, default=[32, 8, 8])
    ap.add_argument("--sweeps", type=int, default=4000)
    ap.add_argument("--quick", action="store_true", help="16x4x4 cubes, 1500 sweeps")
    ap.add_argument("--parallel", action="store_true", help="sweep large colours on numba's threads")
    ap.add_argument("--plot", default=None)
    a = ap.parse_args()
    cells, sweeps = ((16, 4, 4), 1500) if a.quick else (a.cells, a.sweeps)
    res = run(cells, sweeps, a.parallel)
    print(markdown(res))
    if a.plot:
        try:
            plot(res, a.plot)
        except ImportError as e:
            print(f"no plot: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
