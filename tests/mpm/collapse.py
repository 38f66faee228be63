"""Planar (quasi-2D) granular column collapse on a rough floor: the runout study of docs/mpm.md.

A sand column ``width`` x ``height`` (aspect ratio a = height / width) stands against a
frictionless symmetry wall at x = 0, between frictionless side walls 4 cells apart, on a rough
(mu = 1) floor collider, and is released. The deposit is measured once it has settled:
``front`` the furthest particle (m from the wall), ``edge`` where the deposit's thickness falls
below EDGE_THICKNESS (thickness binned at a fixed physical width, see ``edge``), ``x99`` / ``x90``
the positions behind which 99 % / 90 % of the mass lies (continuum measures: a single particle
layer at the tip does not move them), ``height`` the deposit's highest particle above the floor.

The furthest particle is not a continuum quantity: the last of N particles lies further out the
more particles there are, so it moves with the spacing by construction. Experiments read the
deposit's edge where its thickness vanishes at their resolution (Lube et al. 2005; Lajeunesse et
al. 2005); ``edge`` does the same at a resolution fixed in metres, independent of the spacing.

    .venv/bin/python -m tests.mpm.collapse        # the table in docs/mpm.md (minutes)
"""
from __future__ import annotations

import numpy as np

from solver_server.backends.mpm_backend import MPMBackend
from solver_server.solvers.mpm.materials import preset
from .scenes import collider_box, granular, scene

FLOOR = 0.02
"""Height (m) of the floor collider's top face."""
EDGE_BIN = 0.02
"""Width (m) of the bins over which the deposit's thickness is measured (the coarsest spacing)."""
EDGE_THICKNESS = 0.01
"""Thickness (m, 5 % of the column height) below which the deposit counts as ended."""


def thickness(p: np.ndarray, spacing: float, depth: float, bin_width: float = EDGE_BIN) -> tuple:
    """Deposit thickness along x: (bin centres, particle volume per bin / (bin width x depth)) in m,
    i.e. the thickness at the initial packing (the mass per area over the bulk density), for
    particles of volume spacing^3 across a slab ``depth`` m deep."""
    edges = np.arange(0.0, p[:, 0].max() + 2 * bin_width, bin_width)
    count, _ = np.histogram(p[:, 0], edges)
    return edges[:-1] + 0.5 * bin_width, count * spacing ** 3 / (bin_width * depth)


def edge(p: np.ndarray, spacing: float, depth: float, h_min: float = EDGE_THICKNESS,
         bin_width: float = EDGE_BIN) -> float:
    """Deposit edge (m): the first position, going out from the wall, where the binned thickness
    (``thickness``) falls below h_min, interpolated linearly between bin centres."""
    xc, h = thickness(p, spacing, depth, bin_width)
    i = int(np.argmax(h < h_min))
    if i == 0:
        return 0.0
    return float(xc[i - 1] + (h[i - 1] - h_min) / (h[i - 1] - h[i]) * (xc[i] - xc[i - 1]))


def collapse(spacing: float, grain_size: float, phi: float = 30.0, width: float = 0.25, height: float = 0.2,
             frames: int = 24, fps: float = 24.0) -> dict:
    """Release the column and return its deposit: front, edge, x99, x90, height (m, see module docstring),
    speed99 (99th percentile particle speed at the end, m/s) and the particle count."""
    dx = 2 * spacing
    depth = 4 * dx
    mat = preset("sand", friction_angle=phi, particle_spacing=spacing, grain_size=grain_size)
    length = max(1.0, width * (1 + 3 * height / width))
    floor = collider_box("Floor", (-0.2, -0.2, -0.2), (length + 0.4, depth + 0.2, FLOOR), friction=1.0)
    sand = granular("Sand", (0.0, 0.0, FLOOR), (width, depth, FLOOR + height), mat)
    be = MPMBackend(scene([sand, floor], frames=frames, fps=fps, domain=((0, 0, 0), (length, depth, height + 0.2)),
                          friction=0.0))
    for _ in range(frames):
        r = be.advance()
    p = r.positions["Sand"].astype(float)
    speed = np.linalg.norm(be.solver.v, axis=1)
    return {"front": float(p[:, 0].max()), "edge": edge(p, spacing, depth), "x99": float(np.percentile(p[:, 0], 99)),
            "x90": float(np.percentile(p[:, 0], 90)),
            "height": float(p[:, 2].max() - FLOOR), "speed99": float(np.percentile(speed, 99)),
            "particles": int(p.shape[0]), "positions": p}


def profile(p: np.ndarray, bin_width: float = 0.01) -> tuple:
    """Deposit surface: (x bin centres, highest particle above the floor per bin) in m."""
    edges = np.arange(0.0, p[:, 0].max() + bin_width, bin_width)
    idx = np.digitize(p[:, 0], edges) - 1
    h = np.zeros(len(edges))
    np.maximum.at(h, idx, p[:, 2] - FLOOR)
    return edges + 0.5 * bin_width, h


def study(spacings=(0.02, 0.01, 0.005), grain_sizes=(0.0, 1e-3), **kw) -> list:
    """One row per (grain size, spacing)."""
    rows = []
    for d in grain_sizes:
        for s in spacings:
            r = collapse(s, d, **kw)
            r.update(spacing=s, grain_size=d)
            rows.append(r)
            print(f"d={d * 1e3:.1f} mm  spacing={s * 100:.1f} cm  n={r['particles']:6d}  front={r['front']:.3f}  "
                  f"edge={r['edge']:.3f}  "
                  f"x99={r['x99']:.3f}  x90={r['x90']:.3f}  height={r['height']:.3f}  speed99={r['speed99']:.3f}", flush=True)
    return rows


if __name__ == "__main__":
    import sys
    aspect = float(sys.argv[1]) if len(sys.argv) > 1 else 0.8
    study(height=0.2, width=0.2 / aspect)
