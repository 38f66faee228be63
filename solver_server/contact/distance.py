"""Unsigned squared distances between contact primitives, with exact gradients and Hessians.

Book: "3D Frictional Self-Contact" (point-triangle and edge-edge distances, Def. 24.1.1-2) and
"Distance Barrier" (squared distances, Remark 21.2.1). Everything is in metres (squared
distances in m^2).

A contact pair always has four vertices in fixed *slots*: point-triangle (p, t0, t1, t2) and
edge-edge (a0, a1, b0, b1). The closest-feature classification turns a pair into a *stencil*
(kind, i0, i1, i2, i3) over those slots:

* KIND_PP (i0, i1):          r = x_i0 - x_i1
* KIND_PE (i0; i1, i2):      r = x_i0 - x_i1 - b (x_i2 - x_i1),            point-line
* KIND_PT (i0; i1, i2, i3):  r = x_i0 - x_i1 - b1 (x_i2 - x_i1) - b2 (x_i3 - x_i1),  point-plane
* KIND_EE (i0, i1; i2, i3):  r = x_i0 + a (x_i1 - x_i0) - x_i2 - b (x_i3 - x_i2),    line-line

and the squared distance is D = |r|^2 at the optimal parameters. Values use the closed forms
(cross products, as IPC Toolkit does) for accuracy. Derivatives use the envelope theorem on
f(x, beta) = |r(x, beta)|^2: grad D = f_x, and
Hess D = f_xx - f_xb f_bb^{-1} f_bx, which is exact because r is bilinear in (x, beta).
"""
import numpy as np
from numba import njit, prange

from .vec3 import sub, dot, cross, row

KIND_PP = 0
KIND_PE = 1
KIND_PT = 2
KIND_EE = 3

# Edges are treated as parallel (closest point on the boundary of the parameter square)
# when |ea x eb|^2 <= PARALLEL_EPS |ea|^2 |eb|^2, the threshold IPC Toolkit uses.
PARALLEL_EPS = 1.0e-20


@njit(cache=True, fastmath=False)
def point_point_dist2(p, q):
    d = sub(p, q)
    return dot(d, d)


@njit(cache=True, fastmath=False)
def point_line_dist2(p, e0, e1):
    """Squared distance from p to the infinite line through e0, e1 (e0 != e1)."""
    e = sub(e1, e0)
    n = cross(sub(e0, p), sub(e1, p))
    return dot(n, n) / dot(e, e)


@njit(cache=True, fastmath=False)
def point_plane_dist2(p, t0, t1, t2):
    """Squared distance from p to the plane of a non-degenerate triangle."""
    n = cross(sub(t1, t0), sub(t2, t0))
    s = dot(sub(p, t0), n)
    return s * s / dot(n, n)


@njit(cache=True, fastmath=False)
def line_line_dist2(a0, a1, b0, b1):
    """Squared distance between two non-parallel infinite lines."""
    n = cross(sub(a1, a0), sub(b1, b0))
    s = dot(sub(b0, a0), n)
    return s * s / dot(n, n)


@njit(cache=True, fastmath=False)
def _point_edge_case(p, e0, e1):
    """Closest feature of segment e0-e1 to p: 0 -> e0, 1 -> e1, 2 -> interior. Returns (case, D)."""
    e = sub(e1, e0)
    ee = dot(e, e)
    if ee <= 0.0:
        return 0, point_point_dist2(p, e0)
    t = dot(sub(p, e0), e) / ee
    if t <= 0.0:
        return 0, point_point_dist2(p, e0)
    if t >= 1.0:
        return 1, point_point_dist2(p, e1)
    return 2, point_line_dist2(p, e0, e1)


@njit(cache=True, fastmath=False)
def point_edge_stencil(p, e0, e1):
    """Stencil over slots (p=0, e0=1, e1=2) and squared distance of a point-segment pair."""
    case, d = _point_edge_case(p, e0, e1)
    if case == 0:
        return KIND_PP, 0, 1, 0, 0, d
    if case == 1:
        return KIND_PP, 0, 2, 0, 0, d
    return KIND_PE, 0, 1, 2, 0, d


