"""Volume, centre and second moments of a closed triangle mesh, integrated exactly by the divergence
theorem (no tetrahedralisation).

For a homogeneous polynomial f of degree k, div(x f) = (3 + k) f, so

    int_Omega f dV = 1 / (3 + k) * sum_T (a_T . n_T) int_T f dA          (n_T the unit outward normal,
                                                                           a_T any vertex of T: x . n_T
                                                                           is constant on a flat T)

and int_T f dA is exact for f of degree <= 2 with the three edge midpoints (weights A_T / 3). With
(a . n) A = det(a, b, c) / 2 this gives, per triangle (a, b, c) and s = a + b + c:

    V      += det / 6
    int x  += det / 24 * s
    int xx^T += det / 120 * (a a^T + b b^T + c c^T + s s^T)

(the same numbers as the signed tetrahedron from the origin to the triangle, which is how the
tests cross-check it). Coordinates are shifted to the vertex mean first so that round-off does not
grow with the distance of the mesh from the world origin. Units: m^3, m^4, m^5; times the density
(kg/m^3) they become the mass (kg), first moment (kg m) and second moment (kg m^2).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


@njit(cache=True, fastmath=False)
def _surface_integrals(V: np.ndarray, T: np.ndarray, ref: np.ndarray):
    """(volume, int (x - ref) dV (3,), int (x - ref)(x - ref)^T dV (3, 3)) of the closed,
    outward-oriented mesh (V (n, 3) float64, T (m, 3) int32)."""
    vol = 0.0
    s1 = np.zeros(3)
    s2 = np.zeros((3, 3))
    a = np.empty(3)
    b = np.empty(3)
    c = np.empty(3)
    s = np.empty(3)
    for t in range(T.shape[0]):
        for k in range(3):
            a[k] = V[T[t, 0], k] - ref[k]
            b[k] = V[T[t, 1], k] - ref[k]
            c[k] = V[T[t, 2], k] - ref[k]
            s[k] = a[k] + b[k] + c[k]
        det = (a[0] * (b[1] * c[2] - b[2] * c[1]) - a[1] * (b[0] * c[2] - b[2] * c[0])
               + a[2] * (b[0] * c[1] - b[1] * c[0]))
        vol += det / 6.0
        for i in range(3):
            s1[i] += det / 24.0 * s[i]
            for j in range(3):
                s2[i, j] += det / 120.0 * (a[i] * a[j] + b[i] * b[j] + c[i] * c[j] + s[i] * s[j])
    return vol, s1, s2


@dataclass
class MassProperties:
    """Rigid-body mass properties of a homogeneous closed mesh.

    volume (m^3), mass (kg), centre (3,) m (world), second (3, 3) kg m^2: int rho (x - c)(x - c)^T dV
    about the centre (NOT the inertia tensor; the inertia tensor is tr(second) I - second)."""

    volume: float
    mass: float
    centre: np.ndarray
    second: np.ndarray

    @property
    def inertia_tensor(self) -> np.ndarray:
        """kg m^2: I = tr(S) Id - S about the centre."""
        return np.trace(self.second) * np.eye(3) - self.second


def mass_properties(vertices: np.ndarray, triangles: np.ndarray, density: float = 1.0) -> MassProperties:
    """Exact mass, centre and second moments about the centre of the solid bounded by the closed,
    outward-oriented triangle mesh (density in kg/m^3). A mesh oriented inward gives a negative
    volume: callers check ``volume > 0`` (the scene checks reject such meshes first)."""
    V = np.ascontiguousarray(vertices, np.float64)
    T = np.ascontiguousarray(triangles, np.int32)
    ref = V.mean(axis=0)
    vol, s1, s2 = _surface_integrals(V, T, ref)
    if vol == 0.0:
        return MassProperties(0.0, 0.0, ref.copy(), np.zeros((3, 3)))
    d = s1 / vol                                  # centre - ref
    sec = s2 - vol * np.outer(d, d)               # parallel axis: about the centre
    return MassProperties(float(vol), float(density * vol), ref + d, density * 0.5 * (sec + sec.T))
