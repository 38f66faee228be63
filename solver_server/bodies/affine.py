"""Affine bodies in the solver's DOF vector z (see solver_server/model/dof_map.py).

Each body b owns four rows of z starting at row0[b]:

    z[row0]         = p                  (m)   translation (the body's centre of mass at rest: X is
                                               measured from it, so p is the centre of mass)
    z[row0 + 1 + j] = L * A[:, j]        (m)   column j of A scaled by L, i.e. the rows hold L A^T

with L (m) the body's radius of gyration sqrt(tr S / m) (S = int rho X X^T dV about the centre).
A surface vertex with rest offset X_i from the centre is x_i = A X_i + p = p + sum_j (X_ij / L)
z[row0 + 1 + j]: the map x = J q (q = (p, A), 12 DOFs) becomes the per-coordinate weights
w_i = (1, X_i / L) over the body's four rows (J = w_i^T (x) I_3). Scaling A by L gives every DOF the
unit of a length, so the Newton stopping rule ||dz||_inf / h < tol (m/s) reads as a vertex speed for
body DOFs too, and the mass matrix entries are all of the order of the body mass.

Per-coordinate mass matrix (exact, from the closed surface's second moments; solver_server/bodies/inertia.py):

    Mbar = int rho w w^T dV = [[m, 0], [0, S / L^2]]     (4 x 4, kg; the 12 x 12 block is Mbar (x) I_3)

Energies (J) added to the incremental potential by the time stepper:
    inertia  1/2 sum_c (z_c - z~_c)^T Mbar (z_c - z~_c)  (z~ = z^n + h v^n)
    h^2 * gravity  -sum_c g_c sum_r Mbar[0, r] z[row0 + r, c]    (= -m g . p)
    h^2 * orthogonality  kappa_A V ||A A^T - I||_F^2             (solver_server/bodies/orthogonality.py)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np
from numba import njit

from protocol.rigid import polar_rotation  # noqa: F401  (A = R P; re-exported for the solver side)
from .inertia import MassProperties, mass_properties
from .orthogonality import orth_energy, orth_gradient, orth_hessian, stiffness


@njit(cache=True, fastmath=False)
def _a_flat(z, r, L):
    """Row-major A (9,) of the body whose rows start at r."""
    a = np.empty(9)
    for k in range(3):
        for j in range(3):
            a[3 * k + j] = z[r + 1 + j, k] / L
    return a


@njit(cache=True, fastmath=False)
def bodies_energy(z, zt, row0, L, kV, mbar, g, w_inertia, w_pot, active):
    """w_inertia * inertia + w_pot * (gravity + orthogonality) summed over the bodies (J)."""
    e = 0.0
    for b in range(row0.size):
        if not active[b]:
            continue
        r = row0[b]
        for c in range(3):
            for s in range(4):
                ds = z[r + s, c] - zt[r + s, c]
                for t in range(4):
                    e += 0.5 * w_inertia * mbar[b, s, t] * ds * (z[r + t, c] - zt[r + t, c])
                e -= w_pot * g[c] * mbar[b, 0, s] * z[r + s, c]
        e += w_pot * orth_energy(_a_flat(z, r, L[b]), kV[b])
    return e


@njit(cache=True, fastmath=False)
def bodies_gradient(z, zt, row0, L, kV, mbar, g, w_inertia, w_pot, active, out):
    """Adds the gradient of bodies_energy into out (n_z, 3) (N for p rows, N for the L A rows)."""
    for b in range(row0.size):
        if not active[b]:
            continue
        r = row0[b]
        for c in range(3):
            for s in range(4):
                acc = -w_pot * g[c] * mbar[b, 0, s]
                for t in range(4):
                    acc += w_inertia * mbar[b, s, t] * (z[r + t, c] - zt[r + t, c])
                out[r + s, c] += acc
        G = orth_gradient(_a_flat(z, r, L[b]), kV[b])
        for k in range(3):
            for j in range(3):
                out[r + 1 + j, k] += w_pot * G[3 * k + j] / L[b]


@njit(cache=True, fastmath=False)
def bodies_hessian(z, row0, L, kV, mbar, w_inertia, w_pot, active, project):
    """COO (rows, cols, vals) over scalar DOFs 3 row + c of the bodies' 12 x 12 blocks: Mbar (x) I_3
    times w_inertia plus w_pot times the (PSD-projected) orthogonality Hessian mapped to the L A rows."""
    nb = row0.size
    per = 48 + 81
    ro = np.zeros(nb * per, np.int64)
    co = np.zeros(nb * per, np.int64)
    vo = np.zeros(nb * per)
    k = 0
    for b in range(nb):
        if not active[b]:
            continue
        r = row0[b]
        for c in range(3):
            for s in range(4):
                for t in range(4):
                    ro[k] = 3 * (r + s) + c
                    co[k] = 3 * (r + t) + c
                    vo[k] = w_inertia * mbar[b, s, t]
                    k += 1
        H = orth_hessian(_a_flat(z, r, L[b]), kV[b], project)
        inv = w_pot / (L[b] * L[b])
        for kk in range(3):
            for j in range(3):
                for l in range(3):
                    for m in range(3):
                        ro[k] = 3 * (r + 1 + j) + kk
                        co[k] = 3 * (r + 1 + m) + l
                        vo[k] = inv * H[3 * kk + j, 3 * l + m]
                        k += 1
    return ro[:k], co[:k], vo[:k]


@njit(cache=True, fastmath=False)
def bodies_min_det(z, row0, L):
    """Smallest det A over the bodies (an affine body must never reflect: det A > 0)."""
    dmin = np.inf
    for b in range(row0.size):
        A = _a_flat(z, row0[b], L[b]).reshape(3, 3)
        d = np.linalg.det(A)
        if d < dmin:
            dmin = d
    return dmin


def rotation_following_step(z: np.ndarray, p: np.ndarray, row0: np.ndarray, L: np.ndarray) -> np.ndarray:
    """The Newton step p (n_z, 3) of the DOF array z with each affine body's A part bent towards a rotation:
    with A + dA = (I + M) A and W = (M - M^T) / 2 the step's rotation part, dA becomes dA + W^2 A / 2, so the
    straight step ends at (I + M + W^2 / 2) A, a rotation exp(W) A to third order in W, instead of at the
    stretched (I + W) A, on which the orthogonality energy grows as kappa V |W|^4 (the quadratic model of
    Newton is flat along rotations, so without this the line search cuts a step that turns a body by w rad
    to about (E / kappa V)^(1/4): ~0.01 rad per Newton iteration on a tumbling 10 cm cube). Vertex rows
    and the p rows are unchanged, the path stays a straight line in z (CCD stays exact). Vectorised over
    the bodies; row0 (B,) first row of each body, L (B,) m its radius of gyration."""
    if row0.size == 0:
        return p
    out = p.copy()
    _bend_rows(np.ascontiguousarray(z, np.float64), np.ascontiguousarray(p, np.float64),
               np.ascontiguousarray(row0, np.int64), np.ascontiguousarray(L, np.float64), out)
    return out


@njit(cache=True, fastmath=False)
def _bend_rows(z, p, row0, L, out):
    """out[rows of L A^T] += L (W^2 A / 2)^T per body (rotation_following_step), with the 3 x 3 inverse of A in
    closed form (numpy's batched inverse cost 1-57 ms a call for 200 bodies on the loaded machine)."""
    A = np.empty((3, 3))
    dA = np.empty((3, 3))
    Ai = np.empty((3, 3))
    for b in range(row0.size):
        r = row0[b]
        for k in range(3):
            for j in range(3):
                A[k, j] = z[r + 1 + j, k] / L[b]
                dA[k, j] = p[r + 1 + j, k] / L[b]
        c00 = A[1, 1] * A[2, 2] - A[1, 2] * A[2, 1]
        c01 = A[1, 2] * A[2, 0] - A[1, 0] * A[2, 2]
        c02 = A[1, 0] * A[2, 1] - A[1, 1] * A[2, 0]
        det = A[0, 0] * c00 + A[0, 1] * c01 + A[0, 2] * c02
        Ai[0, 0] = c00 / det
        Ai[1, 0] = c01 / det
        Ai[2, 0] = c02 / det
        Ai[0, 1] = (A[0, 2] * A[2, 1] - A[0, 1] * A[2, 2]) / det
        Ai[1, 1] = (A[0, 0] * A[2, 2] - A[0, 2] * A[2, 0]) / det
        Ai[2, 1] = (A[0, 1] * A[2, 0] - A[0, 0] * A[2, 1]) / det
        Ai[0, 2] = (A[0, 1] * A[1, 2] - A[0, 2] * A[1, 1]) / det
        Ai[1, 2] = (A[0, 2] * A[1, 0] - A[0, 0] * A[1, 2]) / det
        Ai[2, 2] = (A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]) / det
        M = dA @ Ai
        W = 0.5 * (M - M.T)
        corr = 0.5 * (W @ W @ A)
        for k in range(3):
            for j in range(3):
                out[r + 1 + j, k] += corr[k, j] * L[b]