@njit(cache=True, fastmath=False)
def point_triangle_stencil(p, t0, t1, t2):
    """Closest-feature stencil over slots (p=0, t0=1, t1=2, t2=3) and the squared distance.

    Interior projection -> KIND_PT; otherwise the minimum over the three edges (each PE or PP).
    """
    s1 = sub(t1, t0)
    s2 = sub(t2, t0)
    w = sub(p, t0)
    n = cross(s1, s2)
    nn = dot(n, n)
    # barycentrics of the projection from cross products (no a*c - b^2 cancellation)
    if nn > PARALLEL_EPS * dot(s1, s1) * dot(s2, s2) and nn > 0.0:
        b1 = dot(cross(w, s2), n) / nn
        b2 = dot(cross(s1, w), n) / nn
        if b1 >= 0.0 and b2 >= 0.0 and b1 + b2 <= 1.0:
            return KIND_PT, 0, 1, 2, 3, point_plane_dist2(p, t0, t1, t2)
    # boundary: edges (1,2), (2,3), (3,1)
    best_kind = KIND_PP
    best = (0, 1, 0, 0)
    best_d = np.inf
    for k in range(3):
        if k == 0:
            ja, jb, qa, qb = 1, 2, t0, t1
        elif k == 1:
            ja, jb, qa, qb = 2, 3, t1, t2
        else:
            ja, jb, qa, qb = 3, 1, t2, t0
        case, d = _point_edge_case(p, qa, qb)
        if d < best_d:
            best_d = d
            if case == 0:
                best_kind = KIND_PP
                best = (0, ja, 0, 0)
            elif case == 1:
                best_kind = KIND_PP
                best = (0, jb, 0, 0)
            else:
                best_kind = KIND_PE
                best = (0, ja, jb, 0)
    return best_kind, best[0], best[1], best[2], best[3], best_d


@njit(cache=True, fastmath=False)
def edge_edge_stencil(a0, a1, b0, b1):
    """Closest-feature stencil over slots (a0=0, a1=1, b0=2, b1=3) and the squared distance.

    Interior closest points on both (non-parallel) segments -> KIND_EE; otherwise the minimum over
    the four point-segment sub-pairs (the minimum of a convex function over the parameter square
    lies on its boundary when the unconstrained minimiser is outside).
    """
    ea = sub(a1, a0)
    eb = sub(b1, b0)
    n = cross(ea, eb)
    nn = dot(n, n)
    # parallel test and line parameters from the cross product: a*c - b^2 would cancel
    if nn > PARALLEL_EPS * dot(ea, ea) * dot(eb, eb) and nn > 0.0:
        wb = sub(b0, a0)
        sa = dot(cross(wb, eb), n) / nn
        sb = dot(cross(wb, ea), n) / nn
        if 0.0 < sa < 1.0 and 0.0 < sb < 1.0:
            return KIND_EE, 0, 1, 2, 3, line_line_dist2(a0, a1, b0, b1)
    best_kind = KIND_PP
    best = (0, 2, 0, 0)
    best_d = np.inf
    for k in range(4):
        if k == 0:
            ip, ja, jb, q, qa, qb = 0, 2, 3, a0, b0, b1
        elif k == 1:
            ip, ja, jb, q, qa, qb = 1, 2, 3, a1, b0, b1
        elif k == 2:
            ip, ja, jb, q, qa, qb = 2, 0, 1, b0, a0, a1
        else:
            ip, ja, jb, q, qa, qb = 3, 0, 1, b1, a0, a1
        case, dd = _point_edge_case(q, qa, qb)
        if dd < best_d:
            best_d = dd
            if case == 0:
                best_kind = KIND_PP
                best = (ip, ja, 0, 0)
            elif case == 1:
                best_kind = KIND_PP
                best = (ip, jb, 0, 0)
            else:
                best_kind = KIND_PE
                best = (ip, ja, jb, 0)
    return best_kind, best[0], best[1], best[2], best[3], best_d


@njit(cache=True, fastmath=False)
def stencil_coefficients_into(kind, i0, i1, i2, i3, c0, dc):
    """r = sum_i (c0_i + sum_j beta_j dc_ji) x_i over the 4 slots: writes c0 (4,) and dc (2, 4)
    (no allocation, for per-vertex loops) and returns n_params."""
    c0[:] = 0.0
    dc[:, :] = 0.0
    if kind == KIND_PP:
        c0[i0] += 1.0
        c0[i1] -= 1.0
        return 0
    if kind == KIND_PE:
        c0[i0] += 1.0
        c0[i1] -= 1.0
        dc[0, i1] += 1.0
        dc[0, i2] -= 1.0
        return 1
    if kind == KIND_PT:
        c0[i0] += 1.0
        c0[i1] -= 1.0
        dc[0, i1] += 1.0
        dc[0, i2] -= 1.0
        dc[1, i1] += 1.0
        dc[1, i3] -= 1.0
        return 2
    c0[i0] += 1.0
    c0[i2] -= 1.0
    dc[0, i0] -= 1.0
    dc[0, i1] += 1.0
    dc[1, i2] += 1.0
    dc[1, i3] -= 1.0
    return 2


