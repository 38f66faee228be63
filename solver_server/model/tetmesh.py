"""Tetrahedralisation of a closed artist surface for the solid role.

Method (documented in docs/solver.md):
1. nodes = the artist's vertices (first, in their order, so the simulated surface *is* the artist's
   surface and no embedding is needed) + a body-centred-cubic lattice of interior points with
   spacing ``h`` kept where the generalised winding number says "inside" and at least h/2 away from
   the surface samples;
2. Delaunay tetrahedralisation of all nodes (scipy.spatial.Delaunay, Qhull);
3. keep tets whose centroid is inside (winding number > 1/2) and which are not flat (quality
   6 sqrt(2) V / l_rms^3 above a small threshold);
4. every artist vertex left without a tet gets back its best incident Delaunay tet, so each vertex
   carries mass and stiffness; interior lattice points left unused are dropped.
Tets are oriented positively. Units: metres.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import Delaunay, cKDTree

from protocol.scene import SceneError
from .winding import winding_numbers

MIN_QUALITY = 0.02


@dataclass
class TetMesh:
    """nodes (N, 3) float64 with the artist's vertices first (rows 0..n_surface-1); tets (T, 4) int32,
    positive volume."""

    nodes: np.ndarray
    tets: np.ndarray
    n_surface: int


def tet_quality(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """6 sqrt(2) V / l_rms^3: 1 for a regular tet, 0 for a flat one (signed by orientation)."""
    p = nodes[tets]
    vol = np.einsum("ij,ij->i", p[:, 1] - p[:, 0], np.cross(p[:, 2] - p[:, 0], p[:, 3] - p[:, 0])) / 6.0
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    l2 = sum(((p[:, a] - p[:, b]) ** 2).sum(axis=1) for a, b in pairs) / 6.0
    return 6.0 * np.sqrt(2.0) * vol / np.maximum(l2, 1e-300) ** 1.5


def default_spacing(vertices: np.ndarray, triangles: np.ndarray, max_interior: int = 20000) -> float:
    """Lattice spacing (m): the mean surface edge length, capped below at the value giving about
    ``max_interior`` lattice points in the bounding box."""
    e = vertices[triangles[:, [1, 2, 0]]] - vertices[triangles]
    mean_edge = float(np.linalg.norm(e, axis=2).mean())
    ext = np.ptp(vertices, axis=0)
    floor = float((np.prod(np.maximum(ext, 1e-9)) * 2.0 / max_interior) ** (1.0 / 3.0))
    return max(min(mean_edge, float(ext.max()) / 3.0), floor)


def _surface_samples(vertices, triangles):
    a, b, c = vertices[triangles[:, 0]], vertices[triangles[:, 1]], vertices[triangles[:, 2]]
    return np.concatenate([vertices, (a + b + c) / 3.0, (a + b) / 2.0, (b + c) / 2.0, (c + a) / 2.0])


def tetrahedralize(name: str, vertices: np.ndarray, triangles: np.ndarray, spacing: float | None = None) -> TetMesh:
    """Tetrahedralise the closed surface (vertices, triangles) of body ``name``; see module doc."""
    vertices = np.ascontiguousarray(vertices, np.float64)
    tris = np.ascontiguousarray(triangles, np.int64)
    h = spacing if spacing else default_spacing(vertices, tris)
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    axes = [np.arange(lo[i] + 0.5 * h, hi[i], h) for i in range(3)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    axes_c = [np.arange(lo[i] + h, hi[i], h) for i in range(3)]
    centres = np.stack(np.meshgrid(*axes_c, indexing="ij"), axis=-1).reshape(-1, 3)
    lattice = np.concatenate([grid, centres]) if len(centres) else grid
    if len(lattice):
        w = winding_numbers(lattice, vertices, tris)
        tree = cKDTree(_surface_samples(vertices, tris))
        dist, _ = tree.query(lattice)
        lattice = lattice[(w > 0.5) & (dist > 0.5 * h)]
    nodes = np.concatenate([vertices, lattice]) if len(lattice) else vertices.copy()
    n_s = len(vertices)
    try:
        dl = Delaunay(nodes)
    except Exception as exc:  # Qhull refuses coplanar input and the like
        raise SceneError(f"{name}: could not tetrahedralise the mesh ({exc}); check it is a closed solid", name,
                         "vertices") from exc
    tets = dl.simplices.astype(np.int64)
    q = tet_quality(nodes, tets)
    flip = q < 0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]
    q = np.abs(q)
    cent = nodes[tets].mean(axis=1)
    wc = winding_numbers(cent, vertices, tris)
    keep = (wc > 0.5) & (q > MIN_QUALITY)
    used = np.zeros(len(nodes), bool)
    used[tets[keep].ravel()] = True
    orphans = np.nonzero(~used[:n_s])[0]
    if orphans.size:
        # give each orphan artist vertex its most-inside, non-flat incident tet
        score = np.where(q > 1e-6, wc, -np.inf)
        for v in orphans:
            inc = np.nonzero((tets == v).any(axis=1))[0]
            if inc.size == 0:
                continue
            best = inc[np.argmax(score[inc])]
            if np.isfinite(score[best]):
                keep[best] = True
        used[:] = False
        used[tets[keep].ravel()] = True
        if not used[:n_s].all():
            bad = int(np.nonzero(~used[:n_s])[0][0])
            raise SceneError(f"{name}: vertex {bad} could not be included in the volume mesh; remove loose or "
                             "duplicate vertices (Merge by Distance)", name, "vertices")
    tets = tets[keep]
    # drop unused interior nodes, renumber (artist vertices keep indices 0..n_s-1)
    used = np.zeros(len(nodes), bool)
    used[tets.ravel()] = True
    used[:n_s] = True
    remap = -np.ones(len(nodes), np.int64)
    remap[used] = np.arange(int(used.sum()))
    return TetMesh(nodes=nodes[used].copy(), tets=remap[tets].astype(np.int32), n_surface=n_s)
