"""Cloth membrane: StVK on the 3x2 deformation gradient of each triangle (book: "Thin shells / rods").

F = D_s D_m^{-1}, D_s = [x1 - x0, x2 - x0] (3x2), D_m the 2x2 rest edge matrix in the triangle's own
orthonormal frame. psi = mu |E|^2 + lambda/2 tr(E)^2 with E = (F^T F - I)/2; element energy
A_e * thickness * psi (J). dP/dF (6x6) is PSD-projected per element (StVK loses convexity in
compression). Positions m, moduli Pa, areas m^2, thickness m.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from solver_server.threads import ordered_sum


def rest_shape(X: np.ndarray, tris: np.ndarray) -> tuple:
    """Inverse 2x2 rest bases (m, 2, 2) and rest areas (m,) in m^2."""
    e1 = X[tris[:, 1]] - X[tris[:, 0]]
    e2 = X[tris[:, 2]] - X[tris[:, 0]]
    l1 = np.linalg.norm(e1, axis=1)
    t1 = e1 / l1[:, None]
    c = np.einsum("ij,ij->i", e2, t1)
    perp = e2 - c[:, None] * t1
    s = np.linalg.norm(perp, axis=1)
    Dm = np.zeros((len(tris), 2, 2))
    Dm[:, 0, 0] = l1
    Dm[:, 0, 1] = c
    Dm[:, 1, 1] = s
    return np.linalg.inv(Dm), 0.5 * l1 * s


@njit(cache=True, fastmath=False)
def _F(x, t, Dm_inv):
    Ds = np.empty((3, 2))
    for c in range(3):
        Ds[c, 0] = x[t[1], c] - x[t[0], c]
        Ds[c, 1] = x[t[2], c] - x[t[0], c]
    return Ds @ Dm_inv


@njit(cache=True, fastmath=False)
def _stvk(F, mu, lam):
    C = F.T @ F
    E = 0.5 * (C - np.eye(2))
    tr = E[0, 0] + E[1, 1]
    S = 2.0 * mu * E + lam * tr * np.eye(2)
    psi = mu * (E[0, 0] ** 2 + 2.0 * E[0, 1] ** 2 + E[1, 1] ** 2) + 0.5 * lam * tr * tr
    return psi, F @ S, S


@njit(cache=True, fastmath=False)
def _dN(Dm_inv):
    d = np.empty((3, 2))
    for j in range(2):
        d[0, j] = -(Dm_inv[0, j] + Dm_inv[1, j])
        d[1, j] = Dm_inv[0, j]
        d[2, j] = Dm_inv[1, j]
    return d


@njit(cache=True, fastmath=False)
def _F_cols(x, t, D):
    """The two columns (f0, f1) of F = D_s D_m^-1 as 3-tuples (no allocation: these kernels run per
    triangle several times per Newton iteration)."""
    a0 = x[t[1], 0] - x[t[0], 0]
    a1 = x[t[1], 1] - x[t[0], 1]
    a2 = x[t[1], 2] - x[t[0], 2]
    b0 = x[t[2], 0] - x[t[0], 0]
    b1 = x[t[2], 1] - x[t[0], 1]
    b2 = x[t[2], 2] - x[t[0], 2]
    f0 = (a0 * D[0, 0] + b0 * D[1, 0], a1 * D[0, 0] + b1 * D[1, 0], a2 * D[0, 0] + b2 * D[1, 0])
    f1 = (a0 * D[0, 1] + b0 * D[1, 1], a1 * D[0, 1] + b1 * D[1, 1], a2 * D[0, 1] + b2 * D[1, 1])
    return f0, f1


@njit(cache=True, fastmath=False)
def _stvk_scalar(f0, f1, mu, lam):
    """(psi, S00, S01, S11) of StVK for F = [f0 f1]: the same formulas as _stvk, in scalars."""
    e00 = 0.5 * (f0[0] * f0[0] + f0[1] * f0[1] + f0[2] * f0[2] - 1.0)
    e11 = 0.5 * (f1[0] * f1[0] + f1[1] * f1[1] + f1[2] * f1[2] - 1.0)
    e01 = 0.5 * (f0[0] * f1[0] + f0[1] * f1[1] + f0[2] * f1[2])
    tr = e00 + e11
    psi = mu * (e00 * e00 + 2.0 * e01 * e01 + e11 * e11) + 0.5 * lam * tr * tr
    return psi, 2.0 * mu * e00 + lam * tr, 2.0 * mu * e01, 2.0 * mu * e11 + lam * tr


@njit(cache=True, fastmath=False, parallel=True)
def membrane_energy(x, tris, Dm_inv, area, mu, lam, thick):
    """Total membrane energy (J)."""
    out = np.empty(tris.shape[0])
    for e in prange(tris.shape[0]):
        f0, f1 = _F_cols(x, tris[e], Dm_inv[e])
        psi, s00, s01, s11 = _stvk_scalar(f0, f1, mu[e], lam[e])
        out[e] = area[e] * thick[e] * psi
    return ordered_sum(out)


@njit(cache=True, fastmath=False, parallel=True)
def membrane_gradient_elems(x, tris, Dm_inv, area, mu, lam, thick):
    """Per-triangle gradients (m, 9)."""
    out = np.empty((tris.shape[0], 9))
    for e in prange(tris.shape[0]):
        f0, f1 = _F_cols(x, tris[e], Dm_inv[e])
        psi, s00, s01, s11 = _stvk_scalar(f0, f1, mu[e], lam[e])
        D = Dm_inv[e]
        # shape gradients dN (3 x 2), as in _dN
        n00 = -(D[0, 0] + D[1, 0])
        n01 = -(D[0, 1] + D[1, 1])
        w = area[e] * thick[e]
        for c in range(3):
            p0 = f0[c] * s00 + f1[c] * s01     # P = F S
            p1 = f0[c] * s01 + f1[c] * s11
            out[e, c] = w * (p0 * n00 + p1 * n01)
            out[e, 3 + c] = w * (p0 * D[0, 0] + p1 * D[0, 1])
            out[e, 6 + c] = w * (p0 * D[1, 0] + p1 * D[1, 1])
    return out


_CHUNK = 256        # triangles per parallel work item of the Hessian kernel (scratch allocated once per item)
PSD_SLACK = 1e-10   # relative: a dP/dF whose smallest eigenvalue is above -PSD_SLACK * max|K_ii| counts as PSD


@njit(cache=True, fastmath=False)
def _clamp_out_of_plane(K, F, S, Kc, L, q):
    """The PSD projection of dP/dF (6x6, in place) without an eigen-solver in the common case.

    For dF = n w^T (n the deformed triangle's unit normal, w in R^2) every term of K but delta_rc S_jl
    vanishes (F^T n = 0), so K vec(n w^T) = vec(n (S w)^T): the two out-of-plane modes n s_k^T, with
    s_k the eigenvectors of the 2x2 stress S, are eigenvectors of K with the principal stresses as
    eigenvalues. A compressed triangle (a principal stress < 0, buckling) has these negative; they
    are clamped to 0 here in closed form. If the rest of K is PSD (a Cholesky factorisation with a
    PSD_SLACK shift succeeds) this equals the eigenvalue clamp and True is returned; otherwise K is
    left unchanged and False tells the caller to run the full eigen-decomposition (strong in-plane
    compression, or a degenerate triangle). Kc, L (6, 6) and q (6,) are scratch."""
    nx = F[1, 0] * F[2, 1] - F[2, 0] * F[1, 1]
    ny = F[2, 0] * F[0, 1] - F[0, 0] * F[2, 1]
    nz = F[0, 0] * F[1, 1] - F[1, 0] * F[0, 1]
    nn = np.sqrt(nx * nx + ny * ny + nz * nz)
    scale = 0.0
    for i in range(6):
        scale = max(scale, abs(K[i, i]))
    f2 = 0.0
    for c in range(3):
        f2 += F[c, 0] * F[c, 0] + F[c, 1] * F[c, 1]
    if not nn > 1e-8 * f2 or scale == 0.0:
        return False
    n = (nx / nn, ny / nn, nz / nn)
    a = S[0, 0]
    b = S[0, 1]
    c_ = S[1, 1]
    half = 0.5 * (a - c_)
    rad = np.sqrt(half * half + b * b)
    Kc[:, :] = K
    for k in range(2):
        s = 0.5 * (a + c_) + (rad if k == 0 else -rad)
        if s >= 0.0:
            continue
        # eigenvector of [[a, b], [b, c]] for s, from the better-conditioned row
        if abs(a - s) + abs(b) >= abs(c_ - s) + abs(b):
            w0, w1 = -b, a - s
        else:
            w0, w1 = c_ - s, -b
        wn = np.sqrt(w0 * w0 + w1 * w1)
        if wn == 0.0:          # S = s I: any orthonormal pair
            w0, w1 = (1.0, 0.0) if k == 0 else (0.0, 1.0)
        else:
            w0 /= wn
            w1 /= wn
        for r in range(3):
            q[2 * r] = n[r] * w0
            q[2 * r + 1] = n[r] * w1
        for i in range(6):
            for j in range(6):
                Kc[i, j] -= s * q[i] * q[j]
    # Cholesky of Kc + slack I: success means Kc >= -slack I, i.e. PSD to rounding
    L[:, :] = Kc
    shift = PSD_SLACK * scale
    for j in range(6):
        d = L[j, j] + shift
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > 0.0:
            return False
        d = np.sqrt(d)
        L[j, j] = d
        for i in range(j + 1, 6):
            v = L[i, j]
            for k in range(j):
                v -= L[i, k] * L[j, k]
            L[i, j] = v / d
    for i in range(6):
        for j in range(6):
            K[i, j] = Kc[i, j]
    return True


@njit(cache=True, fastmath=False, parallel=True)
def membrane_hessian_elems(x, tris, Dm_inv, area, mu, lam, thick, project):
    """Per-triangle Hessians (m, 9, 9); dP/dF is PSD-projected when ``project``.

    dP/dF in closed form (row r*2+l of P, column c*2+j of F):
    K = delta_rc S_jl + mu F_rj F_cl + mu (F F^T)_rc delta_lj + lambda F_rl F_cj
    (from dP = dF S + F dS, dS = 2 mu dE + lambda tr(dE) I, dE = (dF^T F + F^T dF) / 2)."""
    m = tris.shape[0]
    out = np.empty((m, 9, 9))
    n_chunks = (m + _CHUNK - 1) // _CHUNK
    for ch in prange(n_chunks):
        # per-chunk scratch: no allocation per triangle
        F = np.empty((3, 2))
        S = np.empty((2, 2))
        K = np.empty((6, 6))
        Kc = np.empty((6, 6))
        L = np.empty((6, 6))
        q = np.empty(6)
        dN = np.empty((3, 2))
        for e in range(ch * _CHUNK, min(m, (ch + 1) * _CHUNK)):
            f0, f1 = _F_cols(x, tris[e], Dm_inv[e])
            psi, s00, s01, s11 = _stvk_scalar(f0, f1, mu[e], lam[e])
            for c in range(3):
                F[c, 0] = f0[c]
                F[c, 1] = f1[c]
            S[0, 0] = s00
            S[0, 1] = s01
            S[1, 0] = s01
            S[1, 1] = s11
            m_ = mu[e]
            l_ = lam[e]
            for r in range(3):
                for l in range(2):
                    for c in range(3):
                        FFt = F[r, 0] * F[c, 0] + F[r, 1] * F[c, 1]
                        for j in range(2):
                            v = m_ * F[r, j] * F[c, l] + l_ * F[r, l] * F[c, j]
                            if r == c:
                                v += S[j, l]
                            if l == j:
                                v += m_ * FFt
                            K[2 * r + l, 2 * c + j] = v
            if project and not _clamp_out_of_plane(K, F, S, Kc, L, q):
                w, Q = np.linalg.eigh(K)
                if w[0] < 0.0:
                    for i in range(6):
                        if w[i] < 0.0:
                            w[i] = 0.0
                    for i in range(6):
                        for k in range(i, 6):
                            acc = 0.0
                            for qq in range(6):
                                acc += Q[i, qq] * w[qq] * Q[k, qq]
                            K[i, k] = acc
                            K[k, i] = acc
            D = Dm_inv[e]
            dN[0, 0] = -(D[0, 0] + D[1, 0])
            dN[0, 1] = -(D[0, 1] + D[1, 1])
            dN[1, 0] = D[0, 0]
            dN[1, 1] = D[0, 1]
            dN[2, 0] = D[1, 0]
            dN[2, 1] = D[1, 1]
            wgt = area[e] * thick[e]
            # B[c, j, b, d] = sum_l K[2c+j, 2d+l] dN[b, l], then out = wgt * dN[a, j] B
            for b in range(3):
                for d in range(3):
                    for c in range(3):
                        k0 = K[2 * c, 2 * d] * dN[b, 0] + K[2 * c, 2 * d + 1] * dN[b, 1]
                        k1 = K[2 * c + 1, 2 * d] * dN[b, 0] + K[2 * c + 1, 2 * d + 1] * dN[b, 1]
                        for a in range(3):
                            out[e, 3 * a + c, 3 * b + d] = wgt * (dN[a, 0] * k0 + dN[a, 1] * k1)
    return out