@njit(cache=True, fastmath=False)
def gram_det(s):
    """|s_0|^2 |s_1|^2 - (s_0 . s_1)^2 (m^4) of the parameter directions s (2, 3), as |s_0 x s_1|^2: the
    difference of products cancels to 0 (a division by zero) for edges parallel to round-off, which the
    stencil's cross-product test still calls interior (aligned bricks of a wall, issue 19)."""
    cx = s[0, 1] * s[1, 2] - s[0, 2] * s[1, 1]
    cy = s[0, 2] * s[1, 0] - s[0, 0] * s[1, 2]
    cz = s[0, 0] * s[1, 1] - s[0, 1] * s[1, 0]
    return cx * cx + cy * cy + cz * cz


@njit(cache=True, fastmath=False)
def stencil_closest_into(X, kind, i0, i1, i2, i3, c, r, dc, s):
    """Closest-point coefficients c (4,) (r = sum c_i x_i), r (3,), the coefficient directions
    dc (2, 4) and the directions s (2, 3) for the stencil at the 12-vector X of slot positions,
    written into the given arrays (no allocation); returns n_params."""
    npar = stencil_coefficients_into(kind, i0, i1, i2, i3, c, dc)
    r0x = r0y = r0z = 0.0
    for a in range(3):
        s[0, a] = 0.0
        s[1, a] = 0.0
    for i in range(4):
        r0x += c[i] * X[3 * i]
        r0y += c[i] * X[3 * i + 1]
        r0z += c[i] * X[3 * i + 2]
        for a in range(3):
            s[0, a] += dc[0, i] * X[3 * i + a]
            s[1, a] += dc[1, i] * X[3 * i + a]
    beta0 = 0.0
    beta1 = 0.0
    if npar == 1:
        g00 = s[0, 0] * s[0, 0] + s[0, 1] * s[0, 1] + s[0, 2] * s[0, 2]
        beta0 = -(s[0, 0] * r0x + s[0, 1] * r0y + s[0, 2] * r0z) / g00
    elif npar == 2:
        g00 = s[0, 0] * s[0, 0] + s[0, 1] * s[0, 1] + s[0, 2] * s[0, 2]
        g01 = s[0, 0] * s[1, 0] + s[0, 1] * s[1, 1] + s[0, 2] * s[1, 2]
        g11 = s[1, 0] * s[1, 0] + s[1, 1] * s[1, 1] + s[1, 2] * s[1, 2]
        q0 = -(s[0, 0] * r0x + s[0, 1] * r0y + s[0, 2] * r0z)
        q1 = -(s[1, 0] * r0x + s[1, 1] * r0y + s[1, 2] * r0z)
        det = gram_det(s)   # g00 g11 - g01^2 without its cancellation (nearly parallel edges)
        beta0 = (g11 * q0 - g01 * q1) / det
        beta1 = (g00 * q1 - g01 * q0) / det
    for i in range(4):
        c[i] += beta0 * dc[0, i] + beta1 * dc[1, i]
    r[0] = 0.0
    r[1] = 0.0
    r[2] = 0.0
    for i in range(4):
        for a in range(3):
            r[a] += c[i] * X[3 * i + a]
    return npar


@njit(cache=True, fastmath=False)
def stencil_closest(X, kind, i0, i1, i2, i3):
    """Closest-point coefficients c (4,) (r = sum c_i x_i), r (3,), the directions s (2, 3) and
    n_params for the stencil at the 12-vector X of slot positions."""
    c = np.zeros(4)
    r = np.zeros(3)
    dc = np.zeros((2, 4))
    s = np.zeros((2, 3))
    npar = stencil_closest_into(X, kind, i0, i1, i2, i3, c, r, dc, s)
    return c, r, dc, s, npar


