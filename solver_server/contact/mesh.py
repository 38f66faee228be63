"""CollisionMesh: the collision surface of a whole scene (all bodies stacked by the caller).

Holds connectivity (faces, edges), per-vertex contact offsets (metres: cloth/rod thickness/2,
0 for solids), per-vertex body ids and per-body contact flags (Coulomb mu, self contact,
static collider). Derived per-primitive data (offsets of edges/faces = max over their vertices,
rest squared edge lengths for the edge-edge mollifier) are computed once here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from numba import njit


def edges_from_faces(faces: np.ndarray) -> np.ndarray:
    """Unique undirected edges (E, 2) int32 (sorted vertex pairs) of a triangle list."""
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if faces.shape[0] == 0:
        return np.zeros((0, 2), dtype=np.int32)
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    e.sort(axis=1)
    return np.unique(e, axis=0).astype(np.int32)


@njit(cache=True, fastmath=False)
def choose_axis_faces(x, faces, vbody, nb):
    """(nb, 3) int64 per body three of its faces (-1: none) whose normals at x (n, 3) (m) span the space as well
    as its faces can: the largest face, the face most nearly perpendicular to it, then the face most nearly
    perpendicular to both (a box: one face on each of three sides)."""
    m = faces.shape[0]
    nrm = np.zeros((m, 3))
    area = np.zeros(m)
    for f in range(m):
        a, b, c = faces[f, 0], faces[f, 1], faces[f, 2]
        u0, u1, u2 = x[b, 0] - x[a, 0], x[b, 1] - x[a, 1], x[b, 2] - x[a, 2]
        v0, v1, v2 = x[c, 0] - x[a, 0], x[c, 1] - x[a, 1], x[c, 2] - x[a, 2]
        n0, n1, n2 = u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0
        r = np.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
        area[f] = r
        if r > 0.0:
            nrm[f, 0], nrm[f, 1], nrm[f, 2] = n0 / r, n1 / r, n2 / r
    out = np.full((nb, 3), -1, dtype=np.int64)
    best = np.full(nb, -1.0)
    for f in range(m):
        b = vbody[faces[f, 0]]
        if area[f] > 0.0 and area[f] > best[b]:
            best[b] = area[f]
            out[b, 0] = f
    best[:] = np.inf
    for f in range(m):
        b = vbody[faces[f, 0]]
        g = out[b, 0]
        if area[f] > 0.0 and g >= 0:
            d = abs(nrm[f, 0] * nrm[g, 0] + nrm[f, 1] * nrm[g, 1] + nrm[f, 2] * nrm[g, 2])
            if d < best[b]:
                best[b] = d
                out[b, 1] = f
    best[:] = 0.0
    for f in range(m):
        b = vbody[faces[f, 0]]
        g, h = out[b, 0], out[b, 1]
        if area[f] > 0.0 and g >= 0 and h >= 0:
            c0 = nrm[g, 1] * nrm[h, 2] - nrm[g, 2] * nrm[h, 1]
            c1 = nrm[g, 2] * nrm[h, 0] - nrm[g, 0] * nrm[h, 2]
            c2 = nrm[g, 0] * nrm[h, 1] - nrm[g, 1] * nrm[h, 0]
            d = abs(nrm[f, 0] * c0 + nrm[f, 1] * c1 + nrm[f, 2] * c2)
            if d > 1e-6 and d > best[b]:
                best[b] = d
                out[b, 2] = f
    return out


@dataclass
class CollisionMesh:
    n_verts: int
    faces: np.ndarray            # (F, 3) int32
    edges: np.ndarray            # (E, 2) int32
    vertex_offset: np.ndarray    # (n,) float64, m
    vertex_body: np.ndarray      # (n,) int32
    body_friction: np.ndarray    # (B,) float64
    self_contact: np.ndarray     # (B,) uint8 (bool)
    body_static: np.ndarray      # (B,) uint8 (bool)
    edge_offset: np.ndarray      # (E,) float64, m: max offset of the edge's vertices
    face_offset: np.ndarray      # (F,) float64, m: max offset of the face's vertices
    edge_rest_len2: Optional[np.ndarray] = None  # (E,) m^2, for the edge-edge mollifier
    axis_faces: Optional[np.ndarray] = None      # (B, 3) int64: three faces of each body whose normals span the
                                                 # space (choose_axis_faces, at rest), for its culling

    @classmethod
    def build(cls, n_verts: int, faces: np.ndarray, edges: Optional[np.ndarray] = None,
              vertex_offset: Optional[np.ndarray] = None, vertex_body: Optional[np.ndarray] = None,
              body_friction: Optional[np.ndarray] = None, self_contact: Optional[np.ndarray] = None,
              body_static: Optional[np.ndarray] = None,
              rest_positions: Optional[np.ndarray] = None) -> "CollisionMesh":
        """Build the collision mesh. Missing per-vertex/per-body arrays default to a single
        self-colliding, non-static body with zero offsets and mu = 0.

        rest_positions (n, 3), optional extra: rest shape used for the mollifier threshold
        eps_x = 1e-3 |ea|^2 |eb|^2. If omitted, the first positions any contact function sees
        are taken as the rest shape (set_rest_positions).
        """
        n = int(n_verts)
        faces = np.ascontiguousarray(np.asarray(faces, dtype=np.int32).reshape(-1, 3))
        if edges is None:
            edges = edges_from_faces(faces)
        edges = np.ascontiguousarray(np.asarray(edges, dtype=np.int32).reshape(-1, 2))
        off = np.zeros(n) if vertex_offset is None else np.asarray(vertex_offset, dtype=np.float64)
        off = np.ascontiguousarray(np.broadcast_to(off, (n,)).copy())
        vb = np.zeros(n, dtype=np.int32) if vertex_body is None else np.asarray(vertex_body, dtype=np.int32)
        vb = np.ascontiguousarray(vb)
        n_bodies = int(vb.max()) + 1 if n > 0 else 1
        mu = np.zeros(n_bodies) if body_friction is None else np.asarray(body_friction, dtype=np.float64)
        sc = np.ones(n_bodies, dtype=np.uint8) if self_contact is None else np.asarray(self_contact).astype(np.uint8)
        st = np.zeros(n_bodies, dtype=np.uint8) if body_static is None else np.asarray(body_static).astype(np.uint8)
        for name, arr in (("body_friction", mu), ("self_contact", sc), ("body_static", st)):
            if arr.shape[0] < n_bodies:
                raise ValueError(f"{name} has {arr.shape[0]} entries but vertex_body uses {n_bodies} bodies")
        if faces.size and (faces.min() < 0 or faces.max() >= n):
            raise ValueError("faces index outside [0, n_verts)")
        if edges.size and (edges.min() < 0 or edges.max() >= n):
            raise ValueError("edges index outside [0, n_verts)")
        if np.any(off < 0):
            raise ValueError("vertex_offset must be >= 0")
        eo = off[edges].max(axis=1) if edges.shape[0] else np.zeros(0)
        fo = off[faces].max(axis=1) if faces.shape[0] else np.zeros(0)
        mesh = cls(n, faces, edges, off, vb, np.ascontiguousarray(mu), np.ascontiguousarray(sc),
                   np.ascontiguousarray(st), np.ascontiguousarray(eo), np.ascontiguousarray(fo))
        if rest_positions is not None:
            mesh.set_rest_positions(rest_positions)
        return mesh

    @property
    def n_bodies(self) -> int:
        return int(self.body_friction.shape[0])

    def set_rest_positions(self, x: np.ndarray) -> None:
        """Fix the rest squared edge lengths (m^2) used by the edge-edge mollifier, and axis_faces."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, 3)
        d = x[self.edges[:, 1]] - x[self.edges[:, 0]]
        self.edge_rest_len2 = np.ascontiguousarray(np.einsum("ij,ij->i", d, d))
        self.axis_faces = None
        self.ensure_axis_faces(x)

    def ensure_axis_faces(self, x: np.ndarray) -> np.ndarray:
        """axis_faces, chosen at x (n, 3) (m) when no rest shape fixed them (any faces serve; the choice only
        decides how much the broad phase culls, never which pairs it finds)."""
        if self.axis_faces is None:
            self.axis_faces = choose_axis_faces(np.ascontiguousarray(x, np.float64).reshape(-1, 3), self.faces,
                                                self.vertex_body, self.n_bodies)
        return self.axis_faces

    def element_topology(self):
        """(first vertex of each face (F,) int64, of each edge (E,) int64, body of each face (F,) int32, of each edge
        (E,) int32, True when culling by bodies cannot remove anything: fewer than two bodies, or every body with
        vertices self-contacting), kept while faces, edges, vertex_body and self_contact are the same arrays: the
        broad phase asks for them at every list rebuild (~1 ms of gathers over the 100-cube pile's elements)."""
        key = (self.faces, self.edges, self.vertex_body, self.self_contact)
        c = getattr(self, "_topology", None)
        if c is not None and all(a is b for a, b in zip(c[0], key)):
            return c[1]
        vb = self.vertex_body
        ff = np.ascontiguousarray(self.faces[:, 0], np.int64)
        ef = np.ascontiguousarray(self.edges[:, 0], np.int64)
        fb = np.ascontiguousarray(vb[ff]) if ff.size else np.zeros(0, np.int32)
        eb = np.ascontiguousarray(vb[ef]) if ef.size else np.zeros(0, np.int32)
        nb = int(self.body_friction.shape[0])
        no_cull = bool(nb < 2 or vb.shape[0] == 0 or np.all(self.self_contact[np.unique(vb)] != 0))
        out = (ff, ef, fb, eb, no_cull)
        self._topology = (key, out)
        return out

    def ensure_rest(self, x: np.ndarray) -> np.ndarray:
        if self.edge_rest_len2 is None:
            self.set_rest_positions(x)
        return self.edge_rest_len2
