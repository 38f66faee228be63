"""Lagged smoothed Coulomb friction (IPC paper Sec. 5; book: "Frictional Contact", semi-implicit friction).

At the start of a step (positions x_prev) every active contact pair k freezes:
  * the normal force magnitude lambda_k = kappa |b'(s_k)| (N; the edge-edge mollifier is not
    applied, as in IPC Toolkit),
  * the closest-point coefficients c_k (4,) (relative position r = sum_i c_ki x_i),
  * an orthonormal tangent basis T_k (3x2) orthogonal to the contact normal r / |r|,
  * the pair friction coefficient mu_k = max(mu_a, mu_b) of the two bodies (the Material
    contract: "pair uses the max").
The dissipative potential (J) of the tangential relative displacement u_k = T_k^T sum_i c_ki (x_i - x_prev_i)
(metres) is D(x) = sum_k mu_k lambda_k f0(|u_k|), with the smoothed static/dynamic transition
f0(y) = -y^3/(3 eps^2) + y^2/eps + eps/3 for y < eps, y otherwise, eps = eps_v h (m).
Its gradient is the friction force: magnitude mu lambda f1(|u|) <= mu lambda, opposite to u.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .barrier import barrier_first_derivative
from .block_assembly import sum_blocks
from .broad_phase import Candidates
from .distance import stencil_closest
from .mesh import CollisionMesh
from .pairs import pair_set, pair_stencil, contact_distances, local_positions
from solver_server.threads import ordered_sum, threads_for


@dataclass
class FrictionSet:
    """Frozen friction data of the pairs active at x_prev. ids (K, 4) int32 global vertices,
    coef (K, 4) closest-point coefficients, T (K, 3, 2) tangent bases, mu_lambda (K,) in N."""
    ids: np.ndarray
    coef: np.ndarray
    T: np.ndarray
    mu_lambda: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@njit(cache=True, fastmath=False)
def _tangent_basis(n, T):
    # pick the coordinate axis least aligned with n, then Gram-Schmidt
    ax = 0
    if abs(n[1]) < abs(n[ax]):
        ax = 1
    if abs(n[2]) < abs(n[ax]):
        ax = 2
    a = np.zeros(3)
    a[ax] = 1.0
    t1 = a - (a @ n) * n
    t1 /= math.sqrt(t1 @ t1)
    t2 = np.array([n[1] * t1[2] - n[2] * t1[1], n[2] * t1[0] - n[0] * t1[2], n[0] * t1[1] - n[1] * t1[0]])
    T[:, 0] = t1
    T[:, 1] = t2


@njit(cache=True, fastmath=False, parallel=True)
def _setup(x, ids, is_ee, off, active, vbody, body_mu, dhat, kappa):
    na = active.shape[0]
    oids = np.empty((na, 4), dtype=np.int32)
    coef = np.zeros((na, 4))
    T = np.zeros((na, 3, 2))
    ml = np.zeros(na)
    for j in prange(na):
        k = active[j]
        kind, i0, i1, i2, i3, d2 = pair_stencil(x, ids, is_ee, k)
        X = local_positions(x, ids, k)
        c, r, dc, s, npar = stencil_closest(X, kind, i0, i1, i2, i3)
        d = math.sqrt(d2)
        sd = d - off[k]
        lam = -kappa * barrier_first_derivative(sd, dhat)
        ba = vbody[ids[k, 0]]
        bb = vbody[ids[k, 2]] if is_ee[k] else vbody[ids[k, 1]]
        mu = max(body_mu[ba], body_mu[bb])
        for i in range(4):
            oids[j, i] = ids[k, i]
            coef[j, i] = c[i]
        n = r / d
        Tj = np.zeros((3, 2))
        _tangent_basis(n, Tj)
        T[j] = Tj
        ml[j] = mu * lam
    return oids, coef, T, ml


def friction_setup(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float,
                   kappa: float) -> FrictionSet:
    """Freeze normal forces, closest points, tangent bases and mu of the pairs active at x."""
    with threads_for(len(cands)):
        return _friction_setup(x, cands, mesh, dhat, kappa)


def _friction_setup(x, cands, mesh, dhat, kappa):
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3)
    return friction_setup_pairs(x, pair_set(cands, mesh, x), mesh, dhat, kappa)


def friction_setup_pairs(x: np.ndarray, ps, mesh: CollisionMesh, dhat: float, kappa: float) -> FrictionSet:
    """friction_setup on an already flattened PairSet (any superset of the pairs with s < dhat at x,
    e.g. a Verlet list of the block-descent solver)."""
    if len(ps) == 0:
        return FrictionSet(np.zeros((0, 4), np.int32), np.zeros((0, 4)), np.zeros((0, 3, 2)), np.zeros(0))
    s = contact_distances(x, ps.ids, ps.is_ee, ps.off)
    active = np.nonzero((s < dhat) & (s > 0))[0]
    ids, coef, T, ml = _setup(x, ps.ids, ps.is_ee, ps.off, active, mesh.vertex_body, mesh.body_friction,
                              float(dhat), float(kappa))
    keep = ml > 0
    return FrictionSet(np.ascontiguousarray(ids[keep]), np.ascontiguousarray(coef[keep]),
                       np.ascontiguousarray(T[keep]), np.ascontiguousarray(ml[keep]))


@njit(cache=True, fastmath=False)
def f0(y, eps):
    if y >= eps:
        return y
    return -y * y * y / (3.0 * eps * eps) + y * y / eps + eps / 3.0


@njit(cache=True, fastmath=False)
def f1_over_y(y, eps):
    """f1(y) / y with f1 = f0'; finite at y = 0."""
    if y >= eps:
        return 1.0 / y
    return (2.0 * eps - y) / (eps * eps)


