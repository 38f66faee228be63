"""Restitution of a soft cube dropped on a plane against the IPC substep count (issue 10, "Bounce").

Implicit Euler damps fast motion, and an impact is fast: the rebound the artist sees depends on how
many steps resolve the contact. Soft cube 0.2 m (2x2x2 divisions), E = 1e5 Pa, rho = 1000 kg/m^3,
centre dropped from 0.3 m onto a frictionless plane, 24 fps, 18 frames. Restitution
e = sqrt(rise / fall) of the centroid height around its first bounce (frame-sampled): the fall from
the drop height to the first frame after which the centroid rises, the rise from there to the next
highest frame before it falls again (a bouncy cube's second impact may sink lower than its first).

    .venv/bin/python scripts/measure_bounce.py [accurate|fast] [1,4,16,64] [implicit_euler|bdf2] [damping s]

Figures in docs/solver.md ("Bounce") and docs/addon.md ("Substeps and bouncing").
"""
from __future__ import annotations

import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.ipc.bounce import restitution  # noqa: E402  (shared with tests/ipc/test_bdf2.py)


def main() -> None:
    quality = sys.argv[1] if len(sys.argv) > 1 else "accurate"
    counts = [int(a) for a in (sys.argv[2] if len(sys.argv) > 2 else "1,4,16,64").split(",")]
    integrator = sys.argv[3] if len(sys.argv) > 3 else "implicit_euler"
    damping = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    for s in counts:
        t0 = time.time()
        e = restitution(quality, s, integrator, damping)
        print(f"{quality} {integrator} damping {damping:g} s: {s:3d} substeps at 24 fps -> restitution {e:.2f} "
              f"({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
