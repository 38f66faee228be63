"""Barrier potential over the active contact pairs: energy, gradient, PSD-projected Hessian.

P(x) = kappa * sum_k m_k(x) b(s_k(x), dhat)     (book: "Distance Barrier"; IPC paper eq. 6)

s_k = d_k - o_k is the contact distance (m), b the C2 IPC barrier (barrier.py), m_k the
edge-edge mollifier (1 for point-triangle pairs). kappa (J/m^2) is the barrier stiffness
(stiffness.py). Pairs with s_k >= dhat contribute nothing (exact locality). The energy is in
the caller's energy units; derivatives are w.r.t. the flattened positions (3n DOFs, metres).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit, prange

from .barrier import barrier, barrier_first_derivative, barrier_second_derivative
from .broad_phase import Candidates
from .distance import stencil_grad_hess
from .mesh import CollisionMesh
from .mollifier import mollifier, cross_norm2_grad_hess
from .pairs import pair_set, pair_stencil, contact_distances, local_positions
from .psd import project_psd_translation_invariant
from .threads import threads_for


@njit(cache=True, fastmath=False)
def pair_barrier(X, stencil, is_ee, off, epsx, dhat, g, H, want_grad, want_hess):
    """Mollified barrier m * b(s) of one pair at slot positions X (12,), unit stiffness.

    stencil = (kind, i0, i1, i2, i3, d2) from the closest-feature classification. Writes the
    gradient into g (12,) and the Hessian into H (12, 12) when asked. Returns the energy.
    """
    kind, i0, i1, i2, i3, d2 = stencil
    d = math.sqrt(d2)
    s = d - off
    if s >= dhat:
        if want_grad:
            g[:] = 0.0
        if want_hess:
            H[:, :] = 0.0
        return 0.0
    b = barrier(s, dhat)
    m = 1.0
    m1 = 0.0
    m2 = 0.0
    gc = np.zeros(12)
    Hc = np.zeros((12, 12))
    if is_ee:
        c = cross_norm2_grad_hess(X, gc, Hc, want_hess)
        m, m1, m2 = mollifier(c, epsx)
    if not (want_grad or want_hess):
        return m * b
    b1 = barrier_first_derivative(s, dhat)
    gD = np.zeros(12)
    HD = np.zeros((12, 12))
    stencil_grad_hess(X, kind, i0, i1, i2, i3, gD, HD, want_hess)
    gs = gD / (2.0 * d)
    g[:] = m * b1 * gs + m1 * b * gc
    if want_hess:
        b2 = barrier_second_derivative(s, dhat)
        Hs = HD / (2.0 * d) - np.outer(gD, gD) / (4.0 * d * d * d)
        H[:, :] = m * (b2 * np.outer(gs, gs) + b1 * Hs)
        if m1 != 0.0 or m2 != 0.0:
            H[:, :] += m1 * b1 * (np.outer(gc, gs) + np.outer(gs, gc)) + m1 * b * Hc + m2 * b * np.outer(gc, gc)
    return m * b


@njit(cache=True, fastmath=False, parallel=True)
def _energy(x, ids, is_ee, off, epsx, dhat):
    K = ids.shape[0]
    e = np.zeros(K)
    dummy_g = np.zeros(12)
    dummy_H = np.zeros((1, 1))
    for k in prange(K):
        st = pair_stencil(x, ids, is_ee, k)
        s = math.sqrt(st[5]) - off[k]
        if s < dhat:
            X = local_positions(x, ids, k)
            e[k] = pair_barrier(X, st, is_ee[k], off[k], epsx[k], dhat, dummy_g, dummy_H, False, False)
    return e.sum()


@njit(cache=True, fastmath=False)
def _active(x, ids, is_ee, off, dhat):
    s = contact_distances(x, ids, is_ee, off)
    return np.nonzero(s < dhat)[0]


@njit(cache=True, fastmath=False, parallel=True)
def _gradient(x, ids, is_ee, off, epsx, dhat, active):
    na = active.shape[0]
    G = np.zeros((na, 12))
    dummy_H = np.zeros((1, 1))
    for j in prange(na):
        k = active[j]
        X = local_positions(x, ids, k)
        g = np.zeros(12)
        pair_barrier(X, pair_stencil(x, ids, is_ee, k), is_ee[k], off[k], epsx[k], dhat, g, dummy_H, True, False)
        G[j] = g
    out = np.zeros(x.shape[0] * 3)
    for j in range(na):
        k = active[j]
        for i in range(4):
            v = ids[k, i]
            for a in range(3):
                out[3 * v + a] += G[j, 3 * i + a]
    return out


@njit(cache=True, fastmath=False, parallel=True)
def _hessian(x, ids, is_ee, off, epsx, dhat, active, project):
    na = active.shape[0]
    rows = np.empty(na * 144, dtype=np.int32)
    cols = np.empty(na * 144, dtype=np.int32)
    vals = np.empty(na * 144)
    for j in prange(na):
        k = active[j]
        X = local_positions(x, ids, k)
        g = np.zeros(12)
        H = np.zeros((12, 12))
        pair_barrier(X, pair_stencil(x, ids, is_ee, k), is_ee[k], off[k], epsx[k], dhat, g, H, True, True)
        if project:
            H = project_psd_translation_invariant(H)
        base = j * 144
        for p in range(12):
            rp = 3 * ids[k, p // 3] + p % 3
            for q in range(12):
                rows[base + 12 * p + q] = rp
                cols[base + 12 * p + q] = 3 * ids[k, q // 3] + q % 3
                vals[base + 12 * p + q] = H[p, q]
    return rows, cols, vals


def _prep(x, cands, mesh):
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3)
    return x, pair_set(cands, mesh, x)


def _barrier_energy_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float, kappa: float) -> float:
    """kappa * sum of mollified barriers over the candidate pairs (inf if any contact distance <= 0)."""
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return 0.0
    return float(kappa) * float(_energy(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat)))


def _barrier_gradient_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float,
                     kappa: float) -> np.ndarray:
    """Gradient (3n,) of barrier_energy w.r.t. the flattened positions."""
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return np.zeros(x.size)
    active = _active(x, ps.ids, ps.is_ee, ps.off, float(dhat))
    return float(kappa) * _gradient(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat), active)


def _barrier_hessian_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float, kappa: float,
                    project_psd: bool = True):
    """Hessian of barrier_energy as COO triplets (rows int32, cols int32, vals float64) in 3n-DOF
    numbering (duplicates are summed by scipy.sparse). Each pair's 12x12 block is PSD-projected
    when project_psd is true."""
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0)
    active = _active(x, ps.ids, ps.is_ee, ps.off, float(dhat))
    rows, cols, vals = _hessian(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat), active, bool(project_psd))
    return rows, cols, float(kappa) * vals


def _count_active_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float) -> int:
    """Number of candidate pairs with contact distance below dhat."""
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return 0
    return int(_active(x, ps.ids, ps.is_ee, ps.off, float(dhat)).shape[0])


def _min_distance_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh) -> float:
    """Smallest contact distance (m, offsets subtracted) over the candidate pairs; inf if none."""
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return float("inf")
    return float(contact_distances(x, ps.ids, ps.is_ee, ps.off).min())


def _contact_distance_array_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh) -> np.ndarray:
    """Contact distance (m) of every candidate pair, point-triangle pairs first then edge-edge."""
    x, ps = _prep(x, cands, mesh)
    return contact_distances(x, ps.ids, ps.is_ee, ps.off)


def _threaded(impl):
    """Public wrapper: same signature as impl, thread policy from the candidate count."""
    def wrapper(x, cands, *args, **kwargs):
        with threads_for(len(cands)):
            return impl(x, cands, *args, **kwargs)
    functools.update_wrapper(wrapper, impl)
    wrapper.__name__ = wrapper.__qualname__ = impl.__name__[1:-len("_impl")]
    return wrapper


barrier_energy = _threaded(_barrier_energy_impl)
barrier_gradient = _threaded(_barrier_gradient_impl)
barrier_hessian = _threaded(_barrier_hessian_impl)
count_active = _threaded(_count_active_impl)
min_distance = _threaded(_min_distance_impl)
contact_distance_array = _threaded(_contact_distance_array_impl)
