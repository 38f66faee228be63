"""Bending energies for cloth (hinges on interior edges) and rods (consecutive edges).

Both measure the change of a unit direction across the stencil with the smooth quantity
d = n_A - n_B (cloth: the two triangles' unit normals; |d| = 2 sin(theta/2) for dihedral angle theta)
or d = t_2 - t_1 (rods: the two edges' unit tangents), and use
    E = (k w / 2) (|d| - d_0)^2     (E = (k w / 2) |d|^2 when the rest shape is flat/straight, d_0 = 0)
which equals (k w / 2) theta^2 to leading order. Weights: cloth hinge w = 3 |e|^2 / (A_A + A_B)
(discrete shells), rod w = 1 / l_bar (l_bar = mean rest length of the two edges); k is
Material.bending_stiffness (N m for cloth, N m^2 for rods).
The Hessian is the Gauss-Newton matrix k w J^T J (or k w J^T d^ d^T J), PSD by construction and exact
at a flat/straight rest state; the second-derivative term of the unit directions is omitted.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver_server.threads import ordered_sum


@njit(cache=True, fastmath=False)
def _skew(a):
    S = np.zeros((3, 3))
    S[0, 1] = -a[2]
    S[0, 2] = a[1]
    S[1, 0] = a[2]
    S[1, 2] = -a[0]
    S[2, 0] = -a[1]
    S[2, 1] = a[0]
    return S


@njit(cache=True, fastmath=False)
def _unit_jac(n):
    ln = np.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    u = n / ln
    return u, (np.eye(3) - np.outer(u, u)) / ln


@njit(cache=True, fastmath=False)
def hinge_d(x, h):
    """d = n_A - n_B (3,) and its Jacobian (3, 12) w.r.t. the hinge's vertices (v0, v1, v2, v3):
    edge v0-v1, v2 opposite in triangle A, v3 opposite in triangle B."""
    x0, x1, x2, x3 = x[h[0]], x[h[1]], x[h[2]], x[h[3]]
    a = x1 - x0
    b = x2 - x0
    c = x3 - x0
    nA = np.cross(a, b)
    nB = np.cross(c, a)
    uA, JA = _unit_jac(nA)
    uB, JB = _unit_jac(nB)
    J = np.zeros((3, 12))
    dA1 = -_skew(b)
    dA2 = _skew(a)
    dB3 = -_skew(a)
    dB1 = _skew(c)
    blocks_A = (-(dA1 + dA2), dA1, dA2, np.zeros((3, 3)))
    blocks_B = (-(dB1 + dB3), dB1, np.zeros((3, 3)), dB3)
    for v in range(4):
        blk = JA @ blocks_A[v] - JB @ blocks_B[v]
        J[:, 3 * v:3 * v + 3] = blk
    return uA - uB, J


@njit(cache=True, fastmath=False)
def rod_d(x, s):
    """d = t_2 - t_1 (3,) and its Jacobian (3, 9) for the rod stencil (v0, v1, v2)."""
    e1 = x[s[1]] - x[s[0]]
    e2 = x[s[2]] - x[s[1]]
    t1, J1 = _unit_jac(e1)
    t2, J2 = _unit_jac(e2)
    J = np.zeros((3, 9))
    J[:, 0:3] = J1
    J[:, 3:6] = -J1 - J2
    J[:, 6:9] = J2
    return t2 - t1, J


@njit(cache=True, fastmath=False, parallel=True)
def bending_energy(kind, x, stencils, kw, d0):
    """Total bending energy (J). kind 0: cloth hinges (S, 4); kind 1: rod stencils (S, 3).
    kw = k * w per stencil, d0 = rest |d|."""
    out = np.empty(stencils.shape[0])
    for i in prange(stencils.shape[0]):
        s = stencils[i]
        if kind == 0:
            d0_, d1_, d2_ = _hinge_d_only(x, s[0], s[1], s[2], s[3])
        else:
            d0_, d1_, d2_ = _rod_d_only(x, s[0], s[1], s[2])
        nd = np.sqrt(d0_ * d0_ + d1_ * d1_ + d2_ * d2_)
        out[i] = 0.5 * kw[i] * (nd - d0[i]) ** 2
    return ordered_sum(out)


@njit(cache=True, fastmath=False, inline="always")
def _unit3(a0, a1, a2):
    ln = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    return a0 / ln, a1 / ln, a2 / ln


@njit(cache=True, fastmath=False)
def _hinge_d_only(x, i0, i1, i2, i3):
    """d = n_A - n_B of hinge_d without its Jacobian (energy only, no allocation)."""
    a0, a1, a2 = x[i1, 0] - x[i0, 0], x[i1, 1] - x[i0, 1], x[i1, 2] - x[i0, 2]
    b0, b1, b2 = x[i2, 0] - x[i0, 0], x[i2, 1] - x[i0, 1], x[i2, 2] - x[i0, 2]
    c0, c1, c2 = x[i3, 0] - x[i0, 0], x[i3, 1] - x[i0, 1], x[i3, 2] - x[i0, 2]
    nA0, nA1, nA2 = _unit3(a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0)
    nB0, nB1, nB2 = _unit3(c1 * a2 - c2 * a1, c2 * a0 - c0 * a2, c0 * a1 - c1 * a0)
    return nA0 - nB0, nA1 - nB1, nA2 - nB2


@njit(cache=True, fastmath=False)
def _rod_d_only(x, i0, i1, i2):
    """d = t_2 - t_1 of rod_d without its Jacobian."""
    t10, t11, t12 = _unit3(x[i1, 0] - x[i0, 0], x[i1, 1] - x[i0, 1], x[i1, 2] - x[i0, 2])
    t20, t21, t22 = _unit3(x[i2, 0] - x[i1, 0], x[i2, 1] - x[i1, 1], x[i2, 2] - x[i1, 2])
    return t20 - t10, t21 - t11, t22 - t12


@njit(cache=True, fastmath=False)
def _proj_skew(u, inv_len, v, sign, J, col, acc):
    """J[:, col:col+3] (+)= sign * P skew(v), P = (I - u u^T) * inv_len (3x3 projector of a unit
    normal's derivative); skew(v) w = v x w. acc=False overwrites, acc=True adds."""
    for k in range(3):
        # column k of skew(v) is v x e_k: (0, v2, -v1), (-v2, 0, v0), (v1, -v0, 0)
        if k == 0:
            w0, w1, w2 = 0.0, v[2], -v[1]
        elif k == 1:
            w0, w1, w2 = -v[2], 0.0, v[0]
        else:
            w0, w1, w2 = v[1], -v[0], 0.0
        ud = u[0] * w0 + u[1] * w1 + u[2] * w2
        c0 = sign * (w0 - u[0] * ud) * inv_len
        c1 = sign * (w1 - u[1] * ud) * inv_len
        c2 = sign * (w2 - u[2] * ud) * inv_len
        if acc:
            J[0, col + k] += c0
            J[1, col + k] += c1
            J[2, col + k] += c2
        else:
            J[0, col + k] = c0
            J[1, col + k] = c1
            J[2, col + k] = c2


@njit(cache=True, fastmath=False)
def hinge_direction_jacobian(x, h, J, a, b, c, uA, uB):
    """hinge_d without temporaries: fills J (3, 12) and returns d = n_A - n_B as a 3-tuple.
    a, b, c, uA, uB are (3,) scratch vectors."""
    for k in range(3):
        a[k] = x[h[1], k] - x[h[0], k]
        b[k] = x[h[2], k] - x[h[0], k]
        c[k] = x[h[3], k] - x[h[0], k]
    uA[0] = a[1] * b[2] - a[2] * b[1]
    uA[1] = a[2] * b[0] - a[0] * b[2]
    uA[2] = a[0] * b[1] - a[1] * b[0]
    uB[0] = c[1] * a[2] - c[2] * a[1]
    uB[1] = c[2] * a[0] - c[0] * a[2]
    uB[2] = c[0] * a[1] - c[1] * a[0]
    lA = np.sqrt(uA[0] * uA[0] + uA[1] * uA[1] + uA[2] * uA[2])
    lB = np.sqrt(uB[0] * uB[0] + uB[1] * uB[1] + uB[2] * uB[2])
    for k in range(3):
        uA[k] /= lA
        uB[k] /= lB
    # d nA / d x1 = -skew(b), d nA / d x2 = skew(a); d nB / d x1 = skew(c), d nB / d x3 = -skew(a)
    _proj_skew(uA, 1.0 / lA, b, -1.0, J, 3, False)
    _proj_skew(uB, 1.0 / lB, c, -1.0, J, 3, True)
    _proj_skew(uA, 1.0 / lA, a, 1.0, J, 6, False)
    _proj_skew(uB, 1.0 / lB, a, 1.0, J, 9, False)
    for r in range(3):
        for k in range(3):
            J[r, k] = -(J[r, 3 + k] + J[r, 6 + k] + J[r, 9 + k])
    return uA[0] - uB[0], uA[1] - uB[1], uA[2] - uB[2]


@njit(cache=True, fastmath=False)
def hinge_residual(kw, d0, dv, nd, r):
    """r = dE/dd (3,) for E = kw/2 (|d| - d0)^2 (or kw/2 |d|^2 when flat); False if undefined."""
    if d0 > 1e-9:
        if nd < 1e-14:
            return False
        f = kw * (nd - d0) / nd
    else:
        f = kw
    for k in range(3):
        r[k] = f * dv[k]
    return True


@njit(cache=True, fastmath=False, parallel=True)
def bending_gradient_elems(kind, x, stencils, kw, d0):
    """Per-stencil gradients (S, 3k)."""
    m = 3 * stencils.shape[1]
    S = stencils.shape[0]
    out = np.zeros((S, m))
    nch = max(1, min(S, 64))
    for ch in prange(nch):
        J = np.empty((3, m))
        a = np.empty(3); b = np.empty(3); c = np.empty(3); uA = np.empty(3); uB = np.empty(3)
        dv = np.empty(3); r = np.empty(3)
        for i in range(ch * S // nch, (ch + 1) * S // nch):
            if kind == 0:
                dv[0], dv[1], dv[2] = hinge_direction_jacobian(x, stencils[i], J, a, b, c, uA, uB)
            else:
                d, Jr = rod_d(x, stencils[i])
                dv[:] = d
                J[:, :] = Jr
            nd = np.sqrt(dv[0] * dv[0] + dv[1] * dv[1] + dv[2] * dv[2])
            if not hinge_residual(kw[i], d0[i], dv, nd, r):
                continue
            for p in range(m):
                out[i, p] = J[0, p] * r[0] + J[1, p] * r[1] + J[2, p] * r[2]
    return out


@njit(cache=True, fastmath=False, parallel=True)
def bending_hessian_elems(kind, x, stencils, kw, d0):
    """Per-stencil Gauss-Newton Hessians (S, 3k, 3k), PSD: kw J^T J (flat rest) or
    kw J^T d^ d^T J (curved rest)."""
    m = 3 * stencils.shape[1]
    S = stencils.shape[0]
    out = np.zeros((S, m, m))
    nch = max(1, min(S, 64))
    for ch in prange(nch):
        J = np.empty((3, m))
        a = np.empty(3); b = np.empty(3); c = np.empty(3); uA = np.empty(3); uB = np.empty(3)
        dv = np.empty(3); g = np.empty(m)
        for i in range(ch * S // nch, (ch + 1) * S // nch):
            if kind == 0:
                dv[0], dv[1], dv[2] = hinge_direction_jacobian(x, stencils[i], J, a, b, c, uA, uB)
            else:
                d, Jr = rod_d(x, stencils[i])
                dv[:] = d
                J[:, :] = Jr
            k = kw[i]
            if d0[i] > 1e-9:
                nd = np.sqrt(dv[0] * dv[0] + dv[1] * dv[1] + dv[2] * dv[2])
                if nd < 1e-14:
                    continue
                for p in range(m):
                    g[p] = (J[0, p] * dv[0] + J[1, p] * dv[1] + J[2, p] * dv[2]) / nd
                for p in range(m):
                    for q in range(p, m):
                        v = k * g[p] * g[q]
                        out[i, p, q] = v
                        out[i, q, p] = v
            else:
                for p in range(m):
                    for q in range(p, m):
                        v = k * (J[0, p] * J[0, q] + J[1, p] * J[1, q] + J[2, p] * J[2, q])
                        out[i, p, q] = v
                        out[i, q, p] = v
    return out


def hinges(triangles: np.ndarray) -> np.ndarray:
    """Interior-edge hinges (h, 4) int32: (v0, v1, opposite in tri A, opposite in tri B) for every edge
    shared by exactly two triangles."""
    t = triangles
    e = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
    opp = np.concatenate([t[:, 2], t[:, 0], t[:, 1]])
    key = np.sort(e, axis=1)
    order = np.lexsort((key[:, 1], key[:, 0]))
    ks = key[order]
    same = (ks[1:] == ks[:-1]).all(axis=1)
    i = np.nonzero(same)[0]
    # exclude edges used more than twice
    if len(i):
        triple = np.zeros(len(ks), bool)
        triple[1:-1] = same[1:] & same[:-1]
        ok = ~(triple[i] | triple[i + 1])
        i = i[ok]
    a, b = order[i], order[i + 1]
    return np.stack([e[a, 0], e[a, 1], opp[a], opp[b]], axis=1).astype(np.int32)


def rod_stencils(edges: np.ndarray, n_verts: int) -> np.ndarray:
    """(s, 3) int32 triples (v0, v1, v2) for every vertex v1 with exactly two incident edges."""
    deg = np.bincount(edges.ravel(), minlength=n_verts)
    out = []
    inc = [[] for _ in range(n_verts)]
    for a, b in edges:
        inc[a].append(b)
        inc[b].append(a)
    for v in np.nonzero(deg == 2)[0]:
        out.append((inc[v][0], v, inc[v][1]))
    return np.array(out, np.int32).reshape(-1, 3)