@dataclass
class BodySpec:
    """What build_system hands over for one stiff body."""

    name: str
    vertices: np.ndarray      # (n, 3) m, world at the start frame: the body's own closed mesh (mass, output)
    triangles: np.ndarray     # (m, 3) int32
    density: float            # kg/m^3
    youngs_modulus: float     # Pa
    vertex_offset: int        # first global vertex of the body's contact surface
    row0: int                 # first of its 4 rows in z
    contact_vertices: Optional[np.ndarray] = None   # (k, 3) m: the collision shape's vertices (None: ``vertices``)


class AffineBodies:
    """All affine bodies of a system: mass properties, the x = J q weights and the body energies."""

    def __init__(self, specs: List[BodySpec]):
        nb = len(specs)
        self.names = [s.name for s in specs]
        self.props: List[MassProperties] = []
        self.row0 = np.zeros(nb, np.int64)
        self.L = np.zeros(nb)
        self.kV = np.zeros(nb)
        self.kappa = np.zeros(nb)
        self.mbar = np.zeros((nb, 4, 4))
        self.vertex_offset = np.zeros(nb, np.int64)
        self.n_vertices = np.zeros(nb, np.int64)
        self.X_hat = []     # (k, 3) per body: X / L of the slaved contact vertices (the collision shape's)
        self.X_render = []  # (n, 3) per body: X / L of the body's own vertices (output, keyframe fits)
        for b, s in enumerate(specs):
            mp = mass_properties(s.vertices, s.triangles, s.density)
            self.props.append(mp)
            L = float(np.sqrt(np.trace(mp.second) / mp.mass))
            self.row0[b] = s.row0
            self.L[b] = L
            self.kappa[b] = stiffness(s.youngs_modulus)
            self.kV[b] = self.kappa[b] * mp.volume
            self.mbar[b, 0, 0] = mp.mass
            self.mbar[b, 1:, 1:] = mp.second / L ** 2
            self.vertex_offset[b] = s.vertex_offset
            cv = s.vertices if s.contact_vertices is None else s.contact_vertices
            self.n_vertices[b] = len(cv)
            self.X_hat.append(np.ascontiguousarray((np.asarray(cv, np.float64) - mp.centre) / L))
            self.X_render.append(np.ascontiguousarray((np.asarray(s.vertices, np.float64) - mp.centre) / L))
        self.active = np.ones(nb, np.bool_)

    @property
    def n(self) -> int:
        return int(self.row0.size)

    # --- the map x = J q -----------------------------------------------------------------------
    def map_arrays(self) -> tuple:
        """(slaved vertices, ptr, rows, weights) for DofMap: vertex i of body b depends on rows
        row0..row0+3 with weights (1, X_i / L)."""
        sl, rows, w = [], [], []
        for b in range(self.n):
            n = int(self.n_vertices[b])
            sl.append(np.arange(n) + self.vertex_offset[b])
            rows.append(np.tile(np.arange(4) + self.row0[b], n))
            w.append(np.concatenate([np.ones((n, 1)), self.X_hat[b]], axis=1).ravel())
        if not sl:
            return np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0)
        slaved = np.concatenate(sl).astype(np.int64)
        ptr = np.arange(slaved.size + 1, dtype=np.int64) * 4
        return slaved, ptr, np.concatenate(rows).astype(np.int64), np.concatenate(w)

    def rest_rows(self) -> np.ndarray:
        """(4 n_bodies, 3) start rows: p = centre, L A^T = L I."""
        out = np.zeros((4 * self.n, 3))
        for b in range(self.n):
            out[4 * b] = self.props[b].centre
            out[4 * b + 1:4 * b + 4] = self.L[b] * np.eye(3)
        return out

    def fit_rows(self, b: int, positions: np.ndarray) -> np.ndarray:
        """(4, 3) rows of body b whose affine map best fits the positions (n, 3) of its own vertices (least
        squares; exact for positions that are an affine image of the rest shape, e.g. a keyframed transform)."""
        W = np.concatenate([np.ones((len(positions), 1)), self.X_render[b]], axis=1)
        rows, *_ = np.linalg.lstsq(W, np.asarray(positions, np.float64), rcond=None)
        return rows

    def render_positions(self, z: np.ndarray, b: int) -> np.ndarray:
        """(n, 3) m: body b's own vertices under its current map, x = A X + p = p + (X / L) (L A^T)."""
        r = int(self.row0[b])
        return z[r][None, :] + self.X_render[b] @ z[r + 1:r + 4]

    # --- state queries -------------------------------------------------------------------------
    def A(self, z: np.ndarray, b: int) -> np.ndarray:
        """The affine part A (3, 3) of body b."""
        r = int(self.row0[b])
        return z[r + 1:r + 4].T / self.L[b]

    def p(self, z: np.ndarray, b: int) -> np.ndarray:
        return z[int(self.row0[b])].copy()

    def rigidity_errors(self, z: np.ndarray) -> np.ndarray:
        """|A A^T - I|_F per body."""
        return np.array([np.linalg.norm(self.A(z, b) @ self.A(z, b).T - np.eye(3)) for b in range(self.n)])

    def linear_momentum(self, v: np.ndarray, b: int) -> np.ndarray:
        """kg m/s: m * dp/dt (X is measured from the centre of mass)."""
        return self.props[b].mass * v[int(self.row0[b])]

    def angular_momentum(self, z: np.ndarray, v: np.ndarray, b: int) -> np.ndarray:
        """kg m^2/s about the world origin: m p x p' + sum_ij S_ij (A e_i) x (A' e_j)."""
        r = int(self.row0[b])
        m = self.props[b].mass
        A = self.A(z, b)
        Ad = v[r + 1:r + 4].T / self.L[b]
        S = self.props[b].second
        out = m * np.cross(z[r], v[r])
        for i in range(3):
            for j in range(3):
                out += S[i, j] * np.cross(A[:, i], Ad[:, j])
        return out

    # --- energies on z (used by the time stepper) ----------------------------------------------
    def energy(self, z, zt, g, h2) -> float:
        return float(bodies_energy(z, zt, self.row0, self.L, self.kV, self.mbar, g, 1.0, h2, self.active))

    def gradient(self, z, zt, g, h2) -> np.ndarray:
        out = np.zeros_like(z)
        bodies_gradient(z, zt, self.row0, self.L, self.kV, self.mbar, g, 1.0, h2, self.active, out)
        return out.ravel()

    def hessian(self, z, h2, project: bool = True) -> tuple:
        return bodies_hessian(z, self.row0, self.L, self.kV, self.mbar, 1.0, h2, self.active, project)

    def search_step(self, z: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The line search's step for Newton step p: :func:`rotation_following_step` (free bodies only)."""
        if not self.ROTATION_STEP:
            return p
        return rotation_following_step(z, p, self.row0[self.active], self.L[self.active])

    ROTATION_STEP = True
    """Bend each body's Newton step towards a rotation (rotation_following_step); False: the straight step."""

    def min_det(self, z) -> float:
        return float(bodies_min_det(z, self.row0, self.L)) if self.n else np.inf

    def diag_mass_rows(self) -> np.ndarray:
        """(4 n_bodies,) diagonal of Mbar per row (kg): the weights of the body rows in the force
        residual and the pin penalty."""
        return np.concatenate([np.diag(self.mbar[b]) for b in range(self.n)]) if self.n else np.zeros(0)
