"""Small closed and open triangle meshes for the MPM tests (metres)."""
from __future__ import annotations

import numpy as np

_BOX_T = np.array([[0, 2, 1], [0, 3, 2], [4, 5, 6], [4, 6, 7], [0, 1, 5], [0, 5, 4],
                   [1, 2, 6], [1, 6, 5], [2, 3, 7], [2, 7, 6], [3, 0, 4], [3, 4, 7]], np.int32)


def box(lo, hi):
    """Closed axis-aligned box (8 vertices, 12 outward triangles)."""
    lo = np.asarray(lo, float)
    hi = np.asarray(hi, float)
    v = np.array([[lo[0], lo[1], lo[2]], [hi[0], lo[1], lo[2]], [hi[0], hi[1], lo[2]], [lo[0], hi[1], lo[2]],
                  [lo[0], lo[1], hi[2]], [hi[0], lo[1], hi[2]], [hi[0], hi[1], hi[2]], [lo[0], hi[1], hi[2]]])
    return v, _BOX_T.copy()


def open_box(lo, hi):
    """The box without its top face (two triangles removed): an open mesh."""
    v, t = box(lo, hi)
    return v, t[[0, 1, 4, 5, 6, 7, 8, 9, 10, 11]].copy()


def uv_sphere(center, radius, n_lat=24, n_lon=48):
    """Closed UV sphere with poles, outward triangles."""
    c = np.asarray(center, float)
    verts = [c + [0, 0, radius]]
    for i in range(1, n_lat):
        th = np.pi * i / n_lat
        for j in range(n_lon):
            ph = 2 * np.pi * j / n_lon
            verts.append(c + radius * np.array([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)]))
    verts.append(c + [0, 0, -radius])
    tris = []
    ring = lambda i, j: 1 + (i - 1) * n_lon + (j % n_lon)
    for j in range(n_lon):
        tris.append([0, ring(1, j), ring(1, j + 1)])
    for i in range(1, n_lat - 1):
        for j in range(n_lon):
            a, b, cc, d = ring(i, j), ring(i, j + 1), ring(i + 1, j), ring(i + 1, j + 1)
            tris.append([a, cc, d])
            tris.append([a, d, b])
    last = len(verts) - 1
    for j in range(n_lon):
        tris.append([last, ring(n_lat - 1, j + 1), ring(n_lat - 1, j)])
    return np.array(verts), np.array(tris, np.int32)


def mesh_volume(v, t):
    """Enclosed volume (m^3) by the divergence theorem."""
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)
