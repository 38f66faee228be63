"""Cloth bending: a per-triangle discrete shape operator from a quadratic patch through the triangle
and its three edge neighbours ("flaps"), so that the bending stiffness equals the input flexural
rigidity B (N m) on any triangulation and in any bending direction.

For triangle T = (v0, v1, v2), edge j is (v_{j+1}, v_{j+2}) (opposite v_j) and f_j is the vertex of the
neighbouring triangle across it. theta_j is the signed dihedral angle at edge j (positive when f_j
rises on the side of T's normal; bounded, monotone up to a full fold). In the rest state, unfolded
into T's plane, f_j has barycentric coordinates lambda(f_j) with respect to T. The quadratic height
field over T that vanishes at T's corners is z = sum_k c_k lambda_{k+1} lambda_{k+2}; fitting it to the
flap heights z_j = h_j theta_j (h_j: rest distance of f_j from edge j) reproduces any quadratic surface
exactly, and its Hessian is the shape operator S = sum_k c_k H_k, H_k = grad l_{k+1} grad l_{k+2}^T + sym.
The energy density (B/2)[nu (tr S)^2 + (1 - nu) S:S] (nu = 0 here: fabric bending has no measurable
Poisson coupling) integrated over T gives

    E_T = 1/2 (theta - theta0)^T K_T (theta - theta0),    K_T = D (B A_T (A Q^-1 A^T)^-1) D,

A_jk = q_k(lambda(f_j)), Q_kl = H_k : H_l, D = diag(h_j): a constant 3x3 PSD matrix per triangle,
built once from the rest shape. A boundary edge has no flap: the missing height is the one that
minimises the energy (natural boundary condition), i.e. its row is dropped from A. Slivers and
flap configurations close to a conic make the fit ill-conditioned: the eigenvalues of B A_T (A Q^-1 A^T)^-1
are capped at CAP * B A_T / lbar^4 (lbar^2: mean squared edge length of T), which never binds on
regular or jittered meshes (max ratio 8 on a grid, 76 on a 30%-jittered grid) and keeps slivers bounded.
The Hessian is the Gauss-Newton matrix J^T K J (J = d theta / dx, 3 x 18): PSD, exact at the rest state.

Stencils are (T, 6) int32 (v0, v1, v2, f0, f1, f2); a missing flap is stored as f_j = v_j.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from solver_server.threads import ordered_sum

CAP = 100.0   # eigenvalue cap of a triangle's height stiffness, in units of B A_T / lbar^4
NU_BEND = 0.0  # Poisson ratio of the bending energy density


@njit(cache=True, fastmath=False, inline="always")
def dihedral_angle_grad(x, io, ip, iq, jf, gr, row):
    """Signed dihedral angle at edge (p, q) between T = (o, p, q) and its flap f (rad), and its gradient
    with respect to (o, p, q, f) into gr[row, 0:4, :]. Returns (theta, ok); ok False if degenerate."""
    ex, ey, ez = x[iq, 0] - x[ip, 0], x[iq, 1] - x[ip, 1], x[iq, 2] - x[ip, 2]
    ax, ay, az = x[ip, 0] - x[io, 0], x[ip, 1] - x[io, 1], x[ip, 2] - x[io, 2]
    bx, by, bz = x[iq, 0] - x[io, 0], x[iq, 1] - x[io, 1], x[iq, 2] - x[io, 2]
    # n_T = (p - o) x (q - o); n_F = (p - q) x (f - q)
    tx, ty, tz = ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
    cx, cy, cz = x[jf, 0] - x[iq, 0], x[jf, 1] - x[iq, 1], x[jf, 2] - x[iq, 2]
    fx, fy, fz = -ey * cz + ez * cy, -ez * cx + ex * cz, -ex * cy + ey * cx
    le2 = ex * ex + ey * ey + ez * ez
    lt2 = tx * tx + ty * ty + tz * tz
    lf2 = fx * fx + fy * fy + fz * fz
    if le2 == 0.0 or lt2 == 0.0 or lf2 == 0.0:
        return 0.0, False
    le = math.sqrt(le2)
    lt = math.sqrt(lt2)
    lf = math.sqrt(lf2)
    # sin theta = (n_F x n_T) . e_hat, cos theta = n_T . n_F
    sx, sy, sz = fy * tz - fz * ty, fz * tx - fx * tz, fx * ty - fy * tx
    s = (sx * ex + sy * ey + sz * ez) / (le * lt * lf)
    c = (tx * fx + ty * fy + tz * fz) / (lt * lf)
    th = math.atan2(s, c)
    # d theta / d o = n_T / h_o, d theta / d f = n_F / h_f  (h = |n| / |e|): n / |n| * |e| / |n|
    kt = le / lt2
    kf = le / lf2
    tT = -(ax * ex + ay * ey + az * ez) / le2          # (o - p) . e / |e|^2
    tF = ((x[jf, 0] - x[ip, 0]) * ex + (x[jf, 1] - x[ip, 1]) * ey + (x[jf, 2] - x[ip, 2]) * ez) / le2
    go = (tx * kt, ty * kt, tz * kt)
    gf = (fx * kf, fy * kf, fz * kf)
    for k in range(3):
        gr[row, 0, k] = go[k]
        gr[row, 3, k] = gf[k]
        gr[row, 1, k] = -(1.0 - tT) * go[k] - (1.0 - tF) * gf[k]
        gr[row, 2, k] = -tT * go[k] - tF * gf[k]
    return th, True


@njit(cache=True, fastmath=False)
def shell_thetas(x, st, th, gr, ok):
    """The three signed dihedral angles th (3,) of stencil st (6,), their gradients gr (3, 4, 3) with
    respect to (v_j, v_{j+1}, v_{j+2}, f_j), and ok (3,) float: 1 where the flap is present and not
    degenerate, else 0 (a float array so the block-descent sweep can pass preallocated scratch)."""
    for j in range(3):
        io, ip, iq, jf = st[j], st[(j + 1) % 3], st[(j + 2) % 3], st[3 + j]
        if jf == io:
            th[j] = 0.0
            ok[j] = 0.0
            continue
        t, good = dihedral_angle_grad(x, io, ip, iq, jf, gr, j)
        th[j] = t
        ok[j] = 1.0 if good else 0.0


@njit(cache=True, fastmath=False, inline="always")
def _slot_of(j, part):
    """Stencil slot (0..5) of part (0: v_j, 1: v_{j+1}, 2: v_{j+2}, 3: f_j) of hinge j."""
    if part == 3:
        return 3 + j
    return (j + part) % 3


@njit(cache=True, fastmath=False)
def _residual(K, th0, th, ok, r):
    """r = K (theta - theta0) over the present hinges (absent ones contribute 0); returns the energy."""
    d0 = th[0] - th0[0] if ok[0] > 0.5 else 0.0
    d1 = th[1] - th0[1] if ok[1] > 0.5 else 0.0
    d2 = th[2] - th0[2] if ok[2] > 0.5 else 0.0
    e = 0.0
    for i in range(3):
        acc = K[i, 0] * d0 + K[i, 1] * d1 + K[i, 2] * d2
        r[i] = acc if ok[i] > 0.5 else 0.0
        e += 0.5 * (d0 if i == 0 else (d1 if i == 1 else d2)) * acc
    return e


_CHUNK = 256   # elements per parallel work item (scratch arrays allocated once per item, not per element)


@njit(cache=True, fastmath=False, parallel=True)
def shell_energy(x, stencils, K, th0):
    """Total cloth bending energy (J). stencils (T, 6) int32, K (T, 3, 3) N m, th0 (T, 3) rad."""
    T = stencils.shape[0]
    out = np.zeros(T)
    for ch in prange((T + _CHUNK - 1) // _CHUNK):
        th = np.empty(3)
        gr = np.empty((3, 4, 3))
        ok = np.empty(3)
        r = np.empty(3)
        for i in range(ch * _CHUNK, min(T, (ch + 1) * _CHUNK)):
            shell_thetas(x, stencils[i], th, gr, ok)
            out[i] = _residual(K[i], th0[i], th, ok, r)
    return ordered_sum(out)


@njit(cache=True, fastmath=False, parallel=True)
def shell_gradient_elems(x, stencils, K, th0):
    """Per-element gradients (T, 18) in N."""
    T = stencils.shape[0]
    out = np.zeros((T, 18))
    for ch in prange((T + _CHUNK - 1) // _CHUNK):
        th = np.empty(3)
        gr = np.empty((3, 4, 3))
        ok = np.empty(3)
        r = np.empty(3)
        for i in range(ch * _CHUNK, min(T, (ch + 1) * _CHUNK)):
            shell_thetas(x, stencils[i], th, gr, ok)
            _residual(K[i], th0[i], th, ok, r)
            for j in range(3):
                if ok[j] < 0.5:
                    continue
                for part in range(4):
                    s = _slot_of(j, part)
                    for k in range(3):
                        out[i, 3 * s + k] += r[j] * gr[j, part, k]
    return out


@njit(cache=True, fastmath=False, parallel=True)
def shell_hessian_elems(x, stencils, K, th0):
    """Per-element Gauss-Newton Hessians (T, 18, 18) J^T K J in N/m: PSD (K is PSD), exact at rest."""
    T = stencils.shape[0]
    out = np.empty((T, 18, 18))
    for ch in prange((T + _CHUNK - 1) // _CHUNK):
        th = np.empty(3)
        gr = np.empty((3, 4, 3))
        ok = np.empty(3)
        J = np.empty((3, 18))
        KJ = np.empty((3, 18))
        for i in range(ch * _CHUNK, min(T, (ch + 1) * _CHUNK)):
            shell_thetas(x, stencils[i], th, gr, ok)
            J[:, :] = 0.0
            for j in range(3):
                if ok[j] < 0.5:
                    continue
                for part in range(4):
                    s = _slot_of(j, part)
                    for k in range(3):
                        J[j, 3 * s + k] += gr[j, part, k]
            Ki = K[i]
            for a in range(3):
                for c in range(18):
                    KJ[a, c] = Ki[a, 0] * J[0, c] + Ki[a, 1] * J[1, c] + Ki[a, 2] * J[2, c]
            for a in range(18):
                for c in range(18):
                    out[i, a, c] = J[0, a] * KJ[0, c] + J[1, a] * KJ[1, c] + J[2, a] * KJ[2, c]
    return out


@njit(cache=True, fastmath=False)
def shell_vertex(x, st, K, th0, a, g, H, th, gr, ok, r, ja):
    """Gradient (3,) and Gauss-Newton block (3, 3) of one element's energy with respect to the vertex in
    slot a (0..5), added into g and H (block descent). th, ok, r (3,), gr (3, 4, 3), ja (3, 3) scratch."""
    shell_thetas(x, st, th, gr, ok)
    _residual(K, th0, th, ok, r)
    for j in range(3):
        for k in range(3):
            ja[j, k] = 0.0
        if ok[j] < 0.5:
            continue
        for part in range(4):
            if _slot_of(j, part) == a:
                for k in range(3):
                    ja[j, k] += gr[j, part, k]
    for k in range(3):
        g[k] += r[0] * ja[0, k] + r[1] * ja[1, k] + r[2] * ja[2, k]
    for p in range(3):
        for q in range(3):
            acc = 0.0
            for i in range(3):
                for j in range(3):
                    acc += ja[i, p] * K[i, j] * ja[j, q]
            H[p, q] += acc


# --- construction from the rest shape (numpy, once per scene) ---------------------------------------
def shell_stencils(triangles: np.ndarray) -> np.ndarray:
    """(T, 6) int32 stencils (v0, v1, v2, f0, f1, f2): f_j the vertex across edge j = (v_{j+1}, v_{j+2})
    when that edge is shared by exactly two triangles, else v_j (no flap)."""
    t = np.asarray(triangles, np.int64)
    T = len(t)
    out = np.concatenate([t, t], axis=1)
    if T == 0:
        return out.astype(np.int32)
    tri_id = np.repeat(np.arange(T), 3)
    j = np.tile(np.arange(3), T)
    a = t[tri_id, (j + 1) % 3]
    b = t[tri_id, (j + 2) % 3]
    key = np.minimum(a, b) * (t.max() + 1) + np.maximum(a, b)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    n = len(ks)
    starts = np.r_[0, np.nonzero(ks[1:] != ks[:-1])[0] + 1]
    sizes = np.diff(np.r_[starts, n])
    pair = starts[sizes == 2]
    h1, h2 = order[pair], order[pair + 1]
    out[tri_id[h1], 3 + j[h1]] = t[tri_id[h2], j[h2]]
    out[tri_id[h2], 3 + j[h2]] = t[tri_id[h1], j[h1]]
    return out.astype(np.int32)


def shell_stiffness(V: np.ndarray, stencils: np.ndarray, B, nu: float = NU_BEND, boundary: str = "moment") -> np.ndarray:
    """K (T, 3, 3) in N m from the rest positions V (n, 3) m and flexural rigidity B (N m, scalar or (T,)).
    ``boundary``: how a triangle on a free edge closes its fit: "moment" (default) imposes zero normal
    curvature across the free edge (M_nn = 0 for nu = 0), "natural" leaves the missing height free
    (energy-minimising; softer, kept for comparison)."""
    V = np.asarray(V, np.float64)
    s = np.asarray(stencils, np.int64)
    T = len(s)
    B = np.broadcast_to(np.asarray(B, np.float64), (T,))
    X = V[s[:, :3]]                                            # (T, 3, 3)
    n = np.cross(X[:, 1] - X[:, 0], X[:, 2] - X[:, 0])
    A2 = np.linalg.norm(n, axis=1)
    nh = n / A2[:, None]
    area = 0.5 * A2
    # grad lambda_i = n_hat x (x_{i+2} - x_{i+1}) / (2A)
    G = np.stack([np.cross(nh, X[:, (i + 2) % 3] - X[:, (i + 1) % 3]) / A2[:, None] for i in range(3)], 1)
    a_ = [G[:, (k + 1) % 3] for k in range(3)]
    b_ = [G[:, (k + 2) % 3] for k in range(3)]
    dot = lambda u, v: (u * v).sum(1)  # noqa: E731
    Q = np.zeros((T, 3, 3))
    for k in range(3):
        for m in range(3):
            hk_hm = 2.0 * (dot(a_[k], a_[m]) * dot(b_[k], b_[m]) + dot(a_[k], b_[m]) * dot(b_[k], a_[m]))
            Q[:, k, m] = nu * 4.0 * dot(a_[k], b_[k]) * dot(a_[m], b_[m]) + (1.0 - nu) * hk_hm
    Amat = np.zeros((T, 3, 3))
    h = np.zeros((T, 3))
    present = np.zeros((T, 3), bool)
    for j in range(3):
        o, p, q, f = X[:, j], X[:, (j + 1) % 3], X[:, (j + 2) % 3], V[s[:, 3 + j]]
        present[:, j] = s[:, 3 + j] != s[:, j]
        e = q - p
        le2 = dot(e, e)
        ho = A2 / np.sqrt(le2)
        hf = np.linalg.norm(np.cross(e, f - p), axis=1) / np.sqrt(le2)
        tT = dot(o - p, e) / le2
        tF = dot(f - p, e) / le2
        rr = np.where(present[:, j], hf / ho, 0.0)
        lam = np.zeros((T, 3))
        lam[:, j] = -rr
        lam[:, (j + 1) % 3] = 1.0 - tF + rr * (1.0 - tT)
        lam[:, (j + 2) % 3] = tF + rr * tT
        for k in range(3):
            Amat[:, j, k] = lam[:, (k + 1) % 3] * lam[:, (k + 2) % 3]
        h[:, j] = np.where(present[:, j], hf, 0.0)
    lbar2 = np.mean([((X[:, (j + 1) % 3] - X[:, (j + 2) % 3]) ** 2).sum(1) for j in range(3)], axis=0)
    for j in range(3):
        if boundary == "moment":
            # free edge j: no normal curvature across it, m^T S m = 0 (zero bending moment for nu = 0),
            # scaled by lbar^2 to the flap rows' magnitude; its height stays 0 (row dropped below)
            e = X[:, (j + 2) % 3] - X[:, (j + 1) % 3]
            m = np.cross(nh, e / np.linalg.norm(e, axis=1)[:, None])
            row = np.stack([2.0 * dot(a_[k], m) * dot(b_[k], m) for k in range(3)], 1) * lbar2[:, None]
            Amat[~present[:, j], j] = row[~present[:, j]]
        else:
            Amat[~present[:, j], j] = 0.0
    M = Amat @ np.linalg.solve(Q, np.transpose(Amat, (0, 2, 1)))
    if boundary != "moment":
        scale = np.abs(M).max(axis=(1, 2)) + 1e-300
        for j in range(3):   # natural condition: the missing height is free (minimises the energy)
            M[:, j, j] = np.where(present[:, j], M[:, j, j], 1e12 * scale)
    mu, W = np.linalg.eigh(M)
    cap = CAP * B * area / lbar2 ** 2
    lam_k = np.minimum(B[:, None] * area[:, None] / np.maximum(mu, 1e-300), cap[:, None])
    Kz = np.einsum("tij,tj,tkj->tik", W, lam_k, W)
    Kz[~present[:, :, None].repeat(3, 2)] = 0.0
    Kz[~present[:, None, :].repeat(3, 1)] = 0.0
    K = h[:, :, None] * Kz * h[:, None, :]
    return np.ascontiguousarray(0.5 * (K + np.transpose(K, (0, 2, 1))))


def rest_thetas(V: np.ndarray, stencils: np.ndarray) -> np.ndarray:
    """Rest dihedral angles (T, 3) rad (0 for missing flaps); |theta| < 1e-9 snapped to 0."""
    out = np.zeros((len(stencils), 3))
    _rest_thetas(np.ascontiguousarray(V, np.float64), np.ascontiguousarray(stencils, np.int32), out)
    out[np.abs(out) < 1e-9] = 0.0
    return out


@njit(cache=True, fastmath=False)
def _rest_thetas(V, st, out):
    th = np.empty(3)
    gr = np.empty((3, 4, 3))
    ok = np.empty(3)
    for i in range(st.shape[0]):
        shell_thetas(V, st[i], th, gr, ok)
        for j in range(3):
            out[i, j] = th[j] if ok[j] > 0.5 else 0.0
