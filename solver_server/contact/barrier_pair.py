"""One contact pair's barrier energy, gradient and (PSD-projected) Hessian, without heap allocation.

Same quantity as potential.pair_barrier (the readable reference, kept for tests): m(c) b(s) with
s = sqrt(D) - offset, D the squared distance of the closest-feature stencil, b the C2 barrier and
m the edge-edge mollifier (book: "Distance Barrier", "3D Frictional Self-Contact"). This version
is what the assembly kernels call tens of thousands of times per Newton iteration, so it works in
caller-owned scratch arrays and exploits the structure of the Hessian:

With r = sum_i c_i x_i the closest-point difference (c (4,) over the pair's slots), dc_j the
directions of the stencil's free parameters and n = r / |r|, the un-mollified barrier Hessian
    H = alpha HD + beta (c (x) r)(c (x) r)^T,   HD = 2 (c c^T (x) I3) - F (2G)^-1 F^T,
    F_j = 2 (dc_j (x) r + c (x) s_j)
lies in the span of the k = 3 + n_params orthonormal vectors  c/|c| (x) e_a  and  q_j (x) n
(q_j: dc_j orthonormalised against c in R^4). So H = B K B^T with a k x k matrix K (k = 3 for
point-point, 4 point-edge, 5 point-plane / line-line) computed in closed form, and the exact PSD
projection of the 12x12 H is B proj(K) B^T: a 3x3..5x5 Jacobi eigen-solve instead of 12x12.
Mollified edge-edge pairs (nearly parallel edges) depend on all 9 translation-free coordinates;
their Hessian is formed in full and projected on the 9-D complement of rigid translations.
Units: positions m, energy m^2 (the caller multiplies by kappa in J/m^2).
"""
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .barrier import barrier, barrier_first_derivative, barrier_second_derivative
from .distance import KIND_PP, KIND_PE, KIND_PT, point_triangle_stencil, edge_edge_stencil, gram_det, stencil_closest_into
from .eigen_small import jacobi_eigh, tridiagonal_ql_eigh
from .mollifier import mollifier

# orthonormal basis (4, 3) of the vectors of R^4 orthogonal to (1, 1, 1, 1): rigid translations
# of the 4 slots are exactly the kernel of every pair Hessian
_Q4 = np.array([[0.5, 0.5, 0.5], [0.5, -0.5, -0.5], [-0.5, 0.5, -0.5], [-0.5, -0.5, 0.5]])


class PairScratch(NamedTuple):
    """Work arrays of pair_terms (new_scratch: one set per thread). Outputs, read by the callers:

    grad   (12,) float64       the pair's gradient (m, unit stiffness) over its four slots (3 i + a)
    hess   (12, 12) float64    its Hessian (unit stiffness) restricted to the involved slots:
                               hess[:3 ns, :3 ns], row 3 u + a for slot slots[u]
    slots  (4,) int64          the involved slot numbers (0..3), the first ns entries

    Scratch only (their contents are meaningless to callers):
    grad_c (12,) float64       gradient of the mollifier's argument |ea x eb|^2 (m^3)
    coef   (4,) float64        closest-point coefficients c
    dirs   (2, 4) float64      parameter directions dc_j of the closest-feature stencil
    span   (2, 3) float64      s_j = sum_i dc_j,i x_i (m)
    diff   (3,) float64        closest-point difference r = sum_i c_i x_i (m)
    basis  (12, 9) float64     orthonormal basis B of the Hessian's range
    tmp    (12, 9) float64     products and Gram-Schmidt rows (rows 10, 11: eigen-solver scratch)
    small  (9, 9) float64      the reduced Hessian K = B^T H B
    eig_a  (9, 9) float64      eigen-solver work matrix (eigenvalues on the diagonal)
    eig_v  (9, 9) float64      eigenvectors
    fmat   (12, 2) float64     F_j = 2 (dc_j (x) r + c (x) s_j) of the parameter derivative
    """

    grad: np.ndarray
    grad_c: np.ndarray
    coef: np.ndarray
    dirs: np.ndarray
    span: np.ndarray
    diff: np.ndarray
    hess: np.ndarray
    basis: np.ndarray
    tmp: np.ndarray
    small: np.ndarray
    eig_a: np.ndarray
    eig_v: np.ndarray
    slots: np.ndarray
    fmat: np.ndarray


