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
from .barrier_pair import new_scratch, pair_energy, pair_terms, pair_stencil_local, cross_norm2_value
from .block_assembly import sum_blocks
from .distance import stencil_grad_hess, KIND_PP, KIND_PE
from .mesh import CollisionMesh
from .mollifier import mollifier, cross_norm2_grad_hess
from .pairs import pair_set, contact_distances, local_positions
from .ccd import box_gap
from solver_server.threads import ordered_sum, threads_for


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


FAR_MARGIN = 1.0e-9   # x dhat: a pair whose boxes are further apart than (1 + this) dhat + its offset is inactive


@njit(cache=True, fastmath=False, inline="always")
def far_apart(X, is_ee, off, dhat):
    """True when the axis-aligned boxes of the pair's two primitives (slot positions X (12,), m) are further apart
    than dhat (1 + FAR_MARGIN) + off: its contact distance is then >= dhat for sure (the box gap is a lower bound
    of the distance; the margin covers the round-off of both), so its barrier, gradient and Hessian are exactly
    0 and it is inactive. About ten flops instead of the closest-feature stencil: most of a Verlet list's
    candidates (contact/terms.py CandidateList) are such pairs."""
    return box_gap(X, is_ee) - off > dhat * (1.0 + FAR_MARGIN)


@njit(cache=True, fastmath=False, inline="always")
def _chunks(n):
    """Number of work chunks for a prange over n items (scratch arrays are allocated per chunk)."""
    return max(1, min(n, 64))


@njit(cache=True, fastmath=False, parallel=True)
def _classify(x, ids, is_ee, off, epsx, dhat):
    """Per candidate: 0 if inactive (s >= dhat), else the number of slots its Hessian involves
    (2 point-point, 3 point-edge, 4 otherwise and for mollified edge-edge pairs)."""
    K = ids.shape[0]
    ns = np.zeros(K, dtype=np.int8)
    nch = _chunks(K)
    for ch in prange(nch):
        X = np.empty(12)   # one scratch per chunk: no heap allocation per candidate
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            for i in range(4):
                for a in range(3):
                    X[3 * i + a] = x[ids[k, i], a]
            if far_apart(X, is_ee[k], off[k], dhat):
                continue
            kind, i0, i1, i2, i3, d2 = pair_stencil_local(X, is_ee[k])
            if math.sqrt(d2) - off[k] < dhat:
                if is_ee[k] and cross_norm2_value(X) < epsx[k]:
                    ns[k] = 4
                elif kind == KIND_PP:
                    ns[k] = 2
                elif kind == KIND_PE:
                    ns[k] = 3
                else:
                    ns[k] = 4
    return ns


