"""Closed and open test meshes (cube, UV-free icosphere, grid sheet) used by tests, benchmarks and the
server's self-check. Units: metres."""
from __future__ import annotations

import numpy as np


def box(size=(1.0, 1.0, 1.0), center=(0.0, 0.0, 0.0), divisions: int = 1) -> tuple:
    """Closed axis-aligned box surface, each face split into divisions^2 quads (2 triangles each),
    outward normals. Returns (vertices (n, 3) float64, triangles (m, 3) int32)."""
    n = divisions
    verts = {}
    tris = []

    def vid(p):
        key = tuple(int(round(c)) for c in p)
        if key not in verts:
            verts[key] = len(verts)
        return verts[key]

    for axis in range(3):
        for side in (0, n):
            u, v = [a for a in range(3) if a != axis]
            for i in range(n):
                for j in range(n):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = [0, 0, 0]
                        p[axis], p[u], p[v] = side, i + di, j + dj
                        quad.append(vid(p))
                    a, b, c, d = quad
                    # orientation: normal along +axis when side == n
                    flip = (side == 0) ^ ((axis == 1))
                    t1, t2 = (a, b, c), (a, c, d)
                    if flip:
                        t1, t2 = (a, c, b), (a, d, c)
                    tris += [t1, t2]
    V = np.array(sorted(verts, key=verts.get), np.float64) / n - 0.5
    V = V * np.asarray(size, np.float64) + np.asarray(center, np.float64)
    T = np.array(tris, np.int32)
    # make the orientation outward whatever the axis convention
    p = V[T]
    vol = np.einsum("ij,ij->i", p[:, 0] - V.mean(0), np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])).sum()
    if vol < 0:
        T = T[:, [0, 2, 1]].copy()
    return V, T


def icosphere(radius: float = 1.0, center=(0.0, 0.0, 0.0), subdivisions: int = 2) -> tuple:
    """Closed icosphere surface with outward normals."""
    t = (1.0 + 5 ** 0.5) / 2.0
    V = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    F = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
         (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
         (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    V = [np.array(v, float) / np.linalg.norm(v) for v in V]
    for _ in range(subdivisions):
        cache = {}

        def mid(a, b):
            k = (min(a, b), max(a, b))
            if k not in cache:
                m = V[a] + V[b]
                V.append(m / np.linalg.norm(m))
                cache[k] = len(V) - 1
            return cache[k]

        F2 = []
        for a, b, c in F:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            F2 += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        F = F2
    return np.array(V) * radius + np.asarray(center, float), np.array(F, np.int32)


def grid_sheet(size=(1.0, 1.0), quads=(8, 8), center=(0.0, 0.0, 0.0)) -> tuple:
    """Flat sheet in the XY plane at height center[2], quads[0] x quads[1] quads split into triangles.
    Returns (vertices, triangles, edges)."""
    nx, ny = quads
    xs = np.linspace(-0.5, 0.5, nx + 1) * size[0] + center[0]
    ys = np.linspace(-0.5, 0.5, ny + 1) * size[1] + center[1]
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    V = np.stack([X.ravel(), Y.ravel(), np.full(X.size, float(center[2]))], axis=1)
    idx = np.arange((nx + 1) * (ny + 1)).reshape(nx + 1, ny + 1)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    T = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)]).astype(np.int32)
    e = np.sort(np.concatenate([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]]), axis=1)
    E = np.unique(e, axis=0).astype(np.int32)
    return V, T, E


def disc_sheet(radius: float = 0.15, spacing: float = 0.01, center=(0.0, 0.0, 0.0), jitter: float = 0.0,
               seed: int = 0, ring_radii=None) -> tuple:
    """Flat disc in the XY plane at height center[2], Delaunay-triangulated from concentric rings of points
    ``spacing`` (m) apart (near-equilateral triangles, the boundary on the circle). ``jitter`` moves the
    interior points randomly by up to that fraction of the spacing (an irregular mesh). ``ring_radii``
    (increasing, the last = radius) replaces the evenly spaced rings. Returns (vertices, triangles, edges)."""
    from scipy.spatial import Delaunay
    n_rings = max(1, int(round(radius / spacing)))
    radii = np.asarray(ring_radii, float) if ring_radii is not None else radius * np.arange(1, n_rings + 1) / n_rings
    n_rings = len(radii)
    pts = [np.zeros((1, 2))]
    for k, r in enumerate(radii, start=1):
        m = max(6, int(round(2 * np.pi * r / spacing)))
        a = 2 * np.pi * (np.arange(m) + 0.5 * (k % 2)) / m
        pts.append(np.stack([r * np.cos(a), r * np.sin(a)], 1))
    P = np.concatenate(pts)
    if jitter > 0:
        rng = np.random.default_rng(seed)
        inner = np.linalg.norm(P, axis=1) < radii[-1] - 0.5 * (radii[-1] - (radii[-2] if n_rings > 1 else 0.0))
        P[inner] += rng.uniform(-jitter, jitter, (inner.sum(), 2)) * spacing
    T = Delaunay(P).simplices.astype(np.int32)
    a, b = P[T[:, 1]] - P[T[:, 0]], P[T[:, 2]] - P[T[:, 0]]
    flip = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0] < 0
    T[flip] = T[flip][:, [0, 2, 1]]
    V = np.c_[P + np.asarray(center[:2], float), np.full(len(P), float(center[2]))]
    e = np.sort(np.concatenate([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]]), axis=1)
    return V, T, np.unique(e, axis=0).astype(np.int32)
