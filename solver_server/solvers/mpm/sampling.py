"""Particles inside a closed Blender mesh (role "granular").

Particles sit on a lattice of pitch ``Material.particle_spacing`` (m) centred in the mesh's bounding
box, keep the lattice points that are inside the mesh (ray parity, inside.py), then get a small
seeded jitter (a fraction of the spacing) that breaks the grid aliasing the book warns about (§27.1)
while keeping the spacing even. Each particle has rest volume spacing^3 (m^3) and mass
density * volume (kg); the count is about volume / spacing^3.
"""
from __future__ import annotations

import zlib

import numpy as np

from protocol.scene import Body, SceneError
from .inside import inside_columns, is_closed

JITTER = 0.3
"""Jitter amplitude as a fraction of the spacing (each coordinate moves by at most JITTER/2 spacing)."""


def lattice_count(vertices: np.ndarray, spacing: float) -> int:
    """Number of lattice points in the bounding box (an upper bound on the particle count)."""
    ext = vertices.max(axis=0) - vertices.min(axis=0)
    return int(np.prod(np.maximum(1, np.ceil(ext / spacing - 1e-9)).astype(np.int64)))


def sample_mesh(vertices: np.ndarray, triangles: np.ndarray, spacing: float, seed: int = 0,
                jitter: float = JITTER) -> np.ndarray:
    """(m, 3) float64 particle positions (m) inside the closed mesh, one per lattice cell of pitch
    ``spacing`` (m)."""
    V = np.ascontiguousarray(vertices, np.float64)
    T = np.ascontiguousarray(triangles, np.int32)
    lo = V.min(axis=0)
    hi = V.max(axis=0)
    n = np.maximum(1, np.ceil((hi - lo) / spacing - 1e-9)).astype(np.int64)
    start = 0.5 * (lo + hi) - 0.5 * (n - 1) * spacing
    xs = start[0] + spacing * np.arange(n[0])
    ys = start[1] + spacing * np.arange(n[1])
    cx, cy = np.meshgrid(xs, ys, indexing="ij")
    cx = cx.ravel().copy()
    cy = cy.ravel().copy()
    scale = float(np.max(hi - lo))
    inside = inside_columns(V, T, cx, cy, float(start[2]), float(spacing), int(n[2]), scale)
    col, k = np.nonzero(inside)
    pts = np.empty((col.size, 3))
    pts[:, 0] = cx[col]
    pts[:, 1] = cy[col]
    pts[:, 2] = start[2] + spacing * k
    if jitter > 0:
        rng = np.random.default_rng(seed)
        pts += (rng.random(pts.shape) - 0.5) * (jitter * spacing)
    return pts


def sample_body(body: Body) -> np.ndarray:
    """Particles (m, 3) float64 for a granular body; SceneError if its mesh is open or too thin."""
    closed, open_edges = is_closed(body.triangles)
    if not closed:
        raise SceneError(
            f"{body.name}: the granular role needs a closed mesh (particles are sampled inside it), but "
            f"{open_edges} edges are open; close the holes (e.g. Fill Holes) or use a solid primitive",
            body.name, "triangles")
    s = body.material.particle_spacing
    pts = sample_mesh(body.vertices, body.triangles, s, seed=zlib.crc32(body.name.encode()))
    if pts.shape[0] == 0:
        raise SceneError(
            f"{body.name}: no particle fits inside the mesh at particle spacing {s} m; lower the spacing",
            body.name, "particle_spacing")
    return pts