@njit(cache=True, fastmath=False)
def new_scratch():
    """Scratch arrays for pair_terms (one set per thread): a PairScratch."""
    return PairScratch(np.empty(12), np.empty(12), np.empty(4), np.empty((2, 4)), np.empty((2, 3)), np.empty(3),
                       np.empty((12, 12)), np.empty((12, 9)), np.empty((12, 9)), np.empty((9, 9)), np.empty((9, 9)),
                       np.empty((9, 9)), np.empty(4, dtype=np.int64), np.empty((12, 2)))


@njit(cache=True, fastmath=False, inline="always")
def pair_stencil_local(X, is_ee):
    a = (X[0], X[1], X[2])
    b = (X[3], X[4], X[5])
    c = (X[6], X[7], X[8])
    d = (X[9], X[10], X[11])
    if is_ee:
        return edge_edge_stencil(a, b, c, d)
    return point_triangle_stencil(a, b, c, d)


@njit(cache=True, fastmath=False)
def cross_norm2_value(X):
    """c = |ea x eb|^2 (m^4) of the edge-edge slots X = [a0, a1, b0, b1] (12,)."""
    ax = X[3] - X[0]
    ay = X[4] - X[1]
    az = X[5] - X[2]
    bx = X[9] - X[6]
    by = X[10] - X[7]
    bz = X[11] - X[8]
    cx = ay * bz - az * by
    cy = az * bx - ax * bz
    cz = ax * by - ay * bx
    return cx * cx + cy * cy + cz * cz


@njit(cache=True, fastmath=False)
def pair_energy(X, is_ee, off, epsx, dhat):
    """m b(s) of one pair at slot positions X (12,); 0 when s >= dhat, inf when s <= 0."""
    kind, i0, i1, i2, i3, d2 = pair_stencil_local(X, is_ee)
    s = math.sqrt(d2) - off
    if s >= dhat:
        return 0.0
    b = barrier(s, dhat)
    if is_ee:
        m, m1, m2 = mollifier(cross_norm2_value(X), epsx)
        return m * b
    return b


@njit(cache=True, fastmath=False)
def _cross_norm2_grad(X, gc):
    """Gradient gc (12,) of c = |ea x eb|^2 (see mollifier.cross_norm2_grad_hess)."""
    ea0 = X[3] - X[0]
    ea1 = X[4] - X[1]
    ea2 = X[5] - X[2]
    eb0 = X[9] - X[6]
    eb1 = X[10] - X[7]
    eb2 = X[11] - X[8]
    aa = ea0 * ea0 + ea1 * ea1 + ea2 * ea2
    bb = eb0 * eb0 + eb1 * eb1 + eb2 * eb2
    ab = ea0 * eb0 + ea1 * eb1 + ea2 * eb2
    ga = (2.0 * (ea0 * bb - ab * eb0), 2.0 * (ea1 * bb - ab * eb1), 2.0 * (ea2 * bb - ab * eb2))
    gb = (2.0 * (eb0 * aa - ab * ea0), 2.0 * (eb1 * aa - ab * ea1), 2.0 * (eb2 * aa - ab * ea2))
    for a in range(3):
        gc[a] = -ga[a]
        gc[3 + a] = ga[a]
        gc[6 + a] = -gb[a]
        gc[9 + a] = gb[a]


@njit(cache=True, fastmath=False)
def _add_cross_norm2_hess(X, H, w):
    """H += w * Hessian of |ea x eb|^2 (12x12)."""
    ea = (X[3] - X[0], X[4] - X[1], X[5] - X[2])
    eb = (X[9] - X[6], X[10] - X[7], X[11] - X[8])
    aa = ea[0] * ea[0] + ea[1] * ea[1] + ea[2] * ea[2]
    bb = eb[0] * eb[0] + eb[1] * eb[1] + eb[2] * eb[2]
    ab = ea[0] * eb[0] + ea[1] * eb[1] + ea[2] * eb[2]
    for a in range(3):
        for b in range(3):
            delta = 1.0 if a == b else 0.0
            haa = w * (2.0 * bb * delta - 2.0 * eb[a] * eb[b])
            hbb = w * (2.0 * aa * delta - 2.0 * ea[a] * ea[b])
            hab = w * (4.0 * ea[a] * eb[b] - 2.0 * eb[a] * ea[b] - 2.0 * ab * delta)
            for i in range(2):
                si = -1.0 if i == 0 else 1.0
                for k in range(2):
                    sk = -1.0 if k == 0 else 1.0
                    H[3 * i + a, 3 * k + b] += si * sk * haa
                    H[6 + 3 * i + a, 6 + 3 * k + b] += si * sk * hbb
                    H[3 * i + a, 6 + 3 * k + b] += si * sk * hab
                    H[6 + 3 * k + b, 3 * i + a] += si * sk * hab


