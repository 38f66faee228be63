"""Generalised winding number of a closed (or nearly closed) triangle mesh, Jacobson et al. 2013:
w(p) = sum over triangles of the signed solid angle / 4 pi (Van Oosterom-Strackee formula). w ~ 1
inside, ~ 0 outside, robust to small holes and self-overlaps. Used as the inside test when
tetrahedralising."""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


@njit(cache=True, fastmath=False, parallel=True)
def winding_numbers(points, vertices, triangles):
    """w (m,) at each of ``points`` (m, 3) for the triangle mesh (vertices (n, 3), triangles (k, 3))."""
    m = points.shape[0]
    out = np.zeros(m)
    for i in prange(m):
        acc = 0.0
        for t in range(triangles.shape[0]):
            a = vertices[triangles[t, 0]] - points[i]
            b = vertices[triangles[t, 1]] - points[i]
            c = vertices[triangles[t, 2]] - points[i]
            la = math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
            lb = math.sqrt(b[0] * b[0] + b[1] * b[1] + b[2] * b[2])
            lc = math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2])
            det = (a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
                   + a[2] * (b[0] * c[1] - b[1] * c[0]))
            den = (la * lb * lc + (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) * lc
                   + (b[0] * c[0] + b[1] * c[1] + b[2] * c[2]) * la
                   + (c[0] * a[0] + c[1] * a[1] + c[2] * a[2]) * lb)
            acc += 2.0 * math.atan2(det, den)
        out[i] = acc / (4.0 * math.pi)
    return out
