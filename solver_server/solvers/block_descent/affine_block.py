"""Affine (stiff) bodies as 12-DOF blocks of the block-descent sweep.

An affine body b owns four rows q = z[row0:row0 + 4] = (p, L A^T) of the DOF array (solver_server/bodies/
affine.py); its surface vertices are slaved: x_i = sum_r w_ir q_r with w_i = (1, X_i / L). After the
vertex colours of every sweep, each free body takes Newton steps on the block-descent objective
restricted to its 12 DOFs (divided by h^2, the vertex sweep's convention); the bodies are coloured
by their contact graph (body_plan.py) and the bodies of one colour run on numba's threads:

    E_b(q) = 1/2 (q - y_b)^T (Mbar / h^2) (q - y_b) + kappa_A V |A A^T - I|^2
             + kappa sum_k m_k b(s_k)          (the IPC pairs touching its vertices, ipc/contact/barrier_pair)
             + sum_k mu lambda_k f0(|u_k|)     (lagged friction pairs, ipc/contact/friction)

y_b = q^n + h qdot^n + h^2 g on the translation row (gravity acts on p only: Mbar[0, r] = m delta_0r).
Gradient and Hessian come from the shared kernels by the chain rule: a pair's gradient on slot i, g_i,
adds w_i (x) g_i; its (PSD-projected) Hessian block H_ij between two of the body's slots adds
(w_i w_j^T) (x) H_ij; the orthogonality term is abd/orthogonality.py's energy with a closed-form
Gauss-Newton Hessian, mapped to the L A^T rows. Only the pairs listed for the body are visited
(body_plan.body_pair_lists), the 12 x 12 system is solved by an in-place Cholesky, and Mbar^-1 is
precomputed: no allocation beyond a few scratch arrays per body update.

The step is cut exactly like a vertex's (bounds.ray_fraction): a body step dq moves each of its
vertices on the straight segment x_i + t W_i dq, so the largest admissible t is the minimum over the
body's vertices of the t each admits in its own displacement-bound set (bounds.py). Every vertex of the
body therefore stays in its set, which is all the no-intersection argument of bounds.py uses. The move
is accepted if E_b did not increase, else backtracked along the (cut) segment, whose points are all
admissible (each set is convex and holds the current point). A body takes up to INNER_NEWTON such
steps per sweep (its 12 x 12 solve is cheap next to a colour sweep), stopping at the first cut step:
a cut body counts its vertices as cut, so the sweep re-detects contact as it does for cut vertices.
(Sliding the rest of a cut step along the blocking constraint, as vertices do, is available with
SLIDE but off: on a 4-box stack it made the stack walk sideways by 5 mm/s at the default tolerance.)
Keyframed bodies move towards their target rows by the largest common admissible fraction, as
colliders do.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from . import joint_bodies as _joint
from .body_kernels import TRUNC_SLACK, body_energy, body_grad_hess, body_ray, chol_solve, slot_weights, write_body
from .body_terms import body_scratch, ray_scratch
from .body_plan import body_colors, body_pairs

BACKTRACK = 12        # halvings of a body step before it is dropped for this sweep
SLIDE = False         # after a cut, slide the rest of the step along the blocking constraint
JOINT_STEP = True     # after the colours, one coupled Newton step of all free bodies (joint_bodies.py)
INNER_NEWTON = 4      # Newton iterations per body and sweep (fewer when the step is cut or converged)


class AffinePack(NamedTuple):
    """The affine bodies as the kernels read them (the AB argument): nb bodies with V slaved vertices
    in all. The first three fields are views into the stepper's z, y and target arrays (rows N: on),
    updated in place; the rest is fixed per stepper, except start (per step).

    rows      (4 nb, 3) float64    m, the bodies' rows q = (p, L A^T) of z, updated in place
    inertia   (4 nb, 3) float64    m, their inertia targets y_b = q^n + h qdot^n (+ h^2 g on p)
    target    (4 nb, 3) float64    m, their keyframe targets (keyframed bodies)
    L         (nb,) float64        m, radius of gyration (the rows' scale, bodies/affine.py)
    kV        (nb,) float64        J, orthogonality stiffness kappa_A x volume
    mbar      (nb, 4, 4) float64   kg, per-coordinate mass matrix over the four rows
    voff      (nb,) int64          first vertex of each body
    nv        (nb,) int64          vertices of each body
    xhat      (V, 3) float64       rest offsets from the centre / L (dimensionless): weights w_i = (1, xhat_i)
    xh_start  (nb + 1,) int64      each body's first row of xhat
    vbody     (N,) int32           the body of each vertex (-1: not on an affine body)
    presc     (nb,) bool           keyframed bodies
    mbar_inv  (nb, 4, 4) float64   1/kg, mbar^-1
    start     (4 nb, 3) float64    m, where each free body's step starts (AffineBlocks.start_rows)
    """

    rows: np.ndarray
    inertia: np.ndarray
    target: np.ndarray
    L: np.ndarray
    kV: np.ndarray
    mbar: np.ndarray
    voff: np.ndarray
    nv: np.ndarray
    xhat: np.ndarray
    xh_start: np.ndarray
    vbody: np.ndarray
    presc: np.ndarray
    mbar_inv: np.ndarray
    start: np.ndarray


def affine_pack(sys, N: int) -> AffinePack:
    """The AffinePack of a System's affine bodies (N vertex rows) with its static fields filled; rows,
    inertia, target and start are empty placeholders (AffineBlocks.pack puts this step's arrays in)."""
    ab = sys.affine
    vbody = -np.ones(N, np.int32)
    z3 = np.zeros((0, 3))
    if ab is None or ab.n == 0:
        z = np.zeros(0)
        return AffinePack(z3, z3, z3, z, z, np.zeros((0, 4, 4)), np.zeros(0, np.int64), np.zeros(0, np.int64),
                          np.zeros((0, 3)), np.zeros(1, np.int64), vbody, np.zeros(0, np.bool_), np.zeros((0, 4, 4)), z3)
    nb = ab.n
    presc = np.zeros(nb, np.bool_)
    bc = np.asarray(sys.bc_index)
    for b in range(nb):
        presc[b] = bool(np.isin(int(ab.row0[b]), bc))
        vbody[ab.vertex_offset[b]:ab.vertex_offset[b] + ab.n_vertices[b]] = b
    xh_start = np.zeros(nb + 1, np.int64)
    xh_start[1:] = np.cumsum(ab.n_vertices)
    return AffinePack(z3, z3, z3, np.ascontiguousarray(ab.L, np.float64), np.ascontiguousarray(ab.kV, np.float64),
                      np.ascontiguousarray(ab.mbar, np.float64), np.ascontiguousarray(ab.vertex_offset, np.int64),
                      np.ascontiguousarray(ab.n_vertices, np.int64),
                      np.ascontiguousarray(np.concatenate(ab.X_hat), np.float64), xh_start, vbody, presc,
                      np.ascontiguousarray(np.linalg.inv(ab.mbar), np.float64), z3)


@njit(cache=True, fastmath=False)
def _prescribed_body(b, x, target, BD, AB, presc_tol, out):
    """Move keyframed body b towards its target rows by the largest admissible fraction; out[1] gets
    its vertex count if it was cut, out[2] = 0 if it is then still short of its target."""
    zb, tb, nv = AB.rows, AB.target, AB.nv
    q = np.empty((4, 3))
    dq = np.empty((4, 3))
    cur, dx, nbv, nrm = ray_scratch()
    far = 0.0
    for r in range(4):
        for c in range(3):
            q[r, c] = zb[4 * b + r, c]
            dq[r, c] = tb[4 * b + r, c] - q[r, c]
            far = max(far, abs(dq[r, c]))
    if far == 0.0:
        return
    t, blk = body_ray(b, x, q, dq, BD, AB, cur, dx, nbv, nrm)
    for r in range(4):
        for c in range(3):
            q[r, c] += (1.0 if t >= 1.0 else t) * dq[r, c]
    if t < 1.0:
        out[1] += nv[b]
        if far * (1.0 - t) > presc_tol:
            out[2] = 0.0
    write_body(b, q, zb, x, target, AB)


@njit(cache=True, fastmath=False)
def _free_body(b, x, target, inv_h2, BD, CT, FR, BL, AB, presc_tol):
    """Up to INNER_NEWTON bounded Newton steps of free body b (its rows and slaved vertices updated in
    place). Reads only its own rows and vertices and the positions of the other slots of its pairs,
    writes only its own: bodies of one colour (body_plan) can run concurrently. Returns (residual
    length before the first step (m), whether the bounds cut a step)."""
    zb, yb = AB.rows, AB.inertia
    q = np.empty((4, 3))
    dq = np.empty((4, 3))
    q1 = np.empty((4, 3))
    rest = np.empty((4, 3))
    step = np.empty(12)
    g, H, SC, X, pos, a, wi, wj = body_scratch()
    cur, dx, nbv, nrm = ray_scratch()
    y = yb[4 * b:4 * b + 4]
    res = 0.0
    cut = False
    for it in range(INNER_NEWTON):
        for r in range(4):
            for c in range(3):
                q[r, c] = zb[4 * b + r, c]
        r_it, cut = _free_body_step(b, q, dq, q1, rest, x, y, inv_h2, AB, BD, CT, FR, BL, target, g, H, step, SC,
                                    X, pos, a, wi, wj, cur, dx, nbv, nrm)
        if it == 0:
            res = r_it
        if cut or r_it < presc_tol:
            break
    return res, cut


@njit(cache=True, fastmath=False, parallel=True)
def _free_bodies_parallel(bodies, x, target, inv_h2, BD, CT, FR, BL, AB, presc_tol, res, cut):
    """The bodies of one colour on numba's threads (their objectives are separable, body_plan)."""
    for j in prange(bodies.shape[0]):
        r, c = _free_body(bodies[j], x, target, inv_h2, BD, CT, FR, BL, AB, presc_tol)
        res[j] = r
        cut[j] = 1 if c else 0


@njit(cache=True, fastmath=False)
def affine_sweep(x, target, inv_h2, BD, CT, FR, AB, presc_tol, out, parallel=False):
    """One pass over the affine bodies (after the vertex colours). AB: the AffinePack, whose body rows
    (4 nb, 3) are updated in place.
    Keyframed bodies first (one after the other), then the free bodies colour by colour
    (body_plan.body_colors), the bodies of a colour on numba's threads when more than one is
    allowed (``parallel``: the caller's thread policy, threads.py; Gauss-Seidel across
    colours, Jacobi inside one, which for separable objectives is the same as one after the other).
    out = (largest residual length (m), vertices of cut bodies, 1 if every keyframed body is at its
    target). The residual length is the largest vertex move of the step on inertia alone,
    h^2 W_i Mbar^-1 g (the body version of the vertex sweep's |g| h^2 / m)."""
    voff, nv, vbody, bpresc = AB.voff, AB.nv, AB.vbody, AB.presc
    nbod = voff.shape[0]
    out[0] = 0.0
    out[1] = 0.0
    out[2] = 1.0
    if nbod == 0:
        return
    for b in range(nbod):
        for v in range(voff[b], voff[b] + nv[b]):   # the sweep's arrival test reads target = x here
            for c in range(3):
                target[v, c] = x[v, c]
        if bpresc[b]:
            _prescribed_body(b, x, target, BD, AB, presc_tol, out)
    pids, fids = CT.ids, FR.ids
    BL = body_pairs(pids, fids, vbody, nbod)
    col_s, col_b = body_colors(pids, fids, vbody, bpresc, nbod)
    res = np.zeros(nbod)
    cutb = np.zeros(nbod, np.int64)
    for c in range(col_s.shape[0] - 1):
        bodies = col_b[col_s[c]:col_s[c + 1]]
        nc = bodies.shape[0]
        if parallel and nc > 1:
            _free_bodies_parallel(bodies, x, target, inv_h2, BD, CT, FR, BL, AB, presc_tol, res[:nc], cutb[:nc])
        else:
            for j in range(nc):
                r, ct = _free_body(bodies[j], x, target, inv_h2, BD, CT, FR, BL, AB, presc_tol)
                res[j] = r
                cutb[j] = 1 if ct else 0
        for j in range(nc):
            out[0] = max(out[0], res[j])
            if cutb[j]:
                out[1] += nv[bodies[j]]
    if JOINT_STEP:
        out[1] += _joint.joint_step(x, target, inv_h2, BD, CT, FR, AB)


@njit(cache=True, fastmath=False)
def _free_body_step(b, q, dq, q1, rest, x, y, inv_h2, AB, BD, CT, FR, BL, target, g, H, step, SC, X, pos, a, wi,
                    wj, cur, dx, nbv, nrm):
    """One bounded Newton step of free body b from rows q (written to zb and x when it lowers E_b).
    Returns (residual length before the step (m), whether the bounds cut it)."""
    zb, voff, nv, xh, xh_start, mbinv = AB.rows, AB.voff, AB.nv, AB.xhat, AB.xh_start, AB.mbar_inv
    body_grad_hess(b, q, x, y, inv_h2, AB, CT, FR, BL, g, H, SC, X, pos, a, wi, wj)
    # residual length: h^2 Mbar^-1 g mapped to the vertices
    for r in range(4):
        for c in range(3):
            acc = 0.0
            for s in range(4):
                acc += mbinv[b, r, s] * g[3 * s + c]
            rest[r, c] = acc / inv_h2
    res = 0.0
    for v in range(voff[b], voff[b] + nv[b]):
        i = xh_start[b] + v - voff[b]
        m2 = 0.0
        for c in range(3):
            d = rest[0, c] + xh[i, 0] * rest[1, c] + xh[i, 1] * rest[2, c] + xh[i, 2] * rest[3, c]
            m2 += d * d
        res = max(res, m2)
    res = math.sqrt(res)
    for i in range(12):
        if not math.isfinite(g[i]):
            return res, False
    if not chol_solve(H, g, step):
        return res, False
    for r in range(4):
        for c in range(3):
            dq[r, c] = -step[3 * r + c]
    e0 = body_energy(b, q, x, y, inv_h2, AB, CT, FR, BL, X, pos, a)
    t, blk = body_ray(b, x, q, dq, BD, AB, cur, dx, nbv, nrm)
    t = max(t, 0.0)
    for r in range(4):
        for c in range(3):
            q1[r, c] = q[r, c] + t * dq[r, c]
    cut = t < 1.0 - TRUNC_SLACK
    if SLIDE and cut and blk >= 0 and (nrm[0] != 0.0 or nrm[1] != 0.0 or nrm[2] != 0.0):
        # slide: remove the remaining step's component into the blocking constraint, whose normal
        # in q space is W_blk^T u
        slot_weights(blk, b, voff, xh, xh_start, wi)
        into = 0.0
        nn = 0.0
        for r in range(4):
            for c in range(3):
                into += (1.0 - t) * dq[r, c] * wi[r] * nrm[c]
                nn += wi[r] * wi[r] * nrm[c] * nrm[c]
        for r in range(4):
            for c in range(3):
                rest[r, c] = (1.0 - t) * dq[r, c] - (max(into, 0.0) / nn) * wi[r] * nrm[c]
        t2, blk2 = body_ray(b, x, q1, rest, BD, AB, cur, dx, nbv, nrm)
        t2 = max(t2, 0.0)
        for r in range(4):
            for c in range(3):
                dq[r, c] = q1[r, c] + t2 * rest[r, c]   # the slid end point
        if body_energy(b, dq, x, y, inv_h2, AB, CT, FR, BL, X, pos, a) <= e0:
            write_body(b, dq, zb, x, target, AB)
            return res, True
    for r in range(4):
        for c in range(3):
            dq[r, c] = q1[r, c] - q[r, c]
    # backtrack on the admissible segment q -> q1
    s = 1.0
    for it in range(BACKTRACK):
        for r in range(4):
            for c in range(3):
                q1[r, c] = q[r, c] + s * dq[r, c]
        if body_energy(b, q1, x, y, inv_h2, AB, CT, FR, BL, X, pos, a) <= e0:
            write_body(b, q1, zb, x, target, AB)
            return res, cut
        s *= 0.5
    return res, cut


@njit(cache=True, fastmath=False)
def affine_initial_guess(x, target, BD, AB):
    """Move each free body from its rows towards its start rows (AB.start, AffineBlocks.start_rows) as
    far as every vertex's admissible set allows (the body version of sweep.initial_guess)."""
    zb, yb = AB.rows, AB.start
    voff, bpresc = AB.voff, AB.presc
    q = np.empty((4, 3))
    dq = np.empty((4, 3))
    cur, dx, nbv, nrm = ray_scratch()
    for b in range(voff.shape[0]):
        if bpresc[b]:
            continue
        for r in range(4):
            for c in range(3):
                q[r, c] = zb[4 * b + r, c]
                dq[r, c] = yb[4 * b + r, c] - q[r, c]
        t, blk = body_ray(b, x, q, dq, BD, AB, cur, dx, nbv, nrm)
        t = min(max(t, 0.0), 1.0)
        for r in range(4):
            for c in range(3):
                q[r, c] += t * dq[r, c]
        write_body(b, q, zb, x, target, AB)


class AffineBlocks:
    """The stepper's view of the affine bodies: N vertex rows followed by 4 rows per body in z."""

    def __init__(self, sys):
        self.N = sys.n
        self.D = sys.dof_map
        self.static = affine_pack(sys, self.N)
        self.slaved = self.D.is_slaved[:self.N].copy()
        self.n_bodies = int(self.static.voff.shape[0])
        self.v_prev = None    # centre velocities (nb, 3) at the previous step's start (start_rows)
        self.start = None     # this step's start rows (4 nb, 3), set by inertia_target

    def inertia_target(self, x_n: np.ndarray, v: np.ndarray, h: float, gravity: np.ndarray, y: np.ndarray) -> None:
        """Body rows of y (in place): q^n + h qdot^n, plus h^2 g on each body's translation row;
        slaved vertex rows of y set to W y (the query radius reads the predicted vertex moves)."""
        N = self.N
        y[N:] = x_n[N:] + h * v[N:]
        y[N::4] += h * h * gravity
        self.D.sync(y)
        self.start = self.start_rows(x_n, v, h, gravity)

    def start_rows(self, x_n: np.ndarray, v: np.ndarray, h: float, gravity: np.ndarray) -> np.ndarray:
        """Where each free body's step starts (4 nb, 3): q^n + h qdot^n + h^2 a~ g, with a~ in [0, 1] the
        share of gravity the body's centre actually gained over the previous step (VBD's adaptive
        initialisation, Chen et al. 2024 Sec. 3.7): a~ = clamp(a_prev . g / |g|^2, 0, 1), a_prev the
        change of its centre velocity over that step / h. A body in free flight starts at its inertia
        target y (a~ = 1, exact); a body resting on others starts where it was going (a~ = 0) instead
        of h^2 |g| (1 mm at 96 steps/s) below, pressed into every contact under it. The objective (its
        target y) is unchanged; only the first iterate moves. The first step uses a~ = 1."""
        N = self.N
        start = x_n[N:] + h * v[N:]
        g2 = float(gravity @ gravity)
        share = np.ones(self.n_bodies)
        vp = v[N::4]
        if self.v_prev is not None and g2 > 0.0 and len(vp) == len(self.v_prev):
            share = np.clip(((vp - self.v_prev) / h) @ gravity / g2, 0.0, 1.0)
        self.v_prev = vp.copy()
        start[0::4] += (h * h * share)[:, None] * gravity
        return np.ascontiguousarray(start)

    def pack(self, z: np.ndarray, y: np.ndarray, target: np.ndarray) -> AffinePack:
        """The AffinePack of this step: rows, inertia and target are views into z, y and target; the
        start rows are those of the last inertia_target call."""
        N = self.N
        start = self.start if self.start is not None and len(self.start) == len(z) - N else y[N:].copy()
        return self.static._replace(rows=z[N:], inertia=y[N:], target=target[N:], start=start)

    def query_targets(self, y: np.ndarray, target: np.ndarray) -> np.ndarray:
        """(N, 3) predicted vertex positions for the broad phase's query radius: target, with each
        affine body's vertices at their inertia target W y (the sweep keeps their target rows equal
        to x, see write_body)."""
        N = self.N
        if not self.slaved.any():
            return target[:N]
        return np.where(self.slaved[:, None], y[:N], target[:N])


def drop_vertices(col_start: np.ndarray, col_verts: np.ndarray, drop: np.ndarray) -> tuple:
    """The colouring CSR (start, vertices) without the vertices where drop (N,) is True (empty
    colours removed)."""
    if not drop.any():
        return col_start, col_verts
    cols = [col_verts[col_start[c]:col_start[c + 1]] for c in range(len(col_start) - 1)]
    cols = [c[~drop[c]] for c in cols]
    cols = [c for c in cols if len(c)]
    start = np.zeros(len(cols) + 1, np.int64)
    start[1:] = np.cumsum([len(c) for c in cols])
    verts = np.concatenate(cols).astype(np.int32) if cols else np.zeros(0, np.int32)
    return start, verts


