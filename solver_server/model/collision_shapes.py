"""The collision shape of a stiff body (``Body.collision_shape``, protocol 1.6): the closed surface contact is
computed on, as Bullet's shapes: the body's own triangles ("mesh"), their convex hull, a box, a sphere, or a
proxy mesh the client sends. Built once at the start frame in world space (metres); the shape's vertices are
then slaved to the body (x = A X + p) like a mesh body's vertices, and the body's own vertices follow the same
map for output (solver_server/bodies/affine.py, ``AffineBodies.render_positions``).

- mesh: the body's own surface, its flat regions re-triangulated from their corners (model/planar_merge.py:
  the same point set to 1e-10 of the body's size; a subdivided cube becomes 8 vertices and 12 triangles, a
  curved surface stays as it is).
- convex_hull: scipy.spatial.ConvexHull (Qhull) of the vertices, triangles oriented along Qhull's outward
  facet normals; coplanar facets stay triangulated (a cube's hull is 12 triangles).
- box: the client's box when it sends one (the add-on: the object's local axes, as Bullet); else the smaller
  of the world-axis box and the box along the principal axes of the hull's vertices.
- sphere: an icosphere (2 subdivisions: 162 vertices, 320 triangles) scaled so that every face plane lies at
  least the bounding sphere's radius from its centre, so the tessellation encloses the sphere (and the mesh);
  the bounding sphere is centred at the bounding box's centre.
- proxy: the client's mesh, checked closed and non-degenerate like a body's own surface.

Mass and inertia always come from the body's own closed mesh, not from the shape (docs/solver.md).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from protocol.collision_shapes import box_shape, enclosure_warning
from protocol.scene import Body, SceneError
from .checks import check_solid
from .planar_merge import merge_planar
from .primitives import icosphere

SPHERE_SUBDIVISIONS = 2   # 162 vertices, 320 triangles


class Shape(NamedTuple):
    """A stiff body's collision surface in world space at the start frame."""

    vertices: np.ndarray    # (k, 3) float64 m
    triangles: np.ndarray   # (t, 3) int32, closed, outward
    warning: str            # '' or a sentence naming the object when the shape leaves vertices outside
    own: bool = False       # True: the body's own vertices and triangles, unchanged


def convex_hull(vertices: np.ndarray) -> tuple:
    """(vertices (k, 3), triangles (t, 3) int32) of the convex hull of ``vertices`` (n, 3), outward oriented,
    only the hull's own vertices kept."""
    from scipy.spatial import ConvexHull
    V = np.asarray(vertices, np.float64)
    h = ConvexHull(V)
    T = h.simplices.astype(np.int64)
    a, b, c = V[T[:, 0]], V[T[:, 1]], V[T[:, 2]]
    flip = np.einsum("ij,ij->i", np.cross(b - a, c - a), h.equations[:, :3]) < 0
    T[flip] = T[flip][:, [0, 2, 1]]
    keep, inv = np.unique(T.ravel(), return_inverse=True)
    return np.ascontiguousarray(V[keep]), np.ascontiguousarray(inv.reshape(-1, 3), np.int32)


def enclosing_sphere(vertices: np.ndarray, subdivisions: int = SPHERE_SUBDIVISIONS) -> tuple:
    """(vertices, triangles int32) of an icosphere around the bounding sphere of ``vertices``: centre the
    bounding box's centre, radius the farthest vertex; scaled so its closest face plane is at that radius."""
    V = np.asarray(vertices, np.float64)
    c = 0.5 * (V.min(axis=0) + V.max(axis=0))
    R = float(np.linalg.norm(V - c, axis=1).max())
    U, T = icosphere(1.0, (0.0, 0.0, 0.0), subdivisions)
    a, b, cc = U[T[:, 0]], U[T[:, 1]], U[T[:, 2]]
    n = np.cross(b - a, cc - a)
    d_min = float((np.einsum("ij,ij->i", n, a) / np.linalg.norm(n, axis=1)).min())
    return np.ascontiguousarray(U * (R / d_min) + c), np.ascontiguousarray(T, np.int32)


def box_axes_candidates(H: np.ndarray, T: np.ndarray, limit: int = 3000) -> np.ndarray:
    """(c, 3, 3) orthonormal frames to try for the box of a hull (vertices H, triangles T): the world axes,
    the principal axes of H, and for each hull triangle (its normal, each of its edges): a box flush with a
    face and an edge of the hull, which is where a tight box of a polyhedron lies (a cube, any orientation)."""
    frames = [np.eye(3), np.linalg.eigh(np.cov((H - H.mean(axis=0)).T))[1]]
    a, b, c = H[T[:, 0]], H[T[:, 1]], H[T[:, 2]]
    n = np.cross(b - a, c - a)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    for e in (b - a, c - b, a - c):
        u = e - np.einsum("ij,ij->i", e, n)[:, None] * n
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        frames.append(np.stack([u, np.cross(n, u), n], axis=2))
    F = np.concatenate([f.reshape(-1, 3, 3) for f in frames])
    return F[:limit]


def default_box(vertices: np.ndarray) -> tuple:
    """The box a client did not send: the smallest-volume box over :func:`box_axes_candidates` of the hull
    (every candidate contains every vertex)."""
    H, T = convex_hull(vertices)
    F = box_axes_candidates(H, T)
    loc = np.einsum("nk,ckj->cnj", H, F)          # hull vertices in each frame
    vol = np.prod(loc.max(axis=1) - loc.min(axis=1), axis=1)
    return box_shape(vertices, F[int(np.argmin(vol))])


def build_shape(body: Body) -> Shape:
    """The collision shape of a stiff body (its own triangles for "mesh"). Raises SceneError naming the object
    when a sent shape is not a closed surface."""
    V = np.asarray(body.vertices, np.float64)
    kind = getattr(body, "collision_shape", "mesh")
    sv, st = getattr(body, "shape_vertices", None), getattr(body, "shape_triangles", None)
    if kind == "mesh":      # the same surface, its flat regions re-triangulated from their corners
        Vs, Ts, _ = merge_planar(V, body.triangles)
        if len(Vs) == len(V):
            return Shape(V, np.asarray(body.triangles, np.int32), "", True)
        return Shape(Vs, Ts, "", False)
    if sv is not None:
        Vs, Ts = np.asarray(sv, np.float64), np.asarray(st, np.int32)
        check_solid(f"{body.name} (collision shape {kind})", Vs, Ts)
    elif kind == "convex_hull":
        Vs, Ts = convex_hull(V)
    elif kind == "box":
        Vs, Ts = default_box(V)
    elif kind == "sphere":
        Vs, Ts = enclosing_sphere(V)
    else:
        raise SceneError(f"{body.name}: collision shape {kind} needs shape_vertices and shape_triangles", body.name,
                         "shape_vertices")
    warn = enclosure_warning(body.name, kind.replace("_", " "), V, Vs, Ts)
    return Shape(np.ascontiguousarray(Vs), np.ascontiguousarray(Ts, np.int32), warn)