@njit(cache=True, fastmath=False)
def stencil_grad_hess(X, kind, i0, i1, i2, i3, g, H, want_hess):
    """Gradient (12,) and, if want_hess, Hessian (12, 12) of the squared distance of a stencil,
    written into g and H."""
    c, r, dc, s, npar = stencil_closest(X, kind, i0, i1, i2, i3)
    for i in range(4):
        for a in range(3):
            g[3 * i + a] = 2.0 * c[i] * r[a]
    if not want_hess:
        return
    H[:, :] = 0.0
    for i in range(4):
        for k in range(4):
            v = 2.0 * c[i] * c[k]
            for a in range(3):
                H[3 * i + a, 3 * k + a] = v
    if npar == 0:
        return
    F = np.zeros((12, 2))
    for j in range(npar):
        for i in range(4):
            for a in range(3):
                F[3 * i + a, j] = 2.0 * (dc[j, i] * r[a] + c[i] * s[j, a])
    # f_bb = 2 G
    if npar == 1:
        inv00 = 1.0 / (2.0 * (s[0, 0] ** 2 + s[0, 1] ** 2 + s[0, 2] ** 2))
        for p in range(12):
            for q in range(12):
                H[p, q] -= F[p, 0] * inv00 * F[q, 0]
    else:
        g00 = 2.0 * (s[0, 0] * s[0, 0] + s[0, 1] * s[0, 1] + s[0, 2] * s[0, 2])
        g01 = 2.0 * (s[0, 0] * s[1, 0] + s[0, 1] * s[1, 1] + s[0, 2] * s[1, 2])
        g11 = 2.0 * (s[1, 0] * s[1, 0] + s[1, 1] * s[1, 1] + s[1, 2] * s[1, 2])
        det = 4.0 * gram_det(s)   # g00 g11 - g01^2 (g = 2 s.s) without the cancellation
        i00 = g11 / det
        i01 = -g01 / det
        i11 = g00 / det
        for p in range(12):
            u0 = F[p, 0] * i00 + F[p, 1] * i01
            u1 = F[p, 0] * i01 + F[p, 1] * i11
            for q in range(12):
                H[p, q] -= u0 * F[q, 0] + u1 * F[q, 1]


@njit(cache=True, fastmath=False)
def _slot(X, i):
    return (X[3 * i], X[3 * i + 1], X[3 * i + 2])


@njit(cache=True, fastmath=False)
def point_triangle_dist2_grad_hess(X):
    """Squared point-triangle distance of X = [p, t0, t1, t2] (12,), its gradient and Hessian."""
    kind, i0, i1, i2, i3, d = point_triangle_stencil(_slot(X, 0), _slot(X, 1), _slot(X, 2), _slot(X, 3))
    g = np.zeros(12)
    H = np.zeros((12, 12))
    stencil_grad_hess(X, kind, i0, i1, i2, i3, g, H, True)
    return d, g, H


@njit(cache=True, fastmath=False)
def edge_edge_dist2_grad_hess(X):
    """Squared edge-edge distance of X = [a0, a1, b0, b1] (12,), its gradient and Hessian."""
    kind, i0, i1, i2, i3, d = edge_edge_stencil(_slot(X, 0), _slot(X, 1), _slot(X, 2), _slot(X, 3))
    g = np.zeros(12)
    H = np.zeros((12, 12))
    stencil_grad_hess(X, kind, i0, i1, i2, i3, g, H, True)
    return d, g, H


@njit(cache=True, fastmath=False)
def point_edge_dist2_grad_hess(X):
    """Squared point-segment distance of X = [p, e0, e1] (9,), gradient (9,) and Hessian (9, 9)."""
    X12 = np.zeros(12)
    X12[:9] = X
    kind, i0, i1, i2, i3, d = point_edge_stencil(_slot(X, 0), _slot(X, 1), _slot(X, 2))
    g = np.zeros(12)
    H = np.zeros((12, 12))
    stencil_grad_hess(X12, kind, i0, i1, i2, i3, g, H, True)
    return d, g[:9].copy(), H[:9, :9].copy()


@njit(cache=True, fastmath=False)
def point_point_dist2_grad_hess(X):
    """Squared point-point distance of X = [p, q] (6,), gradient (6,) and Hessian (6, 6)."""
    X12 = np.zeros(12)
    X12[:6] = X
    g = np.zeros(12)
    H = np.zeros((12, 12))
    stencil_grad_hess(X12, KIND_PP, 0, 1, 0, 0, g, H, True)
    return point_point_dist2(_slot(X, 0), _slot(X, 1)), g[:6].copy(), H[:6, :6].copy()


@njit(cache=True, fastmath=False, parallel=True)
def point_triangle_dist2_batch(p, t0, t1, t2):
    """Squared point-triangle distances of m queries, each argument (m, 3). Returns (m,)."""
    m = p.shape[0]
    out = np.empty(m)
    for k in prange(m):
        out[k] = point_triangle_stencil(row(p, k), row(t0, k), row(t1, k), row(t2, k))[5]
    return out


@njit(cache=True, fastmath=False, parallel=True)
def edge_edge_dist2_batch(a0, a1, b0, b1):
    """Squared segment-segment distances of m queries, each argument (m, 3). Returns (m,)."""
    m = a0.shape[0]
    out = np.empty(m)
    for k in prange(m):
        out[k] = edge_edge_stencil(row(a0, k), row(a1, k), row(b0, k), row(b1, k))[5]
    return out
