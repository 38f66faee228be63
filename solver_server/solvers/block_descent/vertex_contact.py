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

import numpy as np
from numba import njit

from solver_server.contact.barrier import barrier_first_derivative, barrier_second_derivative
from solver_server.contact.barrier_pair import cross_norm2_value, pair_stencil_local
from solver_server.contact.distance import stencil_closest_into
from solver_server.contact.friction import tangent_displacement, f1_over_y
from solver_server.contact.mollifier import mollifier


@njit(cache=True, fastmath=False)
def contact_scratch():
    """Scratch arrays of barrier_vertex (one set per thread's range of vertices)."""
    return np.empty(12), np.empty(4), np.empty(3), np.empty((2, 4)), np.empty((2, 3))


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
    """Add pair k's barrier gradient / PSD block for the vertex in ``slot``. SC = contact_scratch():
    preallocated (X (12,), c (4,), r (3,), dc (2, 4), s (2, 3)), so the sweep's inner loop never
    allocates. Returns the pair's contact distance s (m)."""
    X, c, r, dc, sv = SC
    for i in range(4):
        v = ids[k, i]
        for a in range(3):
            X[3 * i + a] = x[v, a]
    st = pair_stencil_local(X, is_ee[k])
    d = math.sqrt(st[5])
    s = d - off[k]
    if s >= dhat or s <= 0.0 or d == 0.0:
        return s
    stencil_closest_into(X, st[0], st[1], st[2], st[3], st[4], c, r, dc, sv)
    m = 1.0
    if is_ee[k]:
        m = mollifier(cross_norm2_value(X), epsx[k])[0]
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
