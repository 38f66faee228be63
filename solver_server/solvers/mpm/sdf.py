"""Collider signed distance fields on the MPM grid (book §29: "moving colliders use SDFs for inside
tests, normals and relative velocity").

For every grid node within a narrow band (BAND cells) of a collider's triangles we store the
distance to the closest surface point (m), the outward normal and the collider velocity (m/s) at
that point (barycentric blend of vertex velocities). Closed meshes are signed by ray parity
(inside.py): negative inside. Open meshes (a ground plane, a shell) get an unsigned distance minus
a thickness (at least one cell), so they act as slabs of that thickness. Nodes outside every band keep +inf.
Several colliders merge by keeping the smallest distance per node, with that collider's friction.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .inside import inside_columns, inside_points

BAND = 3.0
"""Band half-width in cells where the distance field is computed."""

ON_SURFACE = 1.0e-6
"""Nodes of a closed collider closer than ON_SURFACE x (dx + mesh size) to its surface count as on
the surface: phi = 0 and the normal is the closest face's outward normal. Their ray-parity sign
cannot be trusted (the rays are nudged by 1e-7 x that length to miss edges, and a node on a face is
classified a hair above it), and r / |r| is noise, so sign and normal could disagree: a node
1.9e-9 m under the top face of an exported floor slab was classified outside with a normal
pointing into the slab, and the grid let sand through that layer (issue 4)."""

FACE_PROBE = 1.0e-3
"""A face's outward side is found by the ray parity of its centroid moved FACE_PROBE dx along its
normal (independent of the mesh's winding, which artist meshes do not always keep consistent)."""

MIN_SHEET_THICKNESS = 1.0
"""Open meshes act as slabs at least this many cells thick (thinner sheets would slip between
grid nodes)."""


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def closest_on_triangle(px, py, pz, ax, ay, az, bx, by, bz, cx, cy, cz):
    """Barycentric (u, v, w) of the closest point to p on triangle abc (Ericson, Real-Time
    Collision Detection §5.1.5)."""
    abx, aby, abz = bx - ax, by - ay, bz - az
    acx, acy, acz = cx - ax, cy - ay, cz - az
    apx, apy, apz = px - ax, py - ay, pz - az
    d1 = abx * apx + aby * apy + abz * apz
    d2 = acx * apx + acy * apy + acz * apz
    if d1 <= 0.0 and d2 <= 0.0:
        return 1.0, 0.0, 0.0
    bpx, bpy, bpz = px - bx, py - by, pz - bz
    d3 = abx * bpx + aby * bpy + abz * bpz
    d4 = acx * bpx + acy * bpy + acz * bpz
    if d3 >= 0.0 and d4 <= d3:
        return 0.0, 1.0, 0.0
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return 1.0 - v, v, 0.0
    cpx, cpy, cpz = px - cx, py - cy, pz - cz
    d5 = abx * cpx + aby * cpy + abz * cpz
    d6 = acx * cpx + acy * cpy + acz * cpz
    if d6 >= 0.0 and d5 <= d6:
        return 0.0, 0.0, 1.0
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        return 1.0 - w, 0.0, w
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return 0.0, 1.0 - w, w
    denom = 1.0 / (va + vb + vc)
    v = vb * denom
    w = vc * denom
    return 1.0 - v - w, v, w


@njit(cache=True, fastmath=False, error_model="numpy")
def band_distance(V, Vel, T, origin, dx, band, dist, cp, cvel, ftri):
    """Unsigned distance (m), closest point and its velocity for nodes within ``band`` (m) of any
    triangle; nodes keep the smallest distance. Serial over triangles (race-free)."""
    nx, ny, nz = dist.shape
    for t in range(T.shape[0]):
        a = T[t, 0]
        b = T[t, 1]
        c = T[t, 2]
        lo0 = min(V[a, 0], V[b, 0], V[c, 0]) - band
        lo1 = min(V[a, 1], V[b, 1], V[c, 1]) - band
        lo2 = min(V[a, 2], V[b, 2], V[c, 2]) - band
        hi0 = max(V[a, 0], V[b, 0], V[c, 0]) + band
        hi1 = max(V[a, 1], V[b, 1], V[c, 1]) + band
        hi2 = max(V[a, 2], V[b, 2], V[c, 2]) + band
        i0 = max(0, int(math.ceil((lo0 - origin[0]) / dx)))
        j0 = max(0, int(math.ceil((lo1 - origin[1]) / dx)))
        k0 = max(0, int(math.ceil((lo2 - origin[2]) / dx)))
        i1 = min(nx - 1, int(math.floor((hi0 - origin[0]) / dx)))
        j1 = min(ny - 1, int(math.floor((hi1 - origin[1]) / dx)))
        k1 = min(nz - 1, int(math.floor((hi2 - origin[2]) / dx)))
        for i in range(i0, i1 + 1):
            px = origin[0] + i * dx
            for j in range(j0, j1 + 1):
                py = origin[1] + j * dx
                for k in range(k0, k1 + 1):
                    pz = origin[2] + k * dx
                    u, v, w = closest_on_triangle(px, py, pz, V[a, 0], V[a, 1], V[a, 2], V[b, 0], V[b, 1],
                                                  V[b, 2], V[c, 0], V[c, 1], V[c, 2])
                    qx = u * V[a, 0] + v * V[b, 0] + w * V[c, 0]
                    qy = u * V[a, 1] + v * V[b, 1] + w * V[c, 1]
                    qz = u * V[a, 2] + v * V[b, 2] + w * V[c, 2]
                    d = math.sqrt((px - qx) ** 2 + (py - qy) ** 2 + (pz - qz) ** 2)
                    if d < dist[i, j, k] and d <= band:
                        dist[i, j, k] = d
                        cp[i, j, k, 0] = qx
                        cp[i, j, k, 1] = qy
                        cp[i, j, k, 2] = qz
                        for e in range(3):
                            cvel[i, j, k, e] = u * Vel[a, e] + v * Vel[b, e] + w * Vel[c, e]
                        ftri[i, j, k] = t


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def finish_field(V, T, dist, cp, cvel, ftri, inside, orient, closed, thickness, origin, dx, mu,
                 phi, normal, vel, fric):
    """Turn the band's unsigned distances into a signed field and merge it into (phi, normal, vel,
    fric) where it is closer than what is already there. ``orient`` (grid-shaped int8) is +1/-1 for
    nodes on a closed surface (the closest face's normal points out/in), 0 elsewhere."""
    nx, ny, nz = dist.shape
    for i in prange(nx):
        for j in range(ny):
            for k in range(nz):
                d = dist[i, j, k]
                if not math.isfinite(d):
                    continue
                px = origin[0] + i * dx
                py = origin[1] + j * dx
                pz = origin[2] + k * dx
                o = orient[i, j, k] if closed else 0
                if o != 0:
                    s = 1.0
                    value = 0.0
                elif closed:
                    s = -1.0 if inside[i * ny + j, k] else 1.0
                    value = s * d
                else:
                    s = 1.0
                    value = d - thickness
                if value >= phi[i, j, k]:
                    continue
                t = ftri[i, j, k]
                a = T[t, 0]
                b = T[t, 1]
                c = T[t, 2]
                e1x = V[b, 0] - V[a, 0]
                e1y = V[b, 1] - V[a, 1]
                e1z = V[b, 2] - V[a, 2]
                e2x = V[c, 0] - V[a, 0]
                e2y = V[c, 1] - V[a, 1]
                e2z = V[c, 2] - V[a, 2]
                fnx = e1y * e2z - e1z * e2y
                fny = e1z * e2x - e1x * e2z
                fnz = e1x * e2y - e1y * e2x
                fl = math.sqrt(fnx * fnx + fny * fny + fnz * fnz) + 1e-300
                fnx /= fl
                fny /= fl
                fnz /= fl
                rx = px - cp[i, j, k, 0]
                ry = py - cp[i, j, k, 1]
                rz = pz - cp[i, j, k, 2]
                if o != 0:
                    nxv = o * fnx
                    nyv = o * fny
                    nzv = o * fnz
                elif d > 1e-9 * dx:
                    nxv = s * rx / d
                    nyv = s * ry / d
                    nzv = s * rz / d
                    if not closed and d > 0.0:
                        # open mesh: point away from the sheet on the node's side
                        nxv = rx / d
                        nyv = ry / d
                        nzv = rz / d
                else:
                    nxv, nyv, nzv = fnx, fny, fnz
                phi[i, j, k] = value
                normal[i, j, k, 0] = nxv
                normal[i, j, k, 1] = nyv
                normal[i, j, k, 2] = nzv
                vel[i, j, k, 0] = cvel[i, j, k, 0]
                vel[i, j, k, 1] = cvel[i, j, k, 1]
                vel[i, j, k, 2] = cvel[i, j, k, 2]
                fric[i, j, k] = mu


def distance_triangles(V: np.ndarray, T: np.ndarray, spec) -> np.ndarray:
    """Triangles of a closed collider that bound the free region: faces lying on or beyond a domain
    wall are dropped. A box standing on the floor then pushes particles caught under it out
    through its sides (the nearest point of the free space), not down through the floor. The
    inside test still uses every triangle."""
    lo = np.asarray(spec.domain_min) + 1e-9 * spec.dx
    hi = np.asarray(spec.domain_max) - 1e-9 * spec.dx
    P = V[T]  # (t, 3 vertices, 3 coords)
    outside = np.any(np.all(P <= lo, axis=1) | np.all(P >= hi, axis=1), axis=1)
    return np.ascontiguousarray(T[~outside])


class ColliderField:
    """Dense per-node collider data over the MPM grid: phi (m, +inf far away), outward normal,
    collider velocity (m/s) and friction coefficient."""

    def __init__(self, spec):
        self.spec = spec
        shape = spec.shape
        self.phi = np.full(shape, np.inf)
        self.normal = np.zeros(shape + (3,))
        self.vel = np.zeros(shape + (3,))
        self.fric = np.zeros(shape)
        self._dist = np.empty(shape)
        self._cp = np.empty(shape + (3,))
        self._cvel = np.empty(shape + (3,))
        self._ftri = np.zeros(shape, np.int32)
        self._orient = np.zeros(shape, np.int8)
        self._no_orient = np.zeros((1, 1, 1), np.int8)

    def clear(self) -> None:
        self.phi.fill(np.inf)
        self.normal.fill(0.0)
        self.vel.fill(0.0)
        self.fric.fill(0.0)

    def add(self, vertices: np.ndarray, velocities: np.ndarray, triangles: np.ndarray, closed: bool,
            thickness: float, friction: float) -> None:
        """Merge one collider with vertices (n, 3) m and vertex velocities (n, 3) m/s."""
        spec = self.spec
        origin = np.array(spec.origin)
        V = np.ascontiguousarray(vertices, np.float64)
        Vel = np.ascontiguousarray(velocities, np.float64)
        T = np.ascontiguousarray(triangles, np.int32)
        if not closed:
            # a sheet thinner than a cell would fall between grid nodes: at least one cell thick
            thickness = max(thickness, MIN_SHEET_THICKNESS * spec.dx)
        band = BAND * spec.dx + thickness
        self._dist.fill(np.inf)
        Td = distance_triangles(V, T, spec) if closed else T
        if Td.shape[0] == 0:
            return
        band_distance(V, Vel, Td, origin, spec.dx, band, self._dist, self._cp, self._cvel, self._ftri)
        scale = float(np.ptp(V, axis=0).max() + spec.dx)
        if closed:
            inside = self._inside(V, T, scale)
            orient = self._surface_orientation(V, T, Td, scale)
        else:
            inside = np.zeros((1, 1), np.bool_)
            orient = self._no_orient
        finish_field(V, Td, self._dist, self._cp, self._cvel, self._ftri, inside, orient, closed, thickness,
                     origin, spec.dx, friction, self.phi, self.normal, self.vel, self.fric)

    def _surface_orientation(self, V: np.ndarray, T: np.ndarray, Td: np.ndarray, scale: float) -> np.ndarray:
        """Grid-shaped int8: for nodes within ON_SURFACE of the closed surface, +1 when the closest
        face's normal (right-hand rule) points out of the mesh, -1 when it points in; 0 elsewhere."""
        orient = self._orient
        orient.fill(0)
        flat_dist = self._dist.reshape(-1)
        near = np.flatnonzero(flat_dist < ON_SURFACE * (self.spec.dx + scale))
        if near.size == 0:
            return orient
        faces, which = np.unique(self._ftri.reshape(-1)[near], return_inverse=True)
        P = V[Td[faces]]  # (f, 3 vertices, 3)
        n = np.cross(P[:, 1] - P[:, 0], P[:, 2] - P[:, 0])
        length = np.linalg.norm(n, axis=1)
        ok = length > 0.0
        n[ok] /= length[ok, None]
        probe = P.mean(axis=1) + FACE_PROBE * self.spec.dx * n
        sign = np.where(inside_points(V, T, np.ascontiguousarray(probe), scale), -1, 1).astype(np.int8)
        sign[~ok] = 0  # degenerate face: keep the ray-parity sign and r / |r|
        orient.reshape(-1)[near] = sign[which.reshape(-1)]
        return orient

    def _inside(self, V: np.ndarray, T: np.ndarray, scale: float) -> np.ndarray:
        """(nx * ny, nz) inside flags of the grid nodes. Nodes beyond a domain wall are classified
        at their projection onto the wall (colliders extend straight through the walls), and every
        node a hair above its position, so a node on a face lying in a wall plane counts as inside."""
        spec = self.spec
        nx, ny, nz = spec.shape
        dx = spec.dx
        lo = np.asarray(spec.domain_min) + 1e-7 * dx
        hi = np.asarray(spec.domain_max) - 1e-7 * dx
        origin = np.asarray(spec.origin)
        xs = np.clip(origin[0] + dx * np.arange(nx), lo[0], hi[0])
        ys = np.clip(origin[1] + dx * np.arange(ny), lo[1], hi[1])
        cx, cy = np.meshgrid(xs, ys, indexing="ij")
        cx = cx.ravel().copy()
        cy = cy.ravel().copy()
        # only columns over the collider's footprint can be inside
        vmin = V.min(axis=0) - dx
        vmax = V.max(axis=0) + dx
        cols = np.flatnonzero((cx >= vmin[0]) & (cx <= vmax[0]) & (cy >= vmin[1]) & (cy <= vmax[1]))
        inside = np.zeros((cx.size, nz), np.bool_)
        if cols.size == 0:
            return inside
        sx = cx[cols].copy()
        sy = cy[cols].copy()
        sub = inside_columns(V, T, sx, sy, float(origin[2]) + 1e-7 * dx, dx, nz, scale)
        zs = origin[2] + dx * np.arange(nz)
        below = zs < lo[2]
        above = zs > hi[2]
        if below.any():
            sub[:, below] = inside_columns(V, T, sx, sy, float(lo[2]), dx, 1, scale)
        if above.any():
            sub[:, above] = inside_columns(V, T, sx, sy, float(hi[2]), dx, 1, scale)
        inside[cols] = sub
        return inside

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.phi, self.normal, self.vel, self.fric, self._dist, self._cp,
                                      self._cvel, self._ftri, self._orient))