@njit(cache=True, fastmath=False, inline="always")
def tangent_displacement(x, x_prev, ids, coef, T, k):
    """Tangential relative displacement u = T_k^T sum_i c_ki (x_i - x_prev_i) (m) as a 2-tuple."""
    d0 = 0.0
    d1 = 0.0
    d2 = 0.0
    for i in range(4):
        v = ids[k, i]
        c = coef[k, i]
        d0 += c * (x[v, 0] - x_prev[v, 0])
        d1 += c * (x[v, 1] - x_prev[v, 1])
        d2 += c * (x[v, 2] - x_prev[v, 2])
    return (T[k, 0, 0] * d0 + T[k, 1, 0] * d1 + T[k, 2, 0] * d2,
            T[k, 0, 1] * d0 + T[k, 1, 1] * d1 + T[k, 2, 1] * d2)


@njit(cache=True, fastmath=False)
def slip_reversals(x, x1, x_prev, ids, coef, T, eps):
    """Number of pairs whose tangential slip u (m, from x_prev) changes branch of f0 on the straight move
    x -> x1: turns back (u(x) . u(x1) < 0 with |u| >= eps (m) at either end) or crosses |u| = eps (sliding <->
    sticking zone). Such a move leaves the branch that the exact Hessian at x describes (the friction kink,
    docs/solver.md "The body step")."""
    n = 0
    for k in range(ids.shape[0]):
        a0, a1 = tangent_displacement(x, x_prev, ids, coef, T, k)
        b0, b1 = tangent_displacement(x1, x_prev, ids, coef, T, k)
        ya = a0 * a0 + a1 * a1
        yb = b0 * b0 + b1 * b1
        if (a0 * b0 + a1 * b1 < 0.0 and max(ya, yb) >= eps * eps) or ((ya >= eps * eps) != (yb >= eps * eps)):
            n += 1
    return n


@njit(cache=True, fastmath=False, inline="always")
def _inward_bound(a0, a1, d0, d1, eps, depth):
    """The first s > 0 at which the slip u(s) = a + s d (m) reaches |u| = min(|a|, eps) - depth eps; inf when it
    never does or that radius is <= 0. Along a move the exact quadratic model of f0(|u|) at a errs only where |u|
    falls inside the sticking zone below min(|a|, eps): the third derivative of f0 is -2 / eps^2 there and 0 on the
    sliding line, so along u the model lies above f0 on every outward move and below it inward, by
    (travel)^3 / (3 eps^2) (see slip_depth_bound)."""
    y2 = a0 * a0 + a1 * a1
    r = min(math.sqrt(y2), eps) - depth * eps
    if r <= 0.0:
        return np.inf
    dd = d0 * d0 + d1 * d1
    b = a0 * d0 + a1 * d1                      # |u(s)|^2 = y2 + 2 b s + dd s^2
    c = y2 - r * r                             # > 0
    disc = b * b - dd * c
    if b >= 0.0 or disc < 0.0:
        return np.inf
    return c / (-b + math.sqrt(disc))         # the smaller root (-b - sqrt(disc)) / dd, cancellation-free


