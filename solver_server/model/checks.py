"""Mesh checks run before a body is built, so that a bad mesh fails with a message that names the
object and says what to fix (protocol.scene.SceneError) instead of a solver blow-up."""
from __future__ import annotations

import numpy as np

from protocol.scene import SceneError


def undirected_edges(triangles: np.ndarray) -> tuple:
    """Unique undirected edges (k, 2) of a triangle list and how many triangles use each (k,)."""
    e = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    e = np.sort(e, axis=1)
    uniq, counts = np.unique(e, axis=0, return_counts=True)
    return uniq.astype(np.int32), counts


def triangle_areas(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Areas (m^2) of the triangles."""
    a = vertices[triangles[:, 1]] - vertices[triangles[:, 0]]
    b = vertices[triangles[:, 2]] - vertices[triangles[:, 0]]
    return 0.5 * np.linalg.norm(np.cross(a, b), axis=1)


def enclosed_volume(vertices: np.ndarray, triangles: np.ndarray) -> float:
    """Signed volume (m^3) enclosed by a closed triangle mesh (positive for outward normals)."""
    p0, p1, p2 = vertices[triangles[:, 0]], vertices[triangles[:, 1]], vertices[triangles[:, 2]]
    return float(np.einsum("ij,ij->i", p0, np.cross(p1, p2)).sum() / 6.0)


def check_triangles(name: str, vertices: np.ndarray, triangles: np.ndarray) -> None:
    """No zero-area triangle (relative to the mesh size). Raises SceneError naming ``name``."""
    scale = float(np.ptp(vertices, axis=0).max()) if len(vertices) else 0.0
    if scale <= 0.0:
        raise SceneError(f"{name}: the mesh has zero extent (all vertices coincide, as when the object's Scale "
                         "is 0); set a non-zero scale or give it a real shape", name, "vertices")
    areas = triangle_areas(vertices, triangles)
    bad = np.nonzero(areas <= 1e-12 * scale * scale)[0]
    if bad.size:
        raise SceneError(f"{name}: {bad.size} triangle(s) have zero area (first: face {int(bad[0])}); "
                         "merge by distance / dissolve degenerate geometry in Blender", name, "triangles")


def check_solid(name: str, vertices: np.ndarray, triangles: np.ndarray) -> None:
    """A mesh with the solid (or stiff) role must be a closed 2-manifold (every edge shared by exactly
    two triangles), without zero-area triangles, enclosing a non-zero volume."""
    check_triangles(name, vertices, triangles)
    _, counts = undirected_edges(triangles)
    if (counts > 2).any():   # first: the edge where two parts touch is the problem, not a hole
        n = int((counts > 2).sum())
        raise SceneError(f"{name}: the mesh is non-manifold ({n} edge{'s' if n > 1 else ''} shared by "
                         f"{int(counts.max())} faces, as where two parts touch along one edge); a solid needs every "
                         "edge shared by exactly two faces: separate the parts (Select > All by Trait > Non "
                         "Manifold)", name, "triangles")
    if (counts == 1).any():
        raise SceneError(f"{name}: the mesh is open ({int((counts == 1).sum())} boundary edges); a solid needs a "
                         "closed surface: fill the holes or use the cloth role", name, "triangles")
    vol = enclosed_volume(vertices, triangles)
    scale = float(np.ptp(vertices, axis=0).max())
    if abs(vol) <= 1e-9 * scale ** 3:
        raise SceneError(f"{name}: the closed mesh encloses no volume; a solid needs thickness", name, "vertices")
