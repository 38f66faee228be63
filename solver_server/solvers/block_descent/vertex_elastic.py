"""Per-vertex gradient (3,) and PSD 3x3 Hessian block of every elastic term, for block descent.

Each function adds one element's contribution, with respect to the coordinates of the element's
vertex in ``slot``, to g (3,) [N] and H (3, 3) [N/m]. The energies are exactly the Newton solver's
(solver_server/: membrane.py, shell_bending.py, bending.py, elastic_tet.py, rod_stretch.py), so both solvers
minimise the same incremental potential; only the per-vertex Hessian is made PSD more cheaply:

* membrane (StVK): the vertex block of d2E/dx2 is A t [q I + (mu + lam) u u^T + mu |n|^2 F F^T]
  with n = dF/dx_a (the slot's row of D_m^-1 shape derivatives), u = F n, q = n^T S n; only q can
  be negative (compression), and it is clamped at 0;
* cloth bending (shell_bending.shell_vertex): the Gauss-Newton block J_a^T K J_a of the shared energy;
* rods: the Gauss-Newton block k w J_a^T J_a of the shared energy;
* tets: the 9x9 dP/dF of the shared model, projected in the SVD frame (elastic_tet.dPdF_projected).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from solver_server.energies.bending import hinge_direction_jacobian, hinge_residual, rod_d
from solver_server.energies.elastic_tet import deformation_gradient, tet_shape_gradients, dPdF_projected
from solver_server.energies.fem_common import polar_svd
from solver_server.energies.isotropic_models import psi_sigma
from solver_server.energies.shell_bending import shell_vertex


@njit(cache=True, fastmath=False, inline="always")
def add_sym3(H, h00, h11, h22, h01, h02, h12):
    """H (3, 3) += the symmetric matrix with diagonal (h00, h11, h22) and off-diagonal h01, h02, h12."""
    H[0, 0] += h00
    H[1, 1] += h11
    H[2, 2] += h22
    H[0, 1] += h01
    H[1, 0] += h01
    H[0, 2] += h02
    H[2, 0] += h02
    H[1, 2] += h12
    H[2, 1] += h12


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
    add_sym3(H, wl * ux * ux + wm * (f0x * f0x + f1x * f1x) + wq, wl * uy * uy + wm * (f0y * f0y + f1y * f1y) + wq,
             wl * uz * uz + wm * (f0z * f0z + f1z * f1z) + wq, wl * ux * uy + wm * (f0x * f0y + f1x * f1y),
             wl * ux * uz + wm * (f0x * f0z + f1x * f1z), wl * uy * uz + wm * (f0y * f0z + f1y * f1z))


@njit(cache=True, fastmath=False)
def bending_vertex(kind, x, st, kw, d0, a, g, H, J, s5, dv, r):
    """Hinge (kind 0, stencil of 4) or rod (kind 1, stencil of 3) bending, shared energy
    (kw/2)(|d| - d0)^2 (bending.py). J (3, 12) and s5 (5, 3), dv, r (3,) are scratch."""
    if kind == 0:
        dv[0], dv[1], dv[2] = hinge_direction_jacobian(x, st, J, s5[0], s5[1], s5[2], s5[3], s5[4])
    else:
        d, Jr = rod_d(x, st)
        dv[:] = d
        J[:, :9] = Jr
    nd = math.sqrt(dv[0] * dv[0] + dv[1] * dv[1] + dv[2] * dv[2])
    if not hinge_residual(kw, d0, dv, nd, r):
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


@njit(cache=True, fastmath=False)
def shell_vertex_scratch(x, st, K, th0, a, g, H, J, s5, r):
    """Cloth bending of one triangle stencil (shell_bending.py, E = 1/2 (th - th0)^T K (th - th0)) for the
    vertex in slot a (0..5): gradient and Gauss-Newton block J_a^T K J_a, using the sweep's scratch
    J (3, 12) (as the (3, 4, 3) dihedral gradients), s5 (5, 3) and r (3,); no allocation."""
    shell_vertex(x, st, K, th0, a, g, H, s5[0], J.reshape((3, 4, 3)), s5[1], r, s5[2:5])


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
    F = deformation_gradient(x, tet, Dm_inv)
    U, s, V = polar_svd(F)
    gs = np.empty(3)
    hs = np.empty((3, 3))
    ab = np.empty((3, 2))
    psi_sigma(model, mu, lam, s, gs, hs, ab)
    P = (U * gs) @ V.T
    dN = tet_shape_gradients(Dm_inv)
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


@njit(cache=True, fastmath=False, inline="always")
def _corner(x, tet, slot, p, i, c):
    """Coordinate c of corner i of tet, with the corner in ``slot`` at p."""
    return p[c] if i == slot else x[tet[i], c]


@njit(cache=True, fastmath=False)
def tet_volume_moving(x, tet, slot, p):
    """Signed volume (m^3) of tet with its vertex in ``slot`` placed at p (3,). No allocation (the
    sweep's reference-count-free kernels call it)."""
    q0x, q0y, q0z = _corner(x, tet, slot, p, 0, 0), _corner(x, tet, slot, p, 0, 1), _corner(x, tet, slot, p, 0, 2)
    a0 = _corner(x, tet, slot, p, 1, 0) - q0x
    a1 = _corner(x, tet, slot, p, 1, 1) - q0y
    a2 = _corner(x, tet, slot, p, 1, 2) - q0z
    b0 = _corner(x, tet, slot, p, 2, 0) - q0x
    b1 = _corner(x, tet, slot, p, 2, 1) - q0y
    b2 = _corner(x, tet, slot, p, 2, 2) - q0z
    c0 = _corner(x, tet, slot, p, 3, 0) - q0x
    c1 = _corner(x, tet, slot, p, 3, 1) - q0y
    c2 = _corner(x, tet, slot, p, 3, 2) - q0z
    return (a0 * (b1 * c2 - b2 * c1) - a1 * (b0 * c2 - b2 * c0) + a2 * (b0 * c1 - b1 * c0)) / 6.0