@njit(cache=True, fastmath=False)
def slip_depth_bound(x, x1, x_prev, ids, coef, T, eps, depth):
    """The largest fraction t in (0, 1] of the straight move x -> x1 over which no frozen friction pair's slip u (m,
    from x_prev) travels more than depth x eps into the sticking zone below where it starts (below min(|u(x)|,
    eps): _inward_bound), and the number of pairs that bound it below 1. A CCD for the exact friction model: the
    exact Hessian's curvature along a slip is f1'(y), 2 / eps at rest and 0 from eps on (f0 is C^2 at eps), so a
    sliding pair's exact Newton step sees no curvature and overshoots into the stiff sticking zone; bounded, the
    pair lands depth x eps inside, where the next iteration re-linearises with a curvature of 2 depth / eps
    (docs/solver.md "The body step", item 16)."""
    t = 1.0
    n = 0
    for k in range(ids.shape[0]):
        a0, a1 = tangent_displacement(x, x_prev, ids, coef, T, k)
        b0, b1 = tangent_displacement(x1, x_prev, ids, coef, T, k)
        s = _inward_bound(a0, a1, b0 - a0, b1 - a1, eps, depth)
        if s < 1.0:
            n += 1
            if s < t:
                t = s
    return t, n


@njit(cache=True, fastmath=False, parallel=True)
def _energy(x, x_prev, ids, coef, T, ml, eps):
    K = ids.shape[0]
    e = np.zeros(K)
    for k in prange(K):
        u0, u1 = tangent_displacement(x, x_prev, ids, coef, T, k)
        e[k] = ml[k] * f0(math.sqrt(u0 * u0 + u1 * u1), eps)
    return ordered_sum(e)


@njit(cache=True, fastmath=False, parallel=True)
def _gradient(x, x_prev, ids, coef, T, ml, eps):
    K = ids.shape[0]
    F = np.zeros((K, 3))
    for k in prange(K):
        u0, u1 = tangent_displacement(x, x_prev, ids, coef, T, k)
        w = ml[k] * f1_over_y(math.sqrt(u0 * u0 + u1 * u1), eps)
        for a in range(3):
            F[k, a] = w * (T[k, a, 0] * u0 + T[k, a, 1] * u1)
    out = np.zeros(x.shape[0] * 3)
    for k in range(K):
        for i in range(4):
            v = ids[k, i]
            for a in range(3):
                out[3 * v + a] += coef[k, i] * F[k, a]
    return out


@njit(cache=True, fastmath=False)
def _block_layout(coef):
    """Start of each pair's Hessian blocks: one 3x3 block per pair of slots with nonzero coefficient."""
    K = coef.shape[0]
    bstart = np.zeros(K + 1, dtype=np.int64)
    for k in range(K):
        nz = 0
        for i in range(4):
            if coef[k, i] != 0.0:
                nz += 1
        bstart[k + 1] = bstart[k] + nz * nz
    return bstart


@njit(cache=True, fastmath=False, inline="always")
def friction_block(x, x_prev, ids, coef, T, ml, eps, project, majv, k, A):
    """A (3, 3) = mu lambda T M T^T of pair k: its Hessian's slot block (i, j) is c_i c_j A (see _hessian_blocks)."""
    u0, u1 = tangent_displacement(x, x_prev, ids, coef, T, k)
    y = math.sqrt(u0 * u0 + u1 * u1)
    a = f1_over_y(y, eps)
    bq = 0.0
    if y > 0.0:
        dfy = -1.0 / (y * y) if y >= eps else -1.0 / (eps * eps)
        bq = dfy / y
    # M = a I + bq u u^T
    m00 = a + bq * u0 * u0
    m01 = bq * u0 * u1
    m11 = a + bq * u1 * u1
    if project and y > 0.0:
        lam_t = max(a, 0.0)                   # across u
        lam_u = max(a + bq * y * y, 0.0)      # along u (= f1'(y))
        kmaj = 0.0
        for i in range(4):
            if coef[k, i] != 0.0:
                kmaj = max(kmaj, majv[ids[k, i]])
        if y < kmaj * eps:
            lam_u = lam_t                     # f1(y)/y along u too: the quadratic that lies above f0
        h0 = u0 / y
        h1 = u1 / y
        m00 = lam_t + (lam_u - lam_t) * h0 * h0
        m01 = (lam_u - lam_t) * h0 * h1
        m11 = lam_t + (lam_u - lam_t) * h1 * h1
    elif project:
        m00 = max(m00, 0.0)
        m11 = max(m11, 0.0)
    # A = ml T M T^T (3x3)
    for p in range(3):
        tp0 = T[k, p, 0]
        tp1 = T[k, p, 1]
        for q in range(3):
            tq0 = T[k, q, 0]
            tq1 = T[k, q, 1]
            A[p, q] = ml[k] * (tp0 * (m00 * tq0 + m01 * tq1) + tp1 * (m01 * tq0 + m11 * tq1))


