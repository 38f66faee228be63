"""Per-vertex gradient (3,) and PSD 3x3 Hessian block of every elastic term, for block descent.

Each function adds one element's contribution, with respect to the coordinates of the element's
vertex in ``slot``, to g (3,) [N] and H (3, 3) [N/m]. The energies are exactly the Newton solver's
(solver_server/ipc/: membrane.py, bending.py, elastic_tet.py, rod_stretch.py), so both solvers
minimise the same incremental potential; only the per-vertex Hessian is made PSD more cheaply:

* membrane (StVK): the vertex block of d2E/dx2 is A t [q I + (mu + lam) u u^T + mu |n|^2 F F^T]
  with n = dF/dx_a (the slot's row of D_m^-1 shape derivatives), u = F n, q = n^T S n; only q can
  be negative (compression), and it is clamped at 0;
* hinges and rods: the Gauss-Newton block k w J_a^T J_a of the shared energy;
* tets: the 9x9 dP/dF of the shared model, projected in the SVD frame (elastic_tet.dPdF_projected).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from solver_server.ipc.bending import _hinge_dJ, _residual_dir, rod_d
from solver_server.ipc.elastic_tet import _deformation_gradient, _dN as _tet_dN, dPdF_projected
from solver_server.ipc.fem_common import polar_svd
from solver_server.ipc.isotropic_models import psi_sigma


@njit(cache=True, fastmath=False)
def membrane_vertex(x, tri, Dm, w, mu, lam, a, g, H, clamp):
    """StVK membrane of one triangle (book "Thin shells"): w = area * thickness (m^3), mu, lam Pa.
    ``clamp`` False keeps the exact (possibly indefinite) block, for derivative checks."""
    i0, i1, i2 = tri[0], tri[1], tri[2]
    # F = [x1 - x0, x2 - x0] Dm (3x2), kept in scalars (no allocation in the sweep's inner loop)
    ax, ay, az = x[i1, 0] - x[i0, 0], x[i1, 1] - x[i0, 1], x[i1, 2] - x[i0, 2]
    bx, by, bz = x[i2, 0] - x[i0, 0], x[i2, 1] - x[i0, 1], x[i2, 2] - x[i0, 2]
    d00, d01, d10, d11 = Dm[0, 0], Dm[0, 1], Dm[1, 0], Dm[1, 1]
    f0x, f0y, f0z = ax * d00 + bx * d10, ay * d00 + by * d10, az * d00 + bz * d10
    f1x, f1y, f1z = ax * d01 + bx * d11, ay * d01 + by * d11, az * d01 + bz * d11
    C00 = f0x * f0x + f0y * f0y + f0z * f0z
    C01 = f0x * f1x + f0y * f1y + f0z * f1z
    C11 = f1x * f1x + f1y * f1y + f1z * f1z
    E00 = 0.5 * (C00 - 1.0)
    E01 = 0.5 * C01
    E11 = 0.5 * (C11 - 1.0)
    tr = E00 + E11
    S00 = 2.0 * mu * E00 + lam * tr
    S01 = 2.0 * mu * E01
    S11 = 2.0 * mu * E11 + lam * tr
    if a == 0:
        n0 = -(d00 + d10)
        n1 = -(d01 + d11)
    elif a == 1:
        n0 = d00
        n1 = d01
    else:
        n0 = d10
        n1 = d11
    # S n and q = n^T S n
    sn0 = S00 * n0 + S01 * n1
    sn1 = S01 * n0 + S11 * n1
    q = n0 * sn0 + n1 * sn1
    if clamp and q < 0.0:
        q = 0.0
    nn = n0 * n0 + n1 * n1
    # gradient w (F S n); u = F n
    g[0] += w * (f0x * sn0 + f1x * sn1)
    g[1] += w * (f0y * sn0 + f1y * sn1)
    g[2] += w * (f0z * sn0 + f1z * sn1)
    ux, uy, uz = f0x * n0 + f1x * n1, f0y * n0 + f1y * n1, f0z * n0 + f1z * n1
    ml = mu + lam
    wq = w * q
    wm = w * mu * nn
    wl = w * ml
    H[0, 0] += wl * ux * ux + wm * (f0x * f0x + f1x * f1x) + wq
    H[1, 1] += wl * uy * uy + wm * (f0y * f0y + f1y * f1y) + wq
    H[2, 2] += wl * uz * uz + wm * (f0z * f0z + f1z * f1z) + wq
    hxy = wl * ux * uy + wm * (f0x * f0y + f1x * f1y)
    hxz = wl * ux * uz + wm * (f0x * f0z + f1x * f1z)
    hyz = wl * uy * uz + wm * (f0y * f0z + f1y * f1z)
    H[0, 1] += hxy
    H[1, 0] += hxy
    H[0, 2] += hxz
    H[2, 0] += hxz
    H[1, 2] += hyz
    H[2, 1] += hyz


@njit(cache=True, fastmath=False)
def bending_vertex(kind, x, st, kw, d0, a, g, H, J, s5, dv, r):
    """Hinge (kind 0, stencil of 4) or rod (kind 1, stencil of 3) bending, shared energy
    (kw/2)(|d| - d0)^2 (bending.py). J (3, 12) and s5 (5, 3), dv, r (3,) are scratch."""
    if kind == 0:
        dv[0], dv[1], dv[2] = _hinge_dJ(x, st, J, s5[0], s5[1], s5[2], s5[3], s5[4])
    else:
        d, Jr = rod_d(x, st)
        dv[:] = d
        J[:, :9] = Jr
    nd = math.sqrt(dv[0] * dv[0] + dv[1] * dv[1] + dv[2] * dv[2])
    if not _residual_dir(kw, d0, dv, nd, r):
        return
    o = 3 * a
    for c in range(3):
        g[c] += J[0, o + c] * r[0] + J[1, o + c] * r[1] + J[2, o + c] * r[2]
    if d0 > 1e-9:
        # kw J^T d^ d^T J
        jd = np.empty(3)
        for c in range(3):
            jd[c] = (J[0, o + c] * dv[0] + J[1, o + c] * dv[1] + J[2, o + c] * dv[2]) / nd
        for c in range(3):
            for e in range(3):
                H[c, e] += kw * jd[c] * jd[e]
    else:
        for c in range(3):
            for e in range(3):
                H[c, e] += kw * (J[0, o + c] * J[0, o + e] + J[1, o + c] * J[1, o + e] + J[2, o + c] * J[2, o + e])


@njit(cache=True, fastmath=False, inline="always")
def _add_proj_skew(J, u0, u1, u2, inv_l, v0, v1, v2):
    """J (3, 3) += (I - u u^T) [v]x / l: the derivative of a unit normal u = n / l through
    dn = v x dx (only the three columns of one vertex; bending.py builds all twelve)."""
    for k in range(3):
        if k == 0:
            w0, w1, w2 = 0.0, v2, -v1
        elif k == 1:
            w0, w1, w2 = -v2, 0.0, v0
        else:
            w0, w1, w2 = v1, -v0, 0.0
        ud = u0 * w0 + u1 * w1 + u2 * w2
        J[0, k] += (w0 - u0 * ud) * inv_l
        J[1, k] += (w1 - u1 * ud) * inv_l
        J[2, k] += (w2 - u2 * ud) * inv_l


@njit(cache=True, fastmath=False)
def hinge_vertex(x, hg, kw, d0, a, g, H, J):
    """Hinge bending of bending.py (d = n_A - n_B, E = kw/2 (|d| - d0)^2) for the vertex in slot a,
    computing only that vertex's 3x3 Jacobian block J (scratch (3, >=3)): with e = x1 - x0,
    b = x2 - x0, c = x3 - x0, n_A = e x b, n_B = c x e, the block is P_A [vA]x / |n_A| +
    P_B [vB]x / |n_B| with (vA, vB) = (b - e, c - e), (-b, -c), (e, 0), (0, e) for slots 0..3."""
    i0, i1, i2, i3 = hg[0], hg[1], hg[2], hg[3]
    e0, e1, e2 = x[i1, 0] - x[i0, 0], x[i1, 1] - x[i0, 1], x[i1, 2] - x[i0, 2]
    b0, b1, b2 = x[i2, 0] - x[i0, 0], x[i2, 1] - x[i0, 1], x[i2, 2] - x[i0, 2]
    c0, c1, c2 = x[i3, 0] - x[i0, 0], x[i3, 1] - x[i0, 1], x[i3, 2] - x[i0, 2]
    nA0, nA1, nA2 = e1 * b2 - e2 * b1, e2 * b0 - e0 * b2, e0 * b1 - e1 * b0
    nB0, nB1, nB2 = c1 * e2 - c2 * e1, c2 * e0 - c0 * e2, c0 * e1 - c1 * e0
    lA = math.sqrt(nA0 * nA0 + nA1 * nA1 + nA2 * nA2)
    lB = math.sqrt(nB0 * nB0 + nB1 * nB1 + nB2 * nB2)
    if lA == 0.0 or lB == 0.0:
        return
    uA0, uA1, uA2 = nA0 / lA, nA1 / lA, nA2 / lA
    uB0, uB1, uB2 = nB0 / lB, nB1 / lB, nB2 / lB
    d_0, d_1, d_2 = uA0 - uB0, uA1 - uB1, uA2 - uB2
    nd = math.sqrt(d_0 * d_0 + d_1 * d_1 + d_2 * d_2)
    if d0 > 1e-9:
        if nd < 1e-14:
            return
        f = kw * (nd - d0) / nd
    else:
        f = kw
    for r in range(3):
        for k in range(3):
            J[r, k] = 0.0
    if a == 0:
        _add_proj_skew(J, uA0, uA1, uA2, 1.0 / lA, b0 - e0, b1 - e1, b2 - e2)
        _add_proj_skew(J, uB0, uB1, uB2, 1.0 / lB, c0 - e0, c1 - e1, c2 - e2)
    elif a == 1:
        _add_proj_skew(J, uA0, uA1, uA2, 1.0 / lA, -b0, -b1, -b2)
        _add_proj_skew(J, uB0, uB1, uB2, 1.0 / lB, -c0, -c1, -c2)
    elif a == 2:
        _add_proj_skew(J, uA0, uA1, uA2, 1.0 / lA, e0, e1, e2)
    else:
        _add_proj_skew(J, uB0, uB1, uB2, 1.0 / lB, e0, e1, e2)
    for k in range(3):
        g[k] += f * (J[0, k] * d_0 + J[1, k] * d_1 + J[2, k] * d_2)
    if d0 > 1e-9:
        j0 = (J[0, 0] * d_0 + J[1, 0] * d_1 + J[2, 0] * d_2) / nd
        j1 = (J[0, 1] * d_0 + J[1, 1] * d_1 + J[2, 1] * d_2) / nd
        j2 = (J[0, 2] * d_0 + J[1, 2] * d_1 + J[2, 2] * d_2) / nd
        H[0, 0] += kw * j0 * j0
        H[0, 1] += kw * j0 * j1
        H[0, 2] += kw * j0 * j2
        H[1, 0] += kw * j1 * j0
        H[1, 1] += kw * j1 * j1
        H[1, 2] += kw * j1 * j2
        H[2, 0] += kw * j2 * j0
        H[2, 1] += kw * j2 * j1
        H[2, 2] += kw * j2 * j2
    else:
        for c in range(3):
            for k in range(3):
                H[c, k] += kw * (J[0, c] * J[0, k] + J[1, c] * J[1, k] + J[2, c] * J[2, k])


@njit(cache=True, fastmath=False)
def rod_stretch_vertex(x, edge, rest, k, a, g, H):
    """Rod stretch (k l / 8)(|e|^2/l^2 - 1)^2 (rod_stretch.py) with its projected block."""
    e0 = x[edge[1], 0] - x[edge[0], 0]
    e1 = x[edge[1], 1] - x[edge[0], 1]
    e2 = x[edge[1], 2] - x[edge[0], 2]
    l2 = rest * rest
    q = (e0 * e0 + e1 * e1 + e2 * e2) / l2
    c = k / (2.0 * rest)
    sgn = -1.0 if a == 0 else 1.0
    g[0] += sgn * c * (q - 1.0) * e0
    g[1] += sgn * c * (q - 1.0) * e1
    g[2] += sgn * c * (q - 1.0) * e2
    lam_par = max(c * (3.0 * q - 1.0), 0.0)
    lam_perp = max(c * (q - 1.0), 0.0)
    ev = (e0, e1, e2)
    inv = 1.0 / (q * l2) if q > 0 else 0.0
    for i in range(3):
        for j in range(3):
            ee = ev[i] * ev[j] * inv
            H[i, j] += lam_perp * ((1.0 if i == j else 0.0) - ee) + lam_par * ee


@njit(cache=True, fastmath=False)
def tet_vertex(x, tet, Dm_inv, vol, mu, lam, model, a, g, H, project):
    """Tetrahedron of the shared isotropic models (isotropic_models.psi_sigma), vol m^3, Pa."""
    F = _deformation_gradient(x, tet, Dm_inv)
    U, s, V = polar_svd(F)
    gs = np.empty(3)
    hs = np.empty((3, 3))
    ab = np.empty((3, 2))
    psi_sigma(model, mu, lam, s, gs, hs, ab)
    P = (U * gs) @ V.T
    dN = _tet_dN(Dm_inv)
    for c in range(3):
        acc = 0.0
        for j in range(3):
            acc += P[c, j] * dN[a, j]
        g[c] += vol * acc
    K = dPdF_projected(U, s, V, hs, ab, project)
    for c in range(3):
        for d in range(3):
            acc = 0.0
            for j in range(3):
                for l in range(3):
                    acc += K[3 * c + j, 3 * d + l] * dN[a, j] * dN[a, l]
            H[c, d] += vol * acc


@njit(cache=True, fastmath=False)
def tet_volume_moving(x, tet, slot, p):
    """Signed volume (m^3) of tet with its vertex in ``slot`` placed at p (3,)."""
    q = np.empty((4, 3))
    for i in range(4):
        for c in range(3):
            q[i, c] = x[tet[i], c]
    for c in range(3):
        q[slot, c] = p[c]
    a0, a1, a2 = q[1, 0] - q[0, 0], q[1, 1] - q[0, 1], q[1, 2] - q[0, 2]
    b0, b1, b2 = q[2, 0] - q[0, 0], q[2, 1] - q[0, 1], q[2, 2] - q[0, 2]
    c0, c1, c2 = q[3, 0] - q[0, 0], q[3, 1] - q[0, 1], q[3, 2] - q[0, 2]
    return (a0 * (b1 * c2 - b2 * c1) - a1 * (b0 * c2 - b2 * c0) + a2 * (b0 * c1 - b1 * c0)) / 6.0
