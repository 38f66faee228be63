"""Per-vertex contact terms for block descent: the shared IPC barrier and lagged friction.

Barrier (ipc/contact/barrier.py, same kappa, dhat and offsets as the Newton solver): for a pair with
contact distance s = d - o, closest-point coefficients c (r = sum_i c_i x_i, d = |r|) and unit
normal n = r / d, the envelope theorem gives dd/dx_a = c_a n, hence the exact gradient
kappa m b'(s) c_a n (m the edge-edge mollifier value). The vertex's 3x3 block keeps the PSD part
kappa m b''(s) c_a^2 n n^T; the curvature term kappa m b'(s) c_a^2 (I - n n^T) / d is negative
semi-definite (b' < 0) and dropped, as is the mollifier's gradient (it only acts on nearly parallel
edges, where the point-triangle pairs carry the contact).

Friction (ipc/contact/friction.py, lagged): frozen normal force, tangent basis T and coefficients
c; u = T^T sum_i c_i (x_i - x_prev_i); gradient mu lambda f1(|u|)/|u| c_a T u, block
mu lambda f1(|u|)/|u| c_a^2 T T^T (PSD).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from solver_server.contact.barrier import barrier_first_derivative, barrier_second_derivative
from solver_server.contact.barrier_pair import cross_norm2_value, pair_stencil_local
from solver_server.contact.distance import stencil_closest_into
from solver_server.contact.friction import tangent_displacement, f1_over_y
from solver_server.contact.mollifier import mollifier
from .incidence import incidence


class ContactPack(NamedTuple):
    """The barrier pairs of one contact detection as the sweep kernels read them (the CT argument).

    ids      (K, 4) int32      the pairs' vertices (point-triangle: p, t0, t1, t2; edge-edge: a0, a1, b0, b1)
    is_ee    (K,) uint8        1 for edge-edge pairs
    off      (K,) float64      m, summed contact offsets (s = d - off)
    epsx     (K,) float64      m^4, edge-edge mollifier thresholds
    start    (n + 1,) int64    vertex -> pair CSR start (incidence of ids)
    pair     (4 K,) int32      the pairs of each vertex
    slot     (4 K,) int32      the vertex's slot (0..3) in each of them
    dhat     float             m, barrier activation distance
    kappa    float             J/m^2, barrier stiffness (the barrier b(s) is in m^2)
    s0       (K,) float64      m, contact distances at the detection point
    centre   (n, 3) float64    m, the detection point
    D        (n,) float64      m, each vertex's move |x_v - centre_v|, kept current by the kernels
                               (moves_from_centre); with s0 it lets a vertex skip a pair that cannot
                               be active yet (may_be_active)
    """

    ids: np.ndarray
    is_ee: np.ndarray
    off: np.ndarray
    epsx: np.ndarray
    start: np.ndarray
    pair: np.ndarray
    slot: np.ndarray
    dhat: float
    kappa: float
    s0: np.ndarray
    centre: np.ndarray
    D: np.ndarray


def contact_pack(det, n: int, dhat: float, kappa: float) -> ContactPack:
    """The ContactPack of a detection (bounds.Detection) on n vertices."""
    return ContactPack(det.ids, det.is_ee, det.off, det.epsx, *incidence(det.ids, n), dhat, kappa, det.s0,
                       det.center, np.zeros(n))


def no_contact(n: int, dhat: float, kappa: float) -> ContactPack:
    """A ContactPack without pairs on n vertices."""
    return ContactPack(np.zeros((0, 4), np.int32), np.zeros(0, np.uint8), np.zeros(0), np.zeros(0),
                       np.zeros(n + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), dhat, kappa,
                       np.zeros(0), np.zeros((n, 3)), np.zeros(n))


class FrictionPack(NamedTuple):
    """The lagged friction pairs of a step (the FR argument), frozen at the step's start.

    ids         (K, 4) int32      the pairs' vertices
    coef        (K, 4) float64    closest-point coefficients c_i of the four slots
    T           (K, 3, 2) float64 tangent bases
    mu_lambda   (K,) float64      N, friction coefficient x lagged normal force
    start       (n + 1,) int64    vertex -> pair CSR start (incidence of ids)
    pair        (4 K,) int32      the pairs of each vertex
    slot        (4 K,) int32      the vertex's slot (0..3) in each of them
    x_ref       (n, 3) float64    m, where slip is measured from (x^n; BDF-2: x_hat)
    eps         float             m, the smoothing length eps_v h of f0 / f1
    """

    ids: np.ndarray
    coef: np.ndarray
    T: np.ndarray
    mu_lambda: np.ndarray
    start: np.ndarray
    pair: np.ndarray
    slot: np.ndarray
    x_ref: np.ndarray
    eps: float


def friction_pack(fs, n: int, x_ref: np.ndarray, eps: float) -> FrictionPack:
    """The FrictionPack of a friction set (contact/friction.FrictionSet, or None: no pairs) on n vertices."""
    if fs is None or len(fs) == 0:
        return FrictionPack(np.zeros((0, 4), np.int32), np.zeros((0, 4)), np.zeros((0, 3, 2)), np.zeros(0),
                            np.zeros(n + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), x_ref, eps)
    ids = np.ascontiguousarray(fs.ids, np.int32)
    return FrictionPack(ids, np.ascontiguousarray(fs.coef), np.ascontiguousarray(fs.T),
                        np.ascontiguousarray(fs.mu_lambda), *incidence(ids, n), x_ref, eps)


class ContactScratch(NamedTuple):
    """Work arrays of barrier_vertex (contact_scratch: one set per thread's range of vertices).

    X     (12,) float64    m, the pair's four slot positions
    coef  (4,) float64     closest-point coefficients
    diff  (3,) float64     m, closest-point difference r = sum_i c_i x_i
    dirs  (2, 4) float64   parameter directions of the closest-feature stencil
    span  (2, 3) float64   m, s_j = sum_i dc_j,i x_i
    """

    X: np.ndarray
    coef: np.ndarray
    diff: np.ndarray
    dirs: np.ndarray
    span: np.ndarray


@njit(cache=True, fastmath=False)
def contact_scratch():
    """Scratch arrays of barrier_vertex (one set per thread's range of vertices): a ContactScratch."""
    return ContactScratch(np.empty(12), np.empty(4), np.empty(3), np.empty((2, 4)), np.empty((2, 3)))


@njit(cache=True, fastmath=False, inline="always")
def may_be_active(D, ids, is_ee, s0, k, dhat):
    """False when pair k certainly has contact distance >= dhat at x (no barrier term): each side's
    convex hull lies within the largest move of its vertices since the detection point (Hausdorff
    distance), so s(x) >= s0_k - max_A D_i - max_B D_j, with D (n,) the vertices' move lengths
    |x_i - centre_i| (m), kept current by the caller (moves_from_centre). Four loads instead of the
    pair's distance; most listed pairs are not in contact."""
    if is_ee[k]:
        mA = max(D[ids[k, 0]], D[ids[k, 1]])
        mB = max(D[ids[k, 2]], D[ids[k, 3]])
    else:
        mA = D[ids[k, 0]]
        mB = max(D[ids[k, 1]], D[ids[k, 2]], D[ids[k, 3]])
    return s0[k] - mA - mB < dhat


@njit(cache=True, fastmath=False)
def moves_from_centre(x, centre, verts, D):
    """D[v] = |x_v - centre_v| (m) for v in verts (all vertices when verts is empty)."""
    if verts.shape[0] == 0:
        for v in range(x.shape[0]):
            D[v] = math.sqrt((x[v, 0] - centre[v, 0]) ** 2 + (x[v, 1] - centre[v, 1]) ** 2
                             + (x[v, 2] - centre[v, 2]) ** 2)
        return
    for j in range(verts.shape[0]):
        v = verts[j]
        D[v] = math.sqrt((x[v, 0] - centre[v, 0]) ** 2 + (x[v, 1] - centre[v, 1]) ** 2 + (x[v, 2] - centre[v, 2]) ** 2)


@njit(cache=True, fastmath=False)
def barrier_vertex(x, ids, is_ee, off, epsx, k, slot, dhat, kappa, g, H, SC):
    """Add pair k's barrier gradient / PSD block for the vertex in ``slot``. SC = contact_scratch()
    (a ContactScratch), preallocated so the sweep's inner loop never allocates. Returns the pair's
    contact distance s (m)."""
    X, c, r, dc, sv = SC.X, SC.coef, SC.diff, SC.dirs, SC.span
    for i in range(4):
        v = ids[k, i]
        for a in range(3):
            X[3 * i + a] = x[v, a]
    kind, i0, i1, i2, i3, d2 = pair_stencil_local(X, is_ee[k])
    d = math.sqrt(d2)
    s = d - off[k]
    if s >= dhat or s <= 0.0 or d == 0.0:
        return s
    stencil_closest_into(X, kind, i0, i1, i2, i3, c, r, dc, sv)
    m = 1.0
    if is_ee[k]:
        m, m1, m2 = mollifier(cross_norm2_value(X), epsx[k])
    ca = c[slot]
    if ca == 0.0:
        return s
    w1 = kappa * m * barrier_first_derivative(s, dhat) * ca / d
    w2 = kappa * m * barrier_second_derivative(s, dhat) * ca * ca / (d * d)
    for a in range(3):
        g[a] += w1 * r[a]
        for b in range(3):
            H[a, b] += w2 * r[a] * r[b]
    return s


@njit(cache=True, fastmath=False)
def friction_vertex(x, x_prev, ids, coef, T, ml, k, slot, eps, g, H):
    """Add friction pair k's gradient and PSD block for the vertex in ``slot``; eps = eps_v h (m)."""
    u0, u1 = tangent_displacement(x, x_prev, ids, coef, T, k)
    f = ml[k] * f1_over_y(math.sqrt(u0 * u0 + u1 * u1), eps)
    ca = coef[k, slot]
    for a in range(3):
        g[a] += f * ca * (T[k, a, 0] * u0 + T[k, a, 1] * u1)
        for b in range(3):
            H[a, b] += f * ca * ca * (T[k, a, 0] * T[k, b, 0] + T[k, a, 1] * T[k, b, 1])