@njit(cache=True, fastmath=False, parallel=True)
def _hessian_blocks(x, x_prev, ids, coef, T, ml, eps, project, bstart, majv):
    """Per-pair 3x3 blocks c_i c_j mu lambda T M T^T, M = f1/y I + (f1/y)'/y u u^T (2x2). M has the
    eigenvalues f1/y (across u) and f1' (along u); projection clamps them at 0 in closed form. With
    projection, a pair whose slip y is below K eps, K the largest majv (n,) of its vertices, takes f1/y
    along u too (see friction_hessian)."""
    K = ids.shape[0]
    nb = bstart[K]
    bi = np.empty(nb, dtype=np.int32)
    bj = np.empty(nb, dtype=np.int32)
    bval = np.empty((nb, 3, 3))
    for k in prange(K):
        A = np.empty((3, 3))
        friction_block(x, x_prev, ids, coef, T, ml, eps, project, majv, k, A)
        b = bstart[k]
        for i in range(4):
            ci = coef[k, i]
            if ci == 0.0:
                continue
            for j in range(4):
                cj = coef[k, j]
                if cj == 0.0:
                    continue
                bi[b] = ids[k, i]
                bj[b] = ids[k, j]
                for p in range(3):
                    for q in range(3):
                        bval[b, p, q] = ci * cj * A[p, q]
                b += 1
    return bi, bj, bval


def _xs(x, x_prev):
    return (np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3),
            np.ascontiguousarray(x_prev, dtype=np.float64).reshape(-1, 3))


def friction_energy(x: np.ndarray, x_prev: np.ndarray, fs: FrictionSet, eps_v_h: float) -> float:
    """Lagged friction potential (J) at x given start-of-step positions x_prev (m); eps_v_h in m."""
    if len(fs) == 0:
        return 0.0
    x, x_prev = _xs(x, x_prev)
    with threads_for(len(fs)):
        return float(_energy(x, x_prev, fs.ids, fs.coef, fs.T, fs.mu_lambda, float(eps_v_h)))


def friction_gradient(x: np.ndarray, x_prev: np.ndarray, fs: FrictionSet, eps_v_h: float) -> np.ndarray:
    """Gradient (3n,) of friction_energy (N): minus the friction forces."""
    x, x_prev = _xs(x, x_prev)
    if len(fs) == 0:
        return np.zeros(x.size)
    with threads_for(len(fs)):
        return _gradient(x, x_prev, fs.ids, fs.coef, fs.T, fs.mu_lambda, float(eps_v_h))


def friction_hessian(x: np.ndarray, x_prev: np.ndarray, fs: FrictionSet, eps_v_h: float,
                     project_psd: bool = True, majorize=None):
    """Hessian of friction_energy as COO triplets (rows int32, cols int32, vals float64), 3n DOFs,
    without duplicates and sorted by row then column (see block_assembly).

    majorize (n,) float or None: per vertex a factor K >= 0. With project_psd, a pair whose tangential slip
    y (m) is below K eps (K the largest of its vertices') gets the curvature f1(y) / y along its slip u
    instead of f1'(y) (0 once sliding, y >= eps): the Hessian of the quadratic that touches
    f0(|u|) at the current u and lies above it everywhere (f0(sqrt s) is concave in s), so the Newton
    step cannot jump across the sticking zone to a slip the other way, the stick / slip switching that
    stopped frictional piles at the iteration cap (docs/solver.md, the body step). None: 0 everywhere (the
    exact projected Hessian)."""
    x, x_prev = _xs(x, x_prev)
    majv = np.zeros(x.shape[0]) if majorize is None else np.ascontiguousarray(majorize, dtype=np.float64)
    if len(fs) == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0)
    with threads_for(len(fs)):
        bstart = _block_layout(fs.coef)
        bi, bj, bval = _hessian_blocks(x, x_prev, fs.ids, fs.coef, fs.T, fs.mu_lambda, float(eps_v_h),
                                       bool(project_psd), bstart, majv)
        return sum_blocks(bi, bj, bval, x.shape[0])
