"""Cusick drape test of the cloth presets (protocol/cloth_presets.py) with the Accurate solver.

A circular specimen 30 cm in diameter is clamped between two 18 cm discs (the pinned centre of the sheet)
and drapes under gravity until at rest. Drape coefficient DC = (projected area - disc area) /
(specimen area - disc area) (Cusick 1968; BS 5058 / ISO 9073-9 geometry). The projected (shadow) area is
rasterised at 0.5 mm. Usage:
    python scripts/cusick_drape.py [silk cotton denim ...] [--spacing 0.01] [--figure docs/img/cusick_drape.png]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.ipc.cusick import R_DISC, R_SHEET, run  # noqa: E402  (shared with tests/ipc/test_cusick_drape.py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("presets", nargs="*", default=["silk", "cotton", "denim"])
    ap.add_argument("--spacing", type=float, default=0.01)
    ap.add_argument("--frames", type=int, default=72)
    ap.add_argument("--figure", default="")
    a = ap.parse_args()
    out = []
    for name in a.presets:
        r = run(name, a.spacing, a.frames)
        out.append(r)
        print(f"{name:8s} DC {r['dc']:.3f} (every 12 frames: {' '.join(f'{d:.3f}' for d in r['history'])}) "
              f"nodes {r['nodes']} vmax {r['vmax']:.2e} m/s  {r['n_verts']} vertices  {r['seconds']:.0f} s", flush=True)
    if a.figure:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import PolyCollection
        fig, axs = plt.subplots(1, len(out), figsize=(3.2 * len(out), 3.4))
        for ax, r in zip(np.atleast_1d(axs), out):
            ax.add_collection(PolyCollection(r["x"][r["T"]][:, :, :2], facecolor="0.35", edgecolor="none"))
            ax.add_patch(plt.Circle((0, 0), R_SHEET, fill=False, ls="--", lw=0.8))
            ax.add_patch(plt.Circle((0, 0), R_DISC, fill=False, lw=0.8, color="w"))
            ax.set_xlim(-0.16, 0.16)
            ax.set_ylim(-0.16, 0.16)
            ax.set_aspect("equal")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{r['name']}: DC {r['dc']:.2f}, {r['nodes']} nodes", fontsize=9)
        fig.suptitle("Cusick drape (30 cm specimen on an 18 cm disc), Accurate solver, shadow from above", fontsize=9)
        fig.tight_layout()
        fig.savefig(a.figure, dpi=120)
        print("wrote", a.figure)


if __name__ == "__main__":
    main()
