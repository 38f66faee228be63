"""A global correction between sweep batches: one preconditioned gradient step with a constant,
pre-factorised matrix, cut to the vertices' admissible sets.

Why: Gauss-Seidel carries tension across a stiff membrane one ring of vertices per sweep. On the
64^2 drape (E t = 100 N/m against m/h^2 = 0.45 N/m per vertex) four steps of 25 sweeps land 35 mm
RMS from the step's minimum at frame 40, where the converged cloth moves 38 mm (docs/solver.md, "How
far a fixed sweep budget is from the step's minimum"). A Newton
solve would fix the long wavelengths but costs a sparse factorisation per iteration.

How: the projective-dynamics observation (book "Projective dynamics"; Bouaziz et al. 2014) that
M/h^2 + sum_e w_e G_e^T G_e, with G_e the element's shape derivatives, is a constant scalar
Laplacian-like matrix P applied to x, y and z alike: invariant under rotation, so it stays a good
model of the stretching stiffness however the cloth folds. P is factorised once per stepper.
A correction is

    d = -P^-1 g(x)          (g the gradient of the step's incremental potential, sweep.py's terms)
    x_c = x + d, each vertex cut on its ray at its admissible set (bounds.py)
    alpha = -g(x).(x_c - x) / ((g(x_c) - g(x)).(x_c - x))   (secant: the curvature along the move)
    x <- x + alpha (x_c - x),  alpha in (0, 1]

Each vertex's admissible set is convex and holds both x and x_c, so every point of the segment is
inside it: the correction keeps the guarantee of the sweeps (no intersection, see docs/solver.md).
Tets: the move is halved until every tet keeps VOLUME_KEEP of its volume (all vertices move at
once, so the per-vertex test of a sweep does not apply), and the final point is checked again. The barrier, friction
and bending stay with the sweeps (local terms Gauss-Seidel handles well); P models only the
stretching of membranes, tets and rods, which is what Gauss-Seidel handles badly.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from .dihedral_cache import dihedrals_all
from .incidence import Elements
from .bounds import VOLUME_KEEP, ray_fraction
from .sweep import solid_terms, vertex_terms
from .vertex_contact import contact_scratch, moves_from_centre
from .vertex_elastic import tet_volume_moving


def _factor(P: sp.csc_matrix):
    """A solve function for the SPD matrix P: CHOLMOD when scikit-sparse is installed, else SuperLU."""
    try:
        from sksparse.cholmod import cholesky
        f = cholesky(P)
        return lambda b: f(b)
    except ImportError:  # pragma: no cover - scikit-sparse is a declared dependency
        from scipy.sparse.linalg import splu
        lu = splu(P)
        return lambda b: lu.solve(b)


def stretch_matrix(EL: Elements, n: int, mass: np.ndarray, inv_h2: float, free: np.ndarray) -> sp.csc_matrix:
    """P restricted to the free vertices: diag(m/h^2) (N/m) + the scalar stretching Laplacian
    sum_e w_e (2 mu + lam) n_a . n_b of membranes and tets (w area*thickness or volume, m^3; n_a the
    shape derivatives, 1/m) and k/l of rod edges (N/m)."""
    rows, cols, vals = [], [], []
    tris, Dm, w, mu, lam = EL.tris, EL.tri_Dm_inv, EL.tri_w, EL.tri_mu, EL.tri_lam
    if len(tris):
        N = np.stack([-(Dm[:, 0, :] + Dm[:, 1, :]), Dm[:, 0, :], Dm[:, 1, :]], 1)      # (T, 3, 2)
        K = np.einsum("tai,tbi->tab", N, N) * (w * (2.0 * mu + lam))[:, None, None]
        rows.append(np.repeat(tris, 3, 1).ravel())
        cols.append(np.tile(tris, (1, 3)).ravel())
        vals.append(K.ravel())
    tets, tDm, vol, tmu, tlam = EL.tets, EL.tet_Dm_inv, EL.tet_vol, EL.tet_mu, EL.tet_lam
    if len(tets):
        N = np.concatenate([-tDm.sum(1, keepdims=True), tDm], 1)                     # (E, 4, 3)
        K = np.einsum("tai,tbi->tab", N, N) * (vol * (2.0 * tmu + tlam))[:, None, None]
        rows.append(np.repeat(tets, 4, 1).ravel())
        cols.append(np.tile(tets, (1, 4)).ravel())
        vals.append(K.ravel())
    rods, rest, rk = EL.rods, EL.rod_rest, EL.rod_k
    if len(rods):
        k = rk / rest
        K = np.stack([k, -k, -k, k], 1)
        rows.append(np.repeat(rods, 2, 1).ravel())
        cols.append(np.tile(rods, (1, 2)).ravel())
        vals.append(K.ravel())
    diag = np.arange(n)
    rows.append(diag)
    cols.append(diag)
    vals.append(np.asarray(mass, np.float64) * inv_h2)
    P = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)).tocsr()
    idx = np.flatnonzero(free)
    return P[idx][:, idx].tocsc()


@njit(cache=True, fastmath=False, parallel=True)
def gradient_all(x, y, mass, inv_h2, free_idx, EL, SH, CT, FR, G):
    """G[k] = gradient (N) of the step's incremental potential at free vertex free_idx[k]: the gradient
    the sweep assembles (sweep.vertex_terms and solid_terms: inertia, elasticity, barrier, lagged
    friction), for all vertices at once at x. SH must hold the dihedrals at x."""
    nf = free_idx.shape[0]
    nch = max(1, min(nf, 64))
    skip = np.zeros(x.shape[0], np.bool_)
    moves_from_centre(x, CT.centre, free_idx[:0], CT.D)     # the pairs' activity test reads them
    for ch in prange(nch):
        k0 = ch * nf // nch
        k1 = (ch + 1) * nf // nch
        HH = np.empty((k1 - k0, 3, 3))
        vs = free_idx[k0:k1]
        vertex_terms(vs, x, y, mass, inv_h2, skip, EL, SH, CT, FR, G[k0:k1], HH, contact_scratch(),
                     np.empty((3, 3)))
        solid_terms(vs, x, skip, EL, G[k0:k1], HH)


@njit(cache=True, fastmath=False)
def _tets_keep(x_old, x_new, tets):
    """Every tet keeps >= VOLUME_KEEP of its volume from x_old to x_new."""
    for e in range(tets.shape[0]):
        if tet_volume_moving(x_new, tets[e], 0, x_new[tets[e, 0]]) < VOLUME_KEEP * \
                tet_volume_moving(x_old, tets[e], 0, x_old[tets[e, 0]]):
            return False
    return True


@njit(cache=True, fastmath=False)
def cut_to_admissible(x, d, free_idx, BD, tets, xc):
    """xc = x + d for the free vertices, each cut on its ray at its admissible set (BD of the current
    detection); other rows copy x. With tets, the move is then halved until each keeps VOLUME_KEEP of its
    volume; returns False if that fails."""
    nb = np.empty(3)
    cur = np.empty(3)
    dx = np.empty(3)
    xc[:, :] = x
    for k in range(free_idx.shape[0]):
        v = free_idx[k]
        for a in range(3):
            cur[a] = x[v, a]
            dx[a] = d[k, a]
        t = ray_fraction(v, cur, dx, BD, nb)
        for a in range(3):
            xc[v, a] = cur[a] + t * dx[a]
    if tets.shape[0] == 0:
        return True
    # all vertices move at once: halve the move (towards x, inside every convex admissible set) until
    # every tet keeps VOLUME_KEEP of its volume; give up after 30 halvings
    for _ in range(30):
        if _tets_keep(x, xc, tets):
            return True
        for k in range(free_idx.shape[0]):
            v = free_idx[k]
            for a in range(3):
                xc[v, a] = 0.5 * (x[v, a] + xc[v, a])
    return False


class GlobalCorrection:
    """The pre-factorised stretching model of one stepper and the correction step (module docstring)."""

    def __init__(self, EL: Elements, n: int, mass: np.ndarray, h: float, free: np.ndarray):
        # a massless vertex (on no element) would make P singular; the correction leaves it to the sweeps
        self.free_idx = np.ascontiguousarray(np.flatnonzero(free & (np.asarray(mass) > 0.0)), np.int32)
        free = np.zeros(n, bool)
        free[self.free_idx] = True
        self.inv_h2 = 1.0 / (h * h)
        self.solve = _factor(stretch_matrix(EL, n, mass, self.inv_h2, free)) if len(self.free_idx) else None
        self.G0 = np.zeros((len(self.free_idx), 3))
        self.G1 = np.zeros((len(self.free_idx), 3))
        self.last_alpha = 0.0

    def apply(self, x, y, mass, EL, SH, CT, FR, BD) -> float:
        """One correction of x (n, 3) in place; returns the step fraction alpha taken (0: none).
        SH must hold the dihedrals at x on entry (run_sweeps leaves it so); on return it may hold
        them at another point: run_sweeps recomputes them when it starts."""
        self.last_alpha = 0.0
        if self.solve is None:
            return 0.0
        fi = self.free_idx
        gradient_all(x, y, mass, self.inv_h2, fi, EL, SH, CT, FR, self.G0)
        d = -np.asarray(self.solve(self.G0))
        xc = np.empty_like(x)
        if not cut_to_admissible(x, np.ascontiguousarray(d), fi, BD, EL.tets, xc):
            return 0.0
        dx = xc[fi] - x[fi]
        num = -float((self.G0 * dx).sum())
        if not num > 0.0:
            return 0.0
        dihedrals_all(xc, SH.quad, SH.theta, SH.grad, SH.ok)
        gradient_all(xc, y, mass, self.inv_h2, fi, EL, SH, CT, FR, self.G1)
        den = float(((self.G1 - self.G0) * dx).sum())
        alpha = min(num / den, 1.0) if den > 0.0 else 1.0
        if not np.isfinite(alpha) or alpha <= 0.0:
            return 0.0
        xn = x.copy()
        xn[fi] += alpha * dx
        if not _tets_keep(x, xn, EL.tets):
            return 0.0
        x[:] = xn
        self.last_alpha = alpha
        return alpha
