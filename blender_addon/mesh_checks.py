"""Mesh checks the add-on runs before sending a scene (numpy only, no bpy).

A volumetric body (role solid, stiff or granular) is tetrahedralised or filled with particles
by the server, which needs a closed, manifold, non-degenerate surface. Catching the problem
here gives the artist the object's name and what to do, before any upload. The server
checks again (the add-on is not the only client).
"""
from __future__ import annotations

from typing import Optional

import numpy as np


def open_or_nonmanifold_edges(triangles: np.ndarray) -> int:
    """Number of undirected edges not shared by exactly two triangles (0 for a closed manifold)."""
    if triangles.shape[0] == 0:
        return 0
    e = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]).astype(np.int64)
    e.sort(axis=1)
    key = e[:, 0] * (int(e.max()) + 1) + e[:, 1]
    _, counts = np.unique(key, return_counts=True)
    return int(np.count_nonzero(counts != 2))


def degenerate_triangles(vertices: np.ndarray, triangles: np.ndarray, rel_eps: float = 1e-12) -> int:
    """Number of triangles whose area is below ``rel_eps`` times the bounding box diagonal squared."""
    if triangles.shape[0] == 0:
        return 0
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    area2 = np.linalg.norm(np.cross(b - a, c - a), axis=1)
    diag2 = float(np.sum((vertices.max(axis=0) - vertices.min(axis=0)) ** 2))
    return int(np.count_nonzero(area2 <= rel_eps * max(diag2, 1e-300)))


def volume_problem(name: str, role: str, vertices: np.ndarray, triangles: np.ndarray) -> Optional[str]:
    """A message naming the object, the problem and the fix, or None when the surface can be filled."""
    label = "Granular / Fluid" if role == "granular" else role
    bad = open_or_nonmanifold_edges(triangles)
    if bad:
        return (f"{name}: the {label} role needs a closed surface, but {bad} edges are open or shared by more "
                f"than two faces. Fill the holes (Select > All by Trait > Non Manifold, then F) or use the "
                f"Cloth role for an open sheet.")
    deg = degenerate_triangles(vertices, triangles)
    if deg:
        return (f"{name}: {deg} faces have zero area. Remove them (Mesh > Clean Up > Degenerate Dissolve) "
                f"and merge duplicate vertices (Mesh > Clean Up > Merge by Distance).")
    return None