@njit(cache=True, fastmath=False, parallel=True)
def _energy_classify(x, ids, is_ee, off, epsx, dhat):
    """(energy, _classify) at x in one pass: the energy sums pair_energy over the candidates in _chunks(K) chunks
    (pair_energy's steps written out, to keep the edge-edge cross norm for the classification; the same bits as a pass
    of pair_energy itself, tests/ipc/test_energy_classify.py), ordered_sum over the chunks; ns is _classify's. The line search's energies then leave the classification of the point Newton accepts
    (its gradient and Hessian follow with the same candidates) already done (_layout)."""
    K = ids.shape[0]
    nch = _chunks(K)
    e = np.zeros(nch)
    ns = np.zeros(K, dtype=np.int8)
    for ch in prange(nch):
        X = np.empty(12)
        acc = 0.0
        for k in range(ch * K // nch, (ch + 1) * K // nch):
            for i in range(4):
                for a in range(3):
                    X[3 * i + a] = x[ids[k, i], a]
            if far_apart(X, is_ee[k], off[k], dhat):
                continue
            kind, i0, i1, i2, i3, d2 = pair_stencil_local(X, is_ee[k])
            s = math.sqrt(d2) - off[k]
            if s >= dhat:
                acc += 0.0
                continue
            b = barrier(s, dhat)
            if is_ee[k]:
                c = cross_norm2_value(X)
                m, m1, m2 = mollifier(c, epsx[k])
                acc += m * b
                if c < epsx[k]:
                    ns[k] = 4
                    continue
            else:
                acc += b
            if kind == KIND_PP:
                ns[k] = 2
            elif kind == KIND_PE:
                ns[k] = 3
            else:
                ns[k] = 4
        e[ch] = acc
    return ordered_sum(e), ns


@njit(cache=True, fastmath=False)
def _same_bytes(a, b):
    """True when the int64 arrays a and b (float64 positions viewed as int64) are equal entry for entry."""
    fa = a.ravel()
    fb = b.ravel()
    if fa.size != fb.size:
        return False
    for k in range(fa.size):
        if fa[k] != fb[k]:
            return False
    return True


CLASSIFIED_KEPT = 2   # classifications an energy pass leaves on its PairSet (the line search's trial point and start)


def _remember_classes(ps, x, dhat, ns):
    """Keep ns, the classification of ps's pairs at x (byte copy kept) for _layout, with the last CLASSIFIED_KEPT."""
    kept = getattr(ps, "_classes", [])
    ps._classes = (kept + [(dhat, np.array(x), ns)])[-CLASSIFIED_KEPT:]


def _recalled_classes(ps, x, dhat):
    """The classification an energy pass left for x (same bytes) and dhat, or None."""
    for d, kx, ns in getattr(ps, "_classes", ()):
        if d == dhat and kx.shape == x.shape and _same_bytes(kx.view(np.int64), x.view(np.int64)):
            return ns
    return None


@njit(cache=True, fastmath=False)
def _active_layout(ns):
    """Active pair indices and the start of each active pair's Hessian blocks (ns^2 blocks each)."""
    active = np.nonzero(ns)[0]
    na = active.shape[0]
    bstart = np.zeros(na + 1, dtype=np.int64)
    for j in range(na):
        n = ns[active[j]]
        bstart[j + 1] = bstart[j] + n * n
    return active, bstart


@njit(cache=True, fastmath=False)
def _active(x, ids, is_ee, off, dhat):
    s = contact_distances(x, ids, is_ee, off)
    return np.nonzero(s < dhat)[0]


@njit(cache=True, fastmath=False, parallel=True)
def _pair_terms_all(x, ids, is_ee, off, epsx, dhat, active, bstart, want_hess, project):
    """Energies (na,), local gradients (na, 12) and Hessian blocks (row vertex, column vertex,
    3x3 values) of the active pairs."""
    na = active.shape[0]
    E = np.zeros(na)
    G = np.empty((na, 12))
    nb = bstart[na] if want_hess else 0
    bi = np.empty(nb, dtype=np.int32)
    bj = np.empty(nb, dtype=np.int32)
    bval = np.empty((nb, 3, 3))
    nch = _chunks(na)
    for ch in prange(nch):
        sc = new_scratch()
        X = np.empty(12)
        for j in range(ch * na // nch, (ch + 1) * na // nch):
            k = active[j]
            for i in range(4):
                for a in range(3):
                    X[3 * i + a] = x[ids[k, i], a]
            e, ns = pair_terms(X, is_ee[k], off[k], epsx[k], dhat, want_hess, project, sc)
            E[j] = e
            g = sc.grad
            for p in range(12):
                G[j, p] = g[p]
            if want_hess:
                H = sc.hess
                slots = sc.slots
                b = bstart[j]
                for u in range(ns):
                    for v in range(ns):
                        bi[b] = ids[k, slots[u]]
                        bj[b] = ids[k, slots[v]]
                        for a in range(3):
                            for c in range(3):
                                bval[b, a, c] = H[3 * u + a, 3 * v + c]
                        b += 1
    return E, G, bi, bj, bval


@njit(cache=True, fastmath=False)
def _scatter_gradient(G, ids, active, n):
    out = np.zeros(3 * n)
    for j in range(active.shape[0]):
        k = active[j]
        for i in range(4):
            v = ids[k, i]
            for a in range(3):
                out[3 * v + a] += G[j, 3 * i + a]
    return out


def _prep(x, cands, mesh):
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3)
    return x, pair_set(cands, mesh, x)


def _layout(x, ps, dhat):
    """Active pairs and their Hessian block layout at x, cached on the PairSet for the last x
    (gradient and Hessian of one Newton iterate share it)."""
    cache = getattr(ps, "_layout", None)
    if cache is not None and cache[0] == dhat and cache[1].shape == x.shape and np.array_equal(cache[1], x):
        return cache[2], cache[3]
    ns = _recalled_classes(ps, x, dhat)
    if ns is None:
        ns = _classify(x, ps.ids, ps.is_ee, ps.off, ps.epsx, dhat)
    active, bstart = _active_layout(ns)
    ps._layout = (dhat, x.copy(), active, bstart)
    return active, bstart


def _barrier_energy_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float, kappa: float) -> float:
    """kappa * sum of mollified barriers over the candidate pairs (inf if any contact distance <= 0)."""
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return 0.0
    e, ns = _energy_classify(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat))
    _remember_classes(ps, x, float(dhat), ns)
    return float(kappa) * float(e)


def _barrier_gradient_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float,
                           kappa: float) -> np.ndarray:
    """Gradient (3n,) of barrier_energy w.r.t. the flattened positions."""
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return np.zeros(x.size)
    active, bstart = _layout(x, ps, float(dhat))
    _, G, _, _, _ = _pair_terms_all(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat), active, bstart, False, False)
    return float(kappa) * _scatter_gradient(G, ps.ids, active, x.shape[0])


def _barrier_terms(x, cands, mesh, dhat, kappa, project_psd):
    x, ps = _prep(x, cands, mesh)
    if len(ps) == 0:
        return 0.0, np.zeros(x.size), (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    active, bstart = _layout(x, ps, float(dhat))
    E, G, bi, bj, bval = _pair_terms_all(x, ps.ids, ps.is_ee, ps.off, ps.epsx, float(dhat), active, bstart, True,
                                         bool(project_psd))
    rows, cols, vals = sum_blocks(bi, bj, bval, x.shape[0])
    k = float(kappa)
    return k * float(E.sum()), k * _scatter_gradient(G, ps.ids, active, x.shape[0]), (rows, cols, k * vals)


def _barrier_hessian_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float, kappa: float,
                          project_psd: bool = True):
    """Hessian of barrier_energy as COO triplets (rows int32, cols int32, vals float64) in 3n-DOF
    numbering, without duplicates and sorted by row then column (scipy.sparse converts them to CSR
    in one pass). Each pair's Hessian is PSD-projected (eigenvalues clamped at 0, exactly as a
    12x12 eigen-decomposition would) when project_psd is true."""
    return _barrier_terms(x, cands, mesh, dhat, kappa, project_psd)[2]


def _barrier_derivatives_impl(x: np.ndarray, cands: Candidates, mesh: CollisionMesh, dhat: float, kappa: float,
                              project_psd: bool = True):
    """Energy, gradient (3n,) and Hessian triplets (as barrier_hessian) in one pass over the
    active pairs: what barrier_energy, barrier_gradient and barrier_hessian return at x, for a
    caller that needs all three at the same iterate."""
    return _barrier_terms(x, cands, mesh, dhat, kappa, project_psd)


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
barrier_derivatives = _threaded(_barrier_derivatives_impl)
count_active = _threaded(_count_active_impl)
min_distance = _threaded(_min_distance_impl)
contact_distance_array = _threaded(_contact_distance_array_impl)
