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
from .broad_phase import Candidates
from .distance import stencil_closest
from .mesh import CollisionMesh
from .pairs import pair_set, pair_stencil, contact_distances, local_positions
from .threads import threads_for


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
        st = pair_stencil(x, ids, is_ee, k)
        X = local_positions(x, ids, k)
        c, r, dc, s, npar = stencil_closest(X, st[0], st[1], st[2], st[3], st[4])
        d = math.sqrt(st[5])
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
    ps = pair_set(cands, mesh, x)
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


@njit(cache=True, fastmath=False)
def _tangent_disp(x, x_prev, ids, coef, T, k):
    dv = np.zeros(3)
    for i in range(4):
        v = ids[k, i]
        for a in range(3):
            dv[a] += coef[k, i] * (x[v, a] - x_prev[v, a])
    return T[k].T @ dv


@njit(cache=True, fastmath=False, parallel=True)
def _energy(x, x_prev, ids, coef, T, ml, eps):
    K = ids.shape[0]
    e = np.zeros(K)
    for k in prange(K):
        u = _tangent_disp(x, x_prev, ids, coef, T, k)
        e[k] = ml[k] * f0(math.sqrt(u @ u), eps)
    return e.sum()


@njit(cache=True, fastmath=False, parallel=True)
def _gradient(x, x_prev, ids, coef, T, ml, eps):
    K = ids.shape[0]
    F = np.zeros((K, 3))
    for k in prange(K):
        u = _tangent_disp(x, x_prev, ids, coef, T, k)
        y = math.sqrt(u @ u)
        F[k] = ml[k] * f1_over_y(y, eps) * (T[k] @ u)
    out = np.zeros(x.shape[0] * 3)
    for k in range(K):
        for i in range(4):
            v = ids[k, i]
            for a in range(3):
                out[3 * v + a] += coef[k, i] * F[k, a]
    return out


@njit(cache=True, fastmath=False, parallel=True)
def _hessian(x, x_prev, ids, coef, T, ml, eps, project):
    K = ids.shape[0]
    rows = np.empty(K * 144, dtype=np.int32)
    cols = np.empty(K * 144, dtype=np.int32)
    vals = np.empty(K * 144)
    for k in prange(K):
        u = _tangent_disp(x, x_prev, ids, coef, T, k)
        y = math.sqrt(u @ u)
        M = f1_over_y(y, eps) * np.eye(2)
        if y > 0.0:
            dfy = -1.0 / (y * y) if y >= eps else -1.0 / (eps * eps)
            M += (dfy / y) * np.outer(u, u)
        if project:
            w, V = np.linalg.eigh(M)
            for i in range(2):
                w[i] = max(w[i], 0.0)
            M = (V * w) @ V.T
        B = ml[k] * (T[k] @ M @ T[k].T)
        base = k * 144
        for p in range(12):
            i = p // 3
            a = p % 3
            rp = 3 * ids[k, i] + a
            for q in range(12):
                j = q // 3
                b = q % 3
                rows[base + 12 * p + q] = rp
                cols[base + 12 * p + q] = 3 * ids[k, j] + b
                vals[base + 12 * p + q] = coef[k, i] * coef[k, j] * B[a, b]
    return rows, cols, vals


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
                     project_psd: bool = True):
    """Hessian of friction_energy as COO triplets (rows int32, cols int32, vals float64), 3n DOFs."""
    x, x_prev = _xs(x, x_prev)
    if len(fs) == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0)
    with threads_for(len(fs)):
        return _hessian(x, x_prev, fs.ids, fs.coef, fs.T, fs.mu_lambda, float(eps_v_h), bool(project_psd))