@njit(cache=True, fastmath=False)
def _project_small(K, k, A, V, d, e, project):
    """Replace the symmetric k x k matrix K by its PSD projection (eigenvalues clamped at 0).
    Jacobi for k <= 5 (as fast, simpler), Householder + QL for the 9-D mollified case; d, e: scratch."""
    if not project:
        return
    for i in range(k):
        for j in range(k):
            A[i, j] = K[i, j]
    if k > 5:
        tridiagonal_ql_eigh(A, k, V, d, e)
    else:
        jacobi_eigh(A, k, V)
    neg = False
    for i in range(k):
        if A[i, i] < 0.0:
            neg = True
    if not neg:
        return
    for i in range(k):
        for j in range(i, k):
            v = 0.0
            for m in range(k):
                lam = A[m, m]
                if lam > 0.0:
                    v += V[i, m] * lam * V[j, m]
            K[i, j] = v
            K[j, i] = v


@njit(cache=True, fastmath=False)
def _reconstruct(B, K, k, slots, ns, T, Hloc):
    """Hloc[3u + a, 3v + b] = (B K B^T)[3 slots[u] + a, 3 slots[v] + b] for the ns involved slots."""
    for u in range(ns):
        for a in range(3):
            p = 3 * slots[u] + a
            for n in range(k):
                v = 0.0
                for m in range(k):
                    v += B[p, m] * K[m, n]
                T[3 * u + a, n] = v
    nn = 3 * ns
    for P in range(nn):
        for v_ in range(ns):
            for b in range(3):
                q = 3 * slots[v_] + b
                Q = 3 * v_ + b
                if Q < P:
                    continue
                v = 0.0
                for n in range(k):
                    v += T[P, n] * B[q, n]
                Hloc[P, Q] = v
                Hloc[Q, P] = v


@njit(cache=True, fastmath=False, inline="always")
def _involved_slots(kind, i0, i1, i2, slots):
    """The slots a pair's Hessian involves, by its closest-feature kind, into slots[:ns]; returns ns (2 point-point,
    3 point-edge, 4 otherwise)."""
    if kind == KIND_PP:
        slots[0] = i0
        slots[1] = i1
        return 2
    if kind == KIND_PE:
        slots[0] = i0
        slots[1] = i1
        slots[2] = i2
        return 3
    for i in range(4):
        slots[i] = i
    return 4


@njit(cache=True, fastmath=False)
def pair_gauss_newton(X, is_ee, off, epsx, dhat, sc):
    """Energy, gradient and Gauss-Newton Hessian weight of one pair at slot positions X (12,) (unit stiffness).

    The barrier's exact Hessian is b''(s) grad s grad s^T + b'(s) hess s; the second term has the scale
    b'(s) / L (L: the stencil's size) against b''(s) ~ b'(s) / s of the first, so near contact (s << L) it is a
    small correction, and it is the indefinite one (a point-triangle pair's Hessian has two negative
    eigenvalues: the projected Newton path spends a small eigen-solve per pair on clamping them). The
    Gauss-Newton Hessian keeps the first term only: H = w y y^T with y = c (x) r (grad s = y / d) and
    w = b''(s) / d^2 >= 0, PSD by construction, rank one, no eigen-solve (GIPC, Huang et al. 2024, use a
    Gauss-Newton barrier Hessian for the same reason). The gradient is exact, so a Newton step with it converges
    to the same point; only the model between iterations differs.

    Writes the gradient (b'(s) / d) y into sc.grad, c into sc.coef, r into sc.diff and the involved slots (those
    with c_i != 0 by the stencil's kind, as pair_terms) into sc.slots[:ns]. Returns (energy, b'(s) / d, w, ns):
    ns 0 when inactive (s >= dhat), -1 for a mollified edge-edge pair (nearly parallel edges, whose energy
    m(c) b(s) is not of this form: the caller takes pair_terms for it), else the number of involved slots."""
    g, c, dc, sv, r, slots = sc.grad, sc.coef, sc.dirs, sc.span, sc.diff, sc.slots
    kind, i0, i1, i2, i3, d2 = pair_stencil_local(X, is_ee)
    d = math.sqrt(d2)
    s = d - off
    if s >= dhat:
        return 0.0, 0.0, 0.0, 0
    if is_ee:
        if cross_norm2_value(X) < epsx:
            return 0.0, 0.0, 0.0, -1
    stencil_closest_into(X, kind, i0, i1, i2, i3, c, r, dc, sv)
    b1 = barrier_first_derivative(s, dhat)
    wg = b1 / d
    for i in range(4):
        for a in range(3):
            g[3 * i + a] = wg * c[i] * r[a]
    ns = _involved_slots(kind, i0, i1, i2, slots)
    return barrier(s, dhat), wg, barrier_second_derivative(s, dhat) / d2, ns


