"""Mesh checks the add-on runs before sending a scene (numpy only, no bpy).

A volumetric body (role solid, stiff or granular) is tetrahedralised or filled with particles
by the server, which needs a closed, manifold, non-degenerate surface. Catching the problem
here gives the artist the object's name and what to do, before any upload. The server
checks again (the add-on is not the only client).
"""
from __future__ import annotations

from typing import Optional

import numpy as np


def edge_face_counts(triangles: np.ndarray) -> np.ndarray:
    """How many triangles use each undirected edge of ``triangles`` (one entry per distinct edge)."""
    if triangles.shape[0] == 0:
        return np.zeros(0, np.int64)
    e = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]).astype(np.int64)
    e.sort(axis=1)
    key = e[:, 0] * (int(e.max()) + 1) + e[:, 1]
    return np.unique(key, return_counts=True)[1]


def degenerate_triangles(vertices: np.ndarray, triangles: np.ndarray, rel_eps: float = 1e-12) -> int:
    """Number of triangles whose area is below ``rel_eps`` times the bounding box diagonal squared."""
    if triangles.shape[0] == 0:
        return 0
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    area2 = np.linalg.norm(np.cross(b - a, c - a), axis=1)
    diag2 = float(np.sum((vertices.max(axis=0) - vertices.min(axis=0)) ** 2))
    return int(np.count_nonzero(area2 <= rel_eps * max(diag2, 1e-300)))


def zero_scale_problem(name: str, matrix_world: np.ndarray, scale: tuple) -> Optional[str]:
    """A message when the object's world transform flattens it to a plane, a line or a point (a Scale
    of 0 on some axis, its own or a parent's), else None. Every face of such an object has zero area,
    but the fix is its scale, not its mesh. ``matrix_world`` is (4, 4), ``scale`` the object's Scale."""
    m = np.asarray(matrix_world, np.float64)[:3, :3]
    if np.all(np.linalg.norm(m, axis=0) > 1e-12) and abs(np.linalg.det(m)) > 1e-30:
        return None
    own = ", ".join(f"{float(c):g}" for c in scale)
    if any(float(c) == 0.0 for c in scale):
        return (f"{name}: the object has zero scale (Scale {own}), so its mesh has no volume or area; set a "
                f"non-zero Scale (Object properties > Transform), then apply it if you like (Ctrl+A > Scale).")
    return (f"{name}: the object is flattened to zero size by its transform (its Scale is {own}, so a parent's "
            f"Scale is 0); set a non-zero Scale on the parent.")


def volume_problem(name: str, role: str, vertices: np.ndarray, triangles: np.ndarray) -> Optional[str]:
    """A message naming the object, the problem and the fix, or None when the surface can be filled."""
    label = "Granular / Fluid" if role == "granular" else role.capitalize()
    counts = edge_face_counts(triangles)
    shared = counts[counts > 2]
    if shared.size:
        most = int(shared.max())
        many = f"{shared.size} edges are" if shared.size > 1 else "1 edge is"
        return (f"{name}: {many} shared by {most} faces (non-manifold, as where two parts touch along one edge); "
                f"the {label} role needs every edge shared by exactly two faces. Find them (Select > All by "
                f"Trait > Non Manifold) and separate the parts (Edge Split, or P > By Loose Parts and move apart).")
    holes = int(np.count_nonzero(counts == 1))
    if holes:
        return (f"{name}: the {label} role needs a closed surface, but {holes} edges are open (border edges of "
                f"holes). Fill the holes (Select > All by Trait > Non Manifold, then F) or use the Cloth role "
                f"for an open sheet.")
    deg = degenerate_triangles(vertices, triangles)
    if deg:
        return (f"{name}: {deg} faces have zero area. Remove them (Mesh > Clean Up > Degenerate Dissolve) "
                f"and merge duplicate vertices (Mesh > Clean Up > Merge by Distance).")
    return None
