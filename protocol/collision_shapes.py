"""Collision shapes of stiff bodies that both the add-on and the server build or check (numpy only).

A stiff body's collision shape (``Body.collision_shape``, protocol 1.6) is a closed, outward-oriented triangle
surface that moves with the body; contact is computed on it, and the body's own vertices follow the same
affine map. Here: the box of a point set in given axes (the add-on passes the object's own axes, as Bullet's
Box shape does) and the enclosure test (which vertices of the body lie outside its shape), the check behind
the warning an artist gets when a Proxy Object does not cover the mesh. The convex hull (scipy) and the
sphere are built on the server (solver_server/model/collision_shapes.py). Units: metres.
"""
from __future__ import annotations

import numpy as np

BOX_TRIANGLES = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4],
                          [2, 6, 3], [3, 6, 7], [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]], np.int32)
"""Outward triangles of the 8 corners of :func:`box_shape` (corner k has bit j of k set at the top of axis j)."""


def box_shape(vertices: np.ndarray, axes: np.ndarray) -> tuple:
    """(corners (8, 3) float64 m, triangles (12, 3) int32): the smallest box with edges along the orthonormal
    columns of ``axes`` (3, 3) that contains ``vertices`` (n, 3), outward oriented (right-handed or not)."""
    R = np.asarray(axes, np.float64)
    local = np.asarray(vertices, np.float64) @ R
    lo, hi = local.min(axis=0), local.max(axis=0)
    bits = (np.arange(8)[:, None] >> np.arange(3)[None, :]) & 1
    corners = (np.where(bits, hi, lo)) @ R.T
    tris = BOX_TRIANGLES if np.linalg.det(R) > 0 else BOX_TRIANGLES[:, [0, 2, 1]]
    return np.ascontiguousarray(corners), np.ascontiguousarray(tris, np.int32)


def winding_numbers(points: np.ndarray, vertices: np.ndarray, triangles: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """Generalised winding number (m,) of each point of ``points`` (m, 3) with respect to the closed surface
    (vertices (n, 3), triangles (t, 3)): 1 inside, 0 outside (signed solid angles / 4 pi, Van Oosterom and
    Strackee's formula). Vectorised in blocks of about ``chunk`` point-triangle pairs."""
    P = np.asarray(points, np.float64)
    V = np.asarray(vertices, np.float64)
    T = np.asarray(triangles, np.int64)
    out = np.zeros(len(P))
    step = max(1, chunk // max(len(T), 1))
    for s in range(0, len(P), step):
        a = V[T[:, 0]][None] - P[s:s + step, None]
        b = V[T[:, 1]][None] - P[s:s + step, None]
        c = V[T[:, 2]][None] - P[s:s + step, None]
        la, lb, lc = (np.linalg.norm(u, axis=2) for u in (a, b, c))
        det = np.einsum("pti,pti->pt", a, np.cross(b, c))
        den = (la * lb * lc + np.einsum("pti,pti->pt", a, b) * lc + np.einsum("pti,pti->pt", b, c) * la
               + np.einsum("pti,pti->pt", c, a) * lb)
        out[s:s + step] = 2.0 * np.arctan2(det, den).sum(axis=1) / (4.0 * np.pi)
    return out


def outside_vertices(vertices: np.ndarray, shape_vertices: np.ndarray, shape_triangles: np.ndarray,
                     rel_tol: float = 1e-6) -> np.ndarray:
    """Indices of the body's ``vertices`` (n, 3) that lie outside its collision shape (a closed surface).
    A vertex on the shape's surface counts as inside: each vertex is first moved towards the vertices'
    centroid by ``rel_tol`` of its distance (a cube's corners on its own Box shape are inside)."""
    V = np.asarray(vertices, np.float64)
    c = V.mean(axis=0)
    probe = c + (1.0 - rel_tol) * (V - c)
    w = winding_numbers(probe, shape_vertices, shape_triangles)
    return np.nonzero(w < 0.5)[0]


def enclosure_warning(name: str, shape: str, vertices: np.ndarray, shape_vertices: np.ndarray,
                      shape_triangles: np.ndarray) -> str:
    """'' when the shape encloses every vertex, else one sentence naming the object and what to do."""
    out = outside_vertices(vertices, shape_vertices, shape_triangles)
    if not out.size:
        return ""
    return (f"{name}: {out.size} of {len(vertices)} vertices lie outside its collision shape ({shape}); contact is "
            f"computed on the shape, so those parts of the mesh can pass into other objects. Use a shape that "
            f"covers the whole mesh (Convex Hull, Box, or a larger Proxy Object).")