@njit(cache=True, fastmath=False)
def pair_terms(X, is_ee, off, epsx, dhat, want_hess, project, sc):
    """Energy m b(s), gradient and Hessian of one pair at slot positions X (12,) (unit stiffness).

    Writes the gradient (12,) into sc.grad; if want_hess, the Hessian restricted to the involved
    slots into sc.hess[:3 ns, :3 ns] (PSD-projected when project) with the slot numbers in
    sc.slots[:ns] (sc: a PairScratch). Returns (energy, ns); ns = 0 when the pair is inactive (s >= dhat).
    """
    g, gc, c, dc, sv, r = sc.grad, sc.grad_c, sc.coef, sc.dirs, sc.span, sc.diff
    H, B, T, K, A, V, slots, F = sc.hess, sc.basis, sc.tmp, sc.small, sc.eig_a, sc.eig_v, sc.slots, sc.fmat
    kind, i0, i1, i2, i3, d2 = pair_stencil_local(X, is_ee)
    d = math.sqrt(d2)
    s = d - off
    if s >= dhat:
        return 0.0, 0
    b = barrier(s, dhat)
    b1 = barrier_first_derivative(s, dhat)
    m = 1.0
    m1 = 0.0
    m2 = 0.0
    mollified = False
    if is_ee:
        cx = cross_norm2_value(X)
        if cx < epsx:
            _cross_norm2_grad(X, gc)
            m, m1, m2 = mollifier(cx, epsx)
            mollified = True
    npar = stencil_closest_into(X, kind, i0, i1, i2, i3, c, r, dc, sv)
    # gradient: m b' c (x) r / d + m' b grad c
    wg = m * b1 / d
    for i in range(4):
        for a in range(3):
            g[3 * i + a] = wg * c[i] * r[a]
    if mollified:
        for p in range(12):
            g[p] += m1 * b * gc[p]
    if not want_hess:
        return m * b, 4
    b2 = barrier_second_derivative(s, dhat)
    alpha = m * b1 / (2.0 * d)
    beta = m * (b2 / (d * d) - b1 / (d * d * d))
    # (2G)^-1 of the parameter metric
    i00 = 0.0
    i01 = 0.0
    i11 = 0.0
    if npar == 1:
        i00 = 1.0 / (2.0 * (sv[0, 0] ** 2 + sv[0, 1] ** 2 + sv[0, 2] ** 2))
    elif npar == 2:
        g00 = 2.0 * (sv[0, 0] * sv[0, 0] + sv[0, 1] * sv[0, 1] + sv[0, 2] * sv[0, 2])
        g01 = 2.0 * (sv[0, 0] * sv[1, 0] + sv[0, 1] * sv[1, 1] + sv[0, 2] * sv[1, 2])
        g11 = 2.0 * (sv[1, 0] * sv[1, 0] + sv[1, 1] * sv[1, 1] + sv[1, 2] * sv[1, 2])
        det = 4.0 * gram_det(sv)   # = g00 g11 - g01^2 (g = 2 s.s), without the cancellation
        i00 = g11 / det
        i01 = -g01 / det
        i11 = g00 / det
    if not mollified:
        ns = _involved_slots(kind, i0, i1, i2, slots)
        # orthonormal basis B (12, k): c/|c| (x) e_a, q_j (x) n
        k = 3 + npar
        cn = math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + c[3] * c[3])
        rn = math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
        for p in range(12):
            for j in range(k):
                B[p, j] = 0.0
        for i in range(4):
            for a in range(3):
                B[3 * i + a, a] = c[i] / cn
        # q_j in T[0:npar, 0:4] (R^4 Gram-Schmidt of dc_j against c and previous q)
        for j in range(npar):
            for i in range(4):
                T[j, i] = dc[j, i]
            for rep in range(2):
                pc = 0.0
                for i in range(4):
                    pc += T[j, i] * c[i]
                pc /= cn * cn
                for i in range(4):
                    T[j, i] -= pc * c[i]
                for l in range(j):
                    pl = 0.0
                    for i in range(4):
                        pl += T[j, i] * T[l, i]
                    for i in range(4):
                        T[j, i] -= pl * T[l, i]
            nq = math.sqrt(T[j, 0] ** 2 + T[j, 1] ** 2 + T[j, 2] ** 2 + T[j, 3] ** 2)
            for i in range(4):
                T[j, i] /= nq
                for a in range(3):
                    B[3 * i + a, 3 + j] = T[j, i] * r[a] / rn
        # z_j = B^T F_j and y = B^T (c (x) r)
        for j in range(npar):
            cd = 0.0
            for i in range(4):
                cd += c[i] * dc[j, i]
            for a in range(3):
                F[a, j] = 2.0 * (cd / cn * r[a] + cn * sv[j, a])
            for l in range(npar):
                qd = 0.0
                for i in range(4):
                    qd += T[l, i] * dc[j, i]
                F[3 + l, j] = 2.0 * qd * rn
        cc = cn * cn
        for p in range(k):
            for q in range(p, k):
                v = 0.0
                if p < 3 and q < 3:
                    v = beta * cc * r[p] * r[q]
                    if p == q:
                        v += alpha * 2.0 * cc
                if npar == 1:
                    v -= alpha * F[p, 0] * i00 * F[q, 0]
                elif npar == 2:
                    v -= alpha * (F[p, 0] * (i00 * F[q, 0] + i01 * F[q, 1]) + F[p, 1] * (i01 * F[q, 0] + i11 * F[q, 1]))
                K[p, q] = v
                K[q, p] = v
        _project_small(K, k, A, V, T[10], T[11], project)
        _reconstruct(B, K, k, slots, ns, T, H)
        return m * b, ns
    # mollified edge-edge: full 12x12 Hessian, projected on the translation complement
    for i in range(4):
        for j in range(npar):
            for a in range(3):
                F[3 * i + a, j] = 2.0 * (dc[j, i] * r[a] + c[i] * sv[j, a])
    wgs = 1.0 / d
    for p in range(12):
        ip = p // 3
        ap = p % 3
        gsp = wgs * c[ip] * r[ap]
        for q in range(p, 12):
            iq = q // 3
            aq = q % 3
            gsq = wgs * c[iq] * r[aq]
            v = 2.0 * c[ip] * c[iq] if ap == aq else 0.0
            if npar == 1:
                v -= F[p, 0] * i00 * F[q, 0]
            elif npar == 2:
                v -= F[p, 0] * (i00 * F[q, 0] + i01 * F[q, 1]) + F[p, 1] * (i01 * F[q, 0] + i11 * F[q, 1])
            v = alpha * v + beta * (c[ip] * r[ap]) * (c[iq] * r[aq])
            v += m1 * b1 * (gc[p] * gsq + gsp * gc[q]) + m2 * b * gc[p] * gc[q]
            H[p, q] = v
            H[q, p] = v
    _add_cross_norm2_hess(X, H, m1 * b)
    for i in range(4):
        slots[i] = i
    if not project:
        return m * b, 4
    # K = B^T H B with B = Q4 (x) I3
    for p in range(12):
        for be in range(3):
            for bb in range(3):
                v = 0.0
                for kk in range(4):
                    v += _Q4[kk, be] * H[p, 3 * kk + bb]
                T[p, 3 * be + bb] = v
    for al in range(3):
        for a in range(3):
            for q in range(9):
                v = 0.0
                for i in range(4):
                    v += _Q4[i, al] * T[3 * i + a, q]
                K[3 * al + a, q] = v
    for p in range(9):
        for q in range(p + 1, 9):
            v = 0.5 * (K[p, q] + K[q, p])
            K[p, q] = v
            K[q, p] = v
    for i in range(4):
        for a in range(3):
            for al in range(3):
                for bb in range(3):
                    B[3 * i + a, 3 * al + bb] = _Q4[i, al] if a == bb else 0.0
    _project_small(K, 9, A, V, T[10], T[11], True)
    _reconstruct(B, K, 9, slots, 4, T, H)
    return m * b, 4
