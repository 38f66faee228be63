"""One MLS-MPM / APIC step on the dense grid (book §27 "one MPM step"): P2G scatter of mass,
momentum and stress; grid update with gravity and boundary conditions; G2P gather of velocity,
affine matrix C and deformation gradient, followed by the constitutive return mapping and advection.

MLS-MPM form (Hu et al. 2018): with the quadratic B-spline, grad w_ip ~ w_ip D^-1 (x_i - x_p), so
the stress force and the APIC momentum merge into one affine matrix per particle,
A_p = -dt V_p^0 (4 / dx^2) tau_p + m_p C_p, and node i receives m_p w_ip and
w_ip (m_p v_p + A_p (x_i - x_p)). P2G runs colour by colour over particle blocks (see grid.py) so
parallel threads never write the same node. Velocity gradient for F is C: F <- (I + dt C) F.
Units: metres, seconds, kilograms; tau in Pa.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .boundary import particle_kind, project_velocity, sample_field, sample_friction, wall_velocity
from .grid import BLOCK, outside
from .kernels import weights_1d
from .materials import constitutive

PROJECTION_PASSES = 3
"""Passes of the particle-level collider projection per substep."""

SURFACE_TOL = 0.0
"""Grid nodes whose collider distance is below SURFACE_TOL dx get the collider boundary condition:
the nodes inside the collider (phi < 0), as in the book (§29). A band reaching into the material
(0.5 dx, until issue 10) tied every node up to half a cell *above* a rough floor to the floor's
Coulomb friction: a layer 1-2 cells thick then slid with the floor's mu instead of shearing at
the sand's own, weaker friction, so its stopping distance depended on its thickness in cells and
on where the floor fell between nodes. A 2 cm layer launched at 1 m/s on a mu = 1 floor stopped
after 0.052 / 0.069 / 0.062 m at spacing 1 / 0.5 / 0.25 cm (0.052-0.070 over four floor offsets)
with the band, 0.076 / 0.075 / 0.073 m (0.067-0.081) without it (docs/mpm.md, "Runout and
resolution"); the granular collapse's runout converges only without it."""


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _zero_block(b, nb, gm, gv):
    nx, ny, nz = gm.shape
    az = b % nb[2]
    ay = (b // nb[2]) % nb[1]
    ax = b // (nb[2] * nb[1])
    for i in range(ax * BLOCK, min(ax * BLOCK + BLOCK, nx)):
        for j in range(ay * BLOCK, min(ay * BLOCK + BLOCK, ny)):
            for k in range(az * BLOCK, min(az * BLOCK + BLOCK, nz)):
                gm[i, j, k] = 0.0
                gv[i, j, k, 0] = 0.0
                gv[i, j, k, 1] = 0.0
                gv[i, j, k, 2] = 0.0


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def zero_active(active_list, nb, gm, gv):
    """Zero mass and momentum on the active node blocks."""
    for t in prange(active_list.shape[0]):
        _zero_block(active_list[t], nb, gm, gv)


@njit(cache=True, fastmath=False, error_model="numpy")
def zero_active_serial(active_list, nb, gm, gv):
    """Single-threaded zero_active."""
    for t in range(active_list.shape[0]):
        _zero_block(active_list[t], nb, gm, gv)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _scatter(p, x, v, C, tau, mass, vol0, origin, inv_dx, dx, dt, gm, gv):
    g0 = (x[p, 0] - origin[0]) * inv_dx
    g1 = (x[p, 1] - origin[1]) * inv_dx
    g2 = (x[p, 2] - origin[2]) * inv_dx
    b0 = int(math.floor(g0 - 0.5))
    b1 = int(math.floor(g1 - 0.5))
    b2 = int(math.floor(g2 - 0.5))
    f0 = g0 - b0
    f1 = g1 - b1
    f2 = g2 - b2
    wx = weights_1d(f0)
    wy = weights_1d(f1)
    wz = weights_1d(f2)
    m = mass[p]
    s = -dt * vol0[p] * 4.0 * inv_dx * inv_dx
    a00 = s * tau[p, 0, 0] + m * C[p, 0, 0]
    a01 = s * tau[p, 0, 1] + m * C[p, 0, 1]
    a02 = s * tau[p, 0, 2] + m * C[p, 0, 2]
    a10 = s * tau[p, 1, 0] + m * C[p, 1, 0]
    a11 = s * tau[p, 1, 1] + m * C[p, 1, 1]
    a12 = s * tau[p, 1, 2] + m * C[p, 1, 2]
    a20 = s * tau[p, 2, 0] + m * C[p, 2, 0]
    a21 = s * tau[p, 2, 1] + m * C[p, 2, 1]
    a22 = s * tau[p, 2, 2] + m * C[p, 2, 2]
    mv0 = m * v[p, 0]
    mv1 = m * v[p, 1]
    mv2 = m * v[p, 2]
    for i in range(3):
        d0 = (i - f0) * dx
        for j in range(3):
            d1 = (j - f1) * dx
            wij = wx[i] * wy[j]
            for k in range(3):
                d2 = (k - f2) * dx
                w = wij * wz[k]
                gm[b0 + i, b1 + j, b2 + k] += w * m
                gv[b0 + i, b1 + j, b2 + k, 0] += w * (mv0 + a00 * d0 + a01 * d1 + a02 * d2)
                gv[b0 + i, b1 + j, b2 + k, 1] += w * (mv1 + a10 * d0 + a11 * d1 + a12 * d2)
                gv[b0 + i, b1 + j, b2 + k, 2] += w * (mv2 + a20 * d0 + a21 * d1 + a22 * d2)


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def p2g(x, v, C, tau, mass, vol0, order, start, colour_blocks, colour_start, origin, dx, dt, gm, gv):
    """Scatter particle mass (kg), momentum plus APIC affine momentum and stress impulse (kg m/s)
    to the grid, colour by colour (race-free).

    Every node receives its sum in one order whatever the thread count: colour after colour, and
    within a colour from one block only (blocks of a colour write disjoint nodes), in that block's
    particle order (the stable counting sort's). ``p2g_serial`` adds in this same order, so the
    threaded and the single-threaded kernels give the same bits."""
    inv_dx = 1.0 / dx
    for c in range(8):
        for t in prange(colour_start[c], colour_start[c + 1]):
            b = colour_blocks[t]
            for idx in range(start[b], start[b + 1]):
                _scatter(order[idx], x, v, C, tau, mass, vol0, origin, inv_dx, dx, dt, gm, gv)


@njit(cache=True, fastmath=False, error_model="numpy")
def p2g_serial(x, v, C, tau, mass, vol0, order, start, colour_blocks, colour_start, origin, dx, dt, gm, gv):
    """Single-threaded P2G, for small particle counts (waking threads on a busy machine costs more
    than the work): ``p2g``'s blocks in ``p2g``'s order (colour after colour), so every node's sum
    has the same bits as the threaded kernel's. Scattering in particle index order instead (the
    kernel before) rounded the sums differently: the MPM bakes' float64 state differed from the
    second frame on between one thread and two, and an elastic bake's .pc2 bytes too. Particles
    outside the domain box (open domain) are in no block and skipped."""
    inv_dx = 1.0 / dx
    for t in range(colour_start[8]):
        b = colour_blocks[t]
        for idx in range(start[b], start[b + 1]):
            _scatter(order[idx], x, v, C, tau, mass, vol0, origin, inv_dx, dx, dt, gm, gv)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _update_block(b, nb, gm, gv, origin, dx, dt, gravity, lo, hi, walls, wall_mu, wall_kind,
                  has_colliders, phi, cnormal, cvel, cmu, coll_kind):
    nx, ny, nz = gm.shape
    az = b % nb[2]
    ay = (b // nb[2]) % nb[1]
    ax = b // (nb[2] * nb[1])
    for i in range(ax * BLOCK, min(ax * BLOCK + BLOCK, nx)):
        for j in range(ay * BLOCK, min(ay * BLOCK + BLOCK, ny)):
            for k in range(az * BLOCK, min(az * BLOCK + BLOCK, nz)):
                m = gm[i, j, k]
                if m <= 0.0:
                    continue
                v0 = gv[i, j, k, 0] / m + dt * gravity[0]
                v1 = gv[i, j, k, 1] / m + dt * gravity[1]
                v2 = gv[i, j, k, 2] / m + dt * gravity[2]
                if has_colliders and phi[i, j, k] < SURFACE_TOL * dx:  # inside the collider
                    v0, v1, v2 = project_velocity(v0, v1, v2, cnormal[i, j, k, 0], cnormal[i, j, k, 1],
                                                  cnormal[i, j, k, 2], cvel[i, j, k, 0], cvel[i, j, k, 1],
                                                  cvel[i, j, k, 2], cmu[i, j, k], coll_kind)
                if walls:
                    v0, v1, v2 = wall_velocity(origin[0] + i * dx, origin[1] + j * dx, origin[2] + k * dx,
                                               v0, v1, v2, lo, hi, wall_mu, wall_kind)
                gv[i, j, k, 0] = v0
                gv[i, j, k, 1] = v1
                gv[i, j, k, 2] = v2


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def grid_update(active_list, nb, gm, gv, origin, dx, dt, gravity, lo, hi, walls, wall_mu, wall_kind,
                has_colliders, phi, cnormal, cvel, cmu, coll_kind):
    """Momentum -> velocity (m/s), add gravity dt, then colliders and (``walls``: a walled box)
    the domain walls (boundary.py), on the active node blocks. Nodes without mass are left at zero."""
    for t in prange(active_list.shape[0]):
        _update_block(active_list[t], nb, gm, gv, origin, dx, dt, gravity, lo, hi, walls, wall_mu, wall_kind,
                      has_colliders, phi, cnormal, cvel, cmu, coll_kind)


@njit(cache=True, fastmath=False, error_model="numpy")
def grid_update_serial(active_list, nb, gm, gv, origin, dx, dt, gravity, lo, hi, walls, wall_mu, wall_kind,
                       has_colliders, phi, cnormal, cvel, cmu, coll_kind):
    """Single-threaded grid_update."""
    for t in range(active_list.shape[0]):
        _update_block(active_list[t], nb, gm, gv, origin, dx, dt, gravity, lo, hi, walls, wall_mu, wall_kind,
                      has_colliders, phi, cnormal, cvel, cmu, coll_kind)


@njit(cache=True, fastmath=False, error_model="numpy")
def _gather_range(p_lo, p_hi, x, v, C, F, tau, plastic, mat, params, origin, dx, dt, gv, lo, hi, walls, gravity,
                  wall_mu, wall_kind, has_colliders, phi, cnormal, cvel, cfric, coll_kind):
    inv_dx = 1.0 / dx
    dinv = 4.0 * inv_dx * inv_dx
    U = np.empty((3, 3))
    V = np.empty((3, 3))
    W = np.empty((3, 3))
    Fn = np.empty((3, 3))
    Cp = np.empty((3, 3))
    T = np.empty((3, 3))
    sig = np.empty(3)
    diag = np.empty(3)
    pkw = particle_kind(wall_kind)
    pkc = particle_kind(coll_kind)
    for p in range(p_lo, p_hi):
        if not walls and outside(x, p, lo, hi):
            # off the grid (open domain): free fall, x += dt v with v += dt g (semi-implicit Euler)
            for d in range(3):
                v[p, d] += dt * gravity[d]
                x[p, d] += dt * v[p, d]
            continue
        g0 = (x[p, 0] - origin[0]) * inv_dx
        g1 = (x[p, 1] - origin[1]) * inv_dx
        g2 = (x[p, 2] - origin[2]) * inv_dx
        b0 = int(math.floor(g0 - 0.5))
        b1 = int(math.floor(g1 - 0.5))
        b2 = int(math.floor(g2 - 0.5))
        f0 = g0 - b0
        f1 = g1 - b1
        f2 = g2 - b2
        wx = weights_1d(f0)
        wy = weights_1d(f1)
        wz = weights_1d(f2)
        nv0 = 0.0
        nv1 = 0.0
        nv2 = 0.0
        for a in range(3):
            for c in range(3):
                Cp[a, c] = 0.0
        for i in range(3):
            d0 = (i - f0) * dx
            for j in range(3):
                d1 = (j - f1) * dx
                wij = wx[i] * wy[j]
                for k in range(3):
                    d2 = (k - f2) * dx
                    w = wij * wz[k]
                    u0 = gv[b0 + i, b1 + j, b2 + k, 0]
                    u1 = gv[b0 + i, b1 + j, b2 + k, 1]
                    u2 = gv[b0 + i, b1 + j, b2 + k, 2]
                    nv0 += w * u0
                    nv1 += w * u1
                    nv2 += w * u2
                    Cp[0, 0] += w * u0 * d0
                    Cp[0, 1] += w * u0 * d1
                    Cp[0, 2] += w * u0 * d2
                    Cp[1, 0] += w * u1 * d0
                    Cp[1, 1] += w * u1 * d1
                    Cp[1, 2] += w * u1 * d2
                    Cp[2, 0] += w * u2 * d0
                    Cp[2, 1] += w * u2 * d1
                    Cp[2, 2] += w * u2 * d2
        for a in range(3):
            for c in range(3):
                Cp[a, c] *= dinv
                C[p, a, c] = Cp[a, c]
        # F <- (I + dt C) F
        for a in range(3):
            for c in range(3):
                Fn[a, c] = F[p, a, c] + dt * (Cp[a, 0] * F[p, 0, c] + Cp[a, 1] * F[p, 1, c] + Cp[a, 2] * F[p, 2, c])
        plastic[p] = constitutive(Fn, Cp, plastic[p], params[mat[p]], U, sig, V, W, diag, T)
        for a in range(3):
            for c in range(3):
                F[p, a, c] = Fn[a, c]
                tau[p, a, c] = T[a, c]
        # advection, then particle-level obstacles
        y0 = x[p, 0] + dt * nv0
        y1 = x[p, 1] + dt * nv1
        y2 = x[p, 2] + dt * nv2
        if has_colliders:
            # project back along the interpolated normal; a few passes because near edges and
            # corners the normal blends two faces and one pass may stop short of the surface
            for _it in range(PROJECTION_PASSES):
                ph, n0, n1, n2, c0, c1, c2 = sample_field(phi, cnormal, cvel, origin, inv_dx, y0, y1, y2)
                if not ph < 0.0:
                    break
                y0 -= ph * n0
                y1 -= ph * n1
                y2 -= ph * n2
                mu = sample_friction(cfric, origin, inv_dx, y0, y1, y2)
                nv0, nv1, nv2 = project_velocity(nv0, nv1, nv2, n0, n1, n2, c0, c1, c2, mu, pkc)
        # domain walls: clamp into the box; the velocity gets the wall's condition, with friction
        for d in range(3 if walls else 0):
            s = 0.0
            if d == 0:
                if y0 < lo[0]:
                    y0 = lo[0]
                    s = 1.0
                elif y0 > hi[0]:
                    y0 = hi[0]
                    s = -1.0
            elif d == 1:
                if y1 < lo[1]:
                    y1 = lo[1]
                    s = 1.0
                elif y1 > hi[1]:
                    y1 = hi[1]
                    s = -1.0
            else:
                if y2 < lo[2]:
                    y2 = lo[2]
                    s = 1.0
                elif y2 > hi[2]:
                    y2 = hi[2]
                    s = -1.0
            if s != 0.0:
                nv0, nv1, nv2 = project_velocity(nv0, nv1, nv2, s if d == 0 else 0.0, s if d == 1 else 0.0,
                                                 s if d == 2 else 0.0, 0.0, 0.0, 0.0, wall_mu, pkw)
        x[p, 0] = y0
        x[p, 1] = y1
        x[p, 2] = y2
        v[p, 0] = nv0
        v[p, 1] = nv1
        v[p, 2] = nv2


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def g2p(x, v, C, F, tau, plastic, mat, params, origin, dx, dt, gv, lo, hi, walls, gravity, wall_mu, wall_kind,
        has_colliders, phi, cnormal, cvel, cfric, coll_kind, nchunks):
    """Gather velocity and C = (4/dx^2) sum w v (x_i - x_p)^T, update F <- (I + dt C) F, return-map
    and compute the stress for the next step, advect x += dt v, then project particles that left
    the domain box (``walls``) or entered a collider back onto its surface. In an open domain
    (walls False) particles outside the box lo..hi fall freely under ``gravity`` (m/s^2), off the
    grid. Arrays are updated in place; nchunks = 1 runs single-threaded."""
    n = x.shape[0]
    if nchunks == 1:
        _gather_range(0, n, x, v, C, F, tau, plastic, mat, params, origin, dx, dt, gv, lo, hi, walls, gravity,
                      wall_mu, wall_kind, has_colliders, phi, cnormal, cvel, cfric, coll_kind)
        return
    for chunk in prange(nchunks):
        _gather_range(chunk * n // nchunks, (chunk + 1) * n // nchunks, x, v, C, F, tau, plastic, mat, params,
                      origin, dx, dt, gv, lo, hi, walls, gravity, wall_mu, wall_kind, has_colliders, phi, cnormal,
                      cvel, cfric, coll_kind)


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def init_stress(F, C, tau, plastic, mat, params, nchunks):
    """Return-map the initial F and compute the initial Kirchhoff stress (Pa) of every particle."""
    n = F.shape[0]
    for chunk in prange(nchunks):
        U = np.empty((3, 3))
        V = np.empty((3, 3))
        W = np.empty((3, 3))
        Fn = np.empty((3, 3))
        Cp = np.empty((3, 3))
        T = np.empty((3, 3))
        sig = np.empty(3)
        diag = np.empty(3)
        for p in range(chunk * n // nchunks, (chunk + 1) * n // nchunks):
            for a in range(3):
                for c in range(3):
                    Fn[a, c] = F[p, a, c]
                    Cp[a, c] = C[p, a, c]
            plastic[p] = constitutive(Fn, Cp, plastic[p], params[mat[p]], U, sig, V, W, diag, T)
            for a in range(3):
                for c in range(3):
                    F[p, a, c] = Fn[a, c]
                    tau[p, a, c] = T[a, c]


@njit(cache=True, fastmath=False, error_model="numpy")
def max_speed(v, x, lo, hi):
    """Largest speed (m/s) of the particles inside the domain box lo..hi (those on the grid, which
    bound the time step; particles falling off the grid in an open domain do not)."""
    m = 0.0
    for p in range(v.shape[0]):
        if outside(x, p, lo, hi):
            continue
        s = v[p, 0] * v[p, 0] + v[p, 1] * v[p, 1] + v[p, 2] * v[p, 2]
        if s > m:
            m = s
    return math.sqrt(m)
