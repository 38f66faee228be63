"""The block-descent sweep: Gauss-Seidel over colours, a 3x3 Newton step per vertex, Chebyshev
acceleration across sweeps, inside the displacement bounds of the last contact detection.

Per vertex i (book "Optimization time integrator" restricted to one vertex; VBD Sec. 3):
  g_i = m_i/h^2 (x_i - y_i) + dPsi/dx_i + kappa dB/dx_i + dD/dx_i,   H_i = m_i/h^2 I + blocks,
  x_i <- x_i - H_i^{-1} g_i,
then the move is cut at the vertex's admissible set (bounds.py: a ball cut by one half-space per
nearby contact pair; the rest of the move slides along the blocking constraint) and, when the
vertex belongs to tetrahedra, shortened so each of them keeps at least VOLUME_KEEP of its volume:
a tet's volume is affine in one vertex's position, so the test is exact. Pins step straight to
their targets, bounded the same way; colliders move rigidly by the largest common fraction of
their keyframed motion that all their vertices admit. Everything runs in one numba call per batch of sweeps (no Python per colour or vertex).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import affine_block as _affine
from .bounds import VOLUME_KEEP, half_space_slack, ray_fraction, ray_fraction_skip

SLIDE_TOL = 1e-9   # a slid point may sit this fraction of the blocking bound outside it (rounding)
from .dihedral_cache import dihedrals_all, refresh_dihedrals, shell_vertex_cached
from .vertex_contact import barrier_vertex, contact_scratch, friction_vertex, may_be_active, moves_from_centre
from .vertex_elastic import bending_vertex, membrane_vertex, shell_vertex_scratch, rod_stretch_vertex, tet_vertex, tet_volume_moving

TRUNC_SLACK = 1.0e-9   # relative: a step cut by more than this counts as truncated
PARALLEL_MIN_VERTICES = 200  # a colour this large is swept on numba's threads (when the caller allows); cloth
                             # bending stencils need 9 colours on a grid, ~470 vertices each at 64^2
CUT_PATIENCE = 8       # sweeps with a few cut vertices before the caller re-detects


@njit(cache=True, fastmath=False)
def _solve3(H, g, out):
    """out = H^{-1} g for a symmetric positive definite 3x3 H (adjugate; det > 0)."""
    a, b, c = H[0, 0], H[0, 1], H[0, 2]
    d, e, f = H[1, 1], H[1, 2], H[2, 2]
    A = d * f - e * e
    B = c * e - b * f
    C = b * e - c * d
    det = a * A + b * B + c * C
    if not (det > 0.0) or not math.isfinite(det):
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
        return False
    D = a * f - c * c
    E = b * c - a * e
    Fv = a * d - b * b
    out[0] = (A * g[0] + B * g[1] + C * g[2]) / det
    out[1] = (B * g[0] + D * g[1] + E * g[2]) / det
    out[2] = (C * g[0] + E * g[1] + Fv * g[2]) / det
    return True


@njit(cache=True, fastmath=False, inline="always")
def _membranes(v, x, EL, g, H):
    tris, tri_Dm, tri_w, tri_mu, tri_lam = EL.tris, EL.tri_Dm_inv, EL.tri_w, EL.tri_mu, EL.tri_lam
    vt_s, vt_e, vt_k = EL.tri_start, EL.tri_elem, EL.tri_slot
    for j in range(vt_s[v], vt_s[v + 1]):
        e = vt_e[j]
        membrane_vertex(x, tris[e], tri_Dm[e], tri_w[e], tri_mu[e], tri_lam[e], vt_k[j], g, H, True)


@njit(cache=True, fastmath=False, inline="always")
def _solid_and_rod_terms(v, x, EL, g, H, J, s5, dv, r):
    """Tets, rod stretch and rod bends at vertex v."""
    tets, tet_Dm, tet_vol, tet_mu, tet_lam, tet_model = (EL.tets, EL.tet_Dm_inv, EL.tet_vol, EL.tet_mu, EL.tet_lam,
                                                         EL.tet_model)
    vT_s, vT_e, vT_k = EL.tet_start, EL.tet_elem, EL.tet_slot
    rods, rod_rest, rod_k, vr_s, vr_e, vr_k = EL.rods, EL.rod_rest, EL.rod_k, EL.rod_start, EL.rod_elem, EL.rod_slot
    rb, rb_kw, rb_d0, vb_s, vb_e, vb_k = EL.bends, EL.bend_kw, EL.bend_d0, EL.bend_start, EL.bend_elem, EL.bend_slot
    for j in range(vT_s[v], vT_s[v + 1]):
        e = vT_e[j]
        tet_vertex(x, tets[e], tet_Dm[e], tet_vol[e], tet_mu[e], tet_lam[e], tet_model[e], vT_k[j], g, H, True)
    for j in range(vr_s[v], vr_s[v + 1]):
        e = vr_e[j]
        rod_stretch_vertex(x, rods[e], rod_rest[e], rod_k[e], vr_k[j], g, H)
    for j in range(vb_s[v], vb_s[v + 1]):
        e = vb_e[j]
        bending_vertex(1, x, rb[e], rb_kw[e], rb_d0[e], vb_k[j], g, H, J, s5, dv, r)


@njit(cache=True, fastmath=False, inline="always")
def elastic_vertex(v, x, EL, g, H, J, s5, dv, r):
    """Add every elastic term's gradient (N) and PSD block (N/m) at vertex v into g (3,), H (3, 3):
    the membranes, cloth bending triangles, tets, rod stretch and rod bends that touch v
    (EL: incidence.Elements)."""
    shl, shl_K, shl_t0 = EL.shells, EL.shell_K, EL.shell_th0
    vh_s, vh_e, vh_k = EL.shell_start, EL.shell_elem, EL.shell_slot
    _membranes(v, x, EL, g, H)
    for j in range(vh_s[v], vh_s[v + 1]):
        e = vh_e[j]
        shell_vertex_scratch(x, shl[e], shl_K[e], shl_t0[e], vh_k[j], g, H, J, s5, r)
    _solid_and_rod_terms(v, x, EL, g, H, J, s5, dv, r)


@njit(cache=True, fastmath=False, inline="always")
def _cloth_and_contact_terms(v, x, y, mass, inv_h2, EL, SH, CT, FR, g, H, SC, ja):
    """Set g (3,), H (3, 3) of vertex v to its inertia, membrane, cloth bending, barrier and friction
    terms (no allocation: this runs inside the reference-count-free vertex_terms)."""
    mh = mass[v] * inv_h2
    for a in range(3):
        g[a] = mh * (x[v, a] - y[v, a])
        for b in range(3):
            H[a, b] = mh if a == b else 0.0
    _membranes(v, x, EL, g, H)
    shl_K, shl_t0, vh_s, vh_e, vh_k = EL.shell_K, EL.shell_th0, EL.shell_start, EL.shell_elem, EL.shell_slot
    slot_edge, slot_flip, th, gr, ok = SH.slot_edge, SH.slot_flip, SH.theta, SH.grad, SH.ok
    for j in range(vh_s[v], vh_s[v + 1]):
        e = vh_e[j]
        shell_vertex_cached(e, vh_k[j], shl_K[e], shl_t0[e], slot_edge, slot_flip, th, gr, ok, g, H, ja)
    pids, pee, poff, peps, dhat, kappa = CT.ids, CT.is_ee, CT.off, CT.epsx, CT.dhat, CT.kappa
    vp_s, vp_e, vp_k, ps0, pD = CT.start, CT.pair, CT.slot, CT.s0, CT.D
    for j in range(vp_s[v], vp_s[v + 1]):
        k = vp_e[j]
        if not may_be_active(pD, pids, pee, ps0, k, dhat):
            continue
        barrier_vertex(x, pids, pee, poff, peps, k, vp_k[j], dhat, kappa, g, H, SC)
    fids, fcoef, fT, fml, x_fr, eps_f = FR.ids, FR.coef, FR.T, FR.mu_lambda, FR.x_ref, FR.eps
    vf_s, vf_e, vf_k = FR.start, FR.pair, FR.slot
    for j in range(vf_s[v], vf_s[v + 1]):
        friction_vertex(x, x_fr, fids, fcoef, fT, fml, vf_e[j], vf_k[j], eps_f, g, H)


@njit(cache=True, fastmath=False, _nrt=False)
def vertex_terms(verts, x, y, mass, inv_h2, skip, EL, SH, CT, FR, G, HH, SC, ja):
    """G[j] (N), HH[j] (N/m) = the inertia, membrane, cloth bending, barrier and friction terms of
    vertex verts[j] (not where skip[v]). Compiled without reference counting (_nrt=False; nothing
    here allocates), and one call covers many vertices: per vertex, numba otherwise increments and
    decrements the count of every array it binds (~60 here, atomically) and passes the element
    tuples by value to each call, which together cost 0.55 of the 3.5 us a vertex took on the 64^2
    drape. The tet and rod terms, which allocate (SVDs), are added by solid_terms."""
    for j in range(verts.shape[0]):
        v = verts[j]
        if skip[v]:
            continue
        _cloth_and_contact_terms(v, x, y, mass, inv_h2, EL, SH, CT, FR, G[j], HH[j], SC, ja)


@njit(cache=True, fastmath=False)
def solid_terms(verts, x, skip, EL, G, HH):
    """Add the tet, rod-stretch and rod-bend terms of vertex verts[j] to G[j], HH[j] (vertex_terms)."""
    vT_s, vr_s, vb_s = EL.tet_start, EL.rod_start, EL.bend_start
    J = np.zeros((3, 12))
    s5 = np.empty((5, 3))
    dv = np.empty(3)
    r = np.empty(3)
    for j in range(verts.shape[0]):
        v = verts[j]
        if not skip[v] and (vT_s[v] < vT_s[v + 1] or vr_s[v] < vr_s[v + 1] or vb_s[v] < vb_s[v + 1]):
            _solid_and_rod_terms(v, x, EL, G[j], HH[j], J, s5, dv, r)


@njit(cache=True, fastmath=False)
def _vertex_step(v, x, y, mass, inv_h2, EL, SH, CT, FR, g, H, J, s5, dv, r, SC, p):
    """One vertex through the sweep's kernels (vertex_terms, solid_terms, then the local Newton
    solve): g (3,) N, H (3, 3) N/m and the Newton target p (3,); False when H is singular. For
    checks of the assembled terms (tests); the sweep itself runs whole colours."""
    vs = np.full(1, v, np.int32)
    skip = np.zeros(x.shape[0], np.bool_)
    moves_from_centre(x, CT.centre, vs[:0], CT.D)
    G = np.empty((1, 3))
    HH = np.empty((1, 3, 3))
    vertex_terms(vs, x, y, mass, inv_h2, skip, EL, SH, CT, FR, G, HH, SC, s5[0:3])
    solid_terms(vs, x, skip, EL, G, HH)
    for a in range(3):
        g[a] = G[0, a]
        for b in range(3):
            H[a, b] = HH[0, a, b]
    ok = _solve3(H, g, dv)
    for a in range(3):
        p[a] = x[v, a] - dv[a]
    return ok


@njit(cache=True, fastmath=False, _nrt=False)
def _moves(j0, j1, verts, x, mass, inv_h2, presc, group, target, BD, EL, G, HH, newp, stat, cur, dxs, nb, p, dv):
    """newp[j], stat[j] of verts[j0:j1] from their terms G[j - j0], HH[j - j0] (vertex_terms):
    the Newton target cut to the admissible set (no allocation, no reference counting)."""
    for j in range(j0, j1):
        v = verts[j]
        res = 0.0
        if group[v] >= 0:  # collider vertex: moved with its body by _move_colliders
            for a in range(3):
                newp[j, a] = x[v, a]
            stat[j, 0] = 0.0
            stat[j, 1] = 0
            continue
        if presc[v]:
            for a in range(3):
                p[a] = target[v, a]
        else:
            g = G[j - j0]
            if _solve3(HH[j - j0], g, dv):
                for a in range(3):
                    p[a] = x[v, a] - dv[a]
            else:
                for a in range(3):
                    p[a] = x[v, a]
            res = math.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]) / (mass[v] * inv_h2)
        cut = _admissible_move_s(v, x, p, BD, EL, True, cur, dxs, nb)
        for a in range(3):
            newp[j, a] = p[a]
        stat[j, 0] = res
        stat[j, 1] = cut


@njit(cache=True, fastmath=False, inline="always")
def _admissible_move(v, x, p, BD, EL, slide):
    """Replace the target p of vertex v by an admissible one: along the ray x_v -> p up to the
    first constraint, then (if ``slide``) the rest of the move with its component into that
    constraint removed, again up to the first constraint; finally shortened so every incident tet
    keeps VOLUME_KEEP of its volume. Returns 1 if a constraint cut the move."""
    return _admissible_move_s(v, x, p, BD, EL, slide, np.empty(3), np.empty(3), np.empty(3))


@njit(cache=True, fastmath=False, _nrt=False)
def _admissible_move_s(v, x, p, BD, EL, slide, cur, dx, nb):
    """_admissible_move with caller-provided scratch cur, dx, nb (3,): no allocation per vertex
    (and compiled without reference counting, as _cloth_and_contact_terms)."""
    for a in range(3):
        cur[a] = x[v, a]
        dx[a] = p[a] - cur[a]
    t, blk = ray_fraction_skip(v, cur, dx, BD, nb, -1)
    cut = 0
    if t < 1.0:
        cut = 1
        for a in range(3):
            p[a] = cur[a] + t * dx[a]
        if slide and (nb[0] != 0.0 or nb[1] != 0.0 or nb[2] != 0.0):
            rest = 1.0 - t
            into = rest * (dx[0] * nb[0] + dx[1] * nb[1] + dx[2] * nb[2])
            for a in range(3):
                cur[a] = p[a]
                dx[a] = rest * dx[a] - max(into, 0.0) * nb[a]
            # the slide lies in the blocking half-space's plane: skip that constraint (its component
            # along the slide is rounding noise), then keep the slid point only if it is outside that
            # half-space by no more than SLIDE_TOL of its bound (rounding; the bounds use GAMMA = 0.4
            # of the clearance where 1/2 would still be safe); the cut point stands otherwise
            t2, b2 = ray_fraction_skip(v, cur, dx, BD, nb, blk if blk >= 0 else -1)
            for a in range(3):
                p[a] = cur[a] + t2 * dx[a]
            if blk >= 0 and half_space_slack(v, blk, p, BD) < -SLIDE_TOL * BD.cs_b[blk]:
                for a in range(3):
                    p[a] = cur[a]
    tets = EL.tets
    vT_s, vT_e, vT_k = EL.tet_start, EL.tet_elem, EL.tet_slot
    t = 1.0
    for j in range(vT_s[v], vT_s[v + 1]):
        e = vT_e[j]
        V0 = tet_volume_moving(x, tets[e], vT_k[j], x[v])
        V1 = tet_volume_moving(x, tets[e], vT_k[j], p)
        floor = VOLUME_KEEP * V0
        if V1 < floor and V0 > V1:
            t = min(t, (V0 - floor) / (V0 - V1))
    if t < 1.0:
        t = max(t, 0.0)
        for a in range(3):
            p[a] = x[v, a] + t * (p[a] - x[v, a])
    return cut


@njit(cache=True, fastmath=False)
def _move_colliders(x, target, group, n_groups, BD):
    """Move each prescribed body (group >= 0: a collider) rigidly along its keyframed motion by one
    common fraction of the way, the largest every vertex of it admits: a collider never deforms.
    Returns True when some collider stopped short (cloth or another body in the way): the caller
    re-detects, which lets it go on as the bodies in its way move."""
    if n_groups == 0:
        return False
    frac = np.ones(n_groups)
    nb = np.empty(3)
    cur = np.empty(3)
    dx = np.empty(3)
    for v in range(x.shape[0]):
        gi = group[v]
        if gi < 0:
            continue
        moving = False
        for a in range(3):
            cur[a] = x[v, a]
            dx[a] = target[v, a] - x[v, a]
            if dx[a] != 0.0:
                moving = True
        if moving:
            frac[gi] = min(frac[gi], ray_fraction(v, cur, dx, BD, nb))
    for v in range(x.shape[0]):
        gi = group[v]
        if gi < 0:
            continue
        t = frac[gi]
        if t >= 1.0:
            for a in range(3):
                x[v, a] = target[v, a]
        else:
            for a in range(3):
                x[v, a] = x[v, a] + t * (target[v, a] - x[v, a])
    return frac.min() < 1.0


@njit(cache=True, fastmath=False)
def _sweep_range(j0, j1, verts, x, y, mass, inv_h2, presc, group, target, BD, EL, SH, CT, FR, newp, stat, skip):
    """New positions of verts[j0:j1] into newp; stat[j] = (residual length (m), cut): the residual
    length is |g_i| h^2 / m_i, the move the vertex's force would cause on its inertia alone. The
    vertices of one colour are independent, so all their terms are gathered first, then moved.
    skip (n,): prescribed and collider vertices (no terms)."""
    m = j1 - j0
    G = np.empty((m, 3))
    HH = np.empty((m, 3, 3))
    vs = verts[j0:j1]
    vertex_terms(vs, x, y, mass, inv_h2, skip, EL, SH, CT, FR, G, HH, contact_scratch(), np.empty((3, 3)))
    solid_terms(vs, x, skip, EL, G, HH)
    _moves(j0, j1, verts, x, mass, inv_h2, presc, group, target, BD, EL, G, HH, newp, stat, np.empty(3),
           np.empty(3), np.empty(3), np.empty(3), np.empty(3))


@njit(cache=True, fastmath=False, parallel=True)
def _sweep_color_parallel(verts, x, y, mass, inv_h2, presc, group, target, BD, EL, SH, CT, FR, newp, stat, skip):
    """One colour's new positions, chunks of vertices on numba's threads."""
    nv = verts.shape[0]
    nch = max(1, min(nv, 32))
    for ch in prange(nch):
        _sweep_range(ch * nv // nch, (ch + 1) * nv // nch, verts, x, y, mass, inv_h2, presc, group, target, BD,
                     EL, SH, CT, FR, newp, stat, skip)


@njit(cache=True, fastmath=False)
def _sweep_color(verts, x, y, mass, inv_h2, presc, group, target, BD, EL, SH, CT, FR, newp, stat, parallel, skip):
    """Update one colour (Jacobi inside it): new positions first, then written back. ``parallel``
    False skips numba's parallel launch, which costs more than it saves on small colours or a
    busy machine (threads.py); then the dihedral cache of the moved vertices is refreshed."""
    nv = verts.shape[0]
    if parallel:
        _sweep_color_parallel(verts, x, y, mass, inv_h2, presc, group, target, BD, EL, SH, CT, FR, newp, stat, skip)
    else:
        _sweep_range(0, nv, verts, x, y, mass, inv_h2, presc, group, target, BD, EL, SH, CT, FR, newp, stat, skip)
    for j in range(nv):
        v = verts[j]
        for a in range(3):
            x[v, a] = newp[j, a]
    refresh_dihedrals(x, verts, SH.v_start, SH.v_edge, SH.quad, SH.theta, SH.grad, SH.ok, parallel)
    moves_from_centre(x, CT.centre, verts, CT.D)


@njit(cache=True, fastmath=False)
def _accelerate(x, xbar, x_prev2, omega, presc, BD, EL, vol_before):
    """x = omega (xbar - x_prev2) + x_prev2 for free vertices, each cut back along its ray from xbar
    to its admissible set; falls back to xbar (returns False) if any tet would keep less than
    VOLUME_KEEP of its volume at xbar (all vertices move at once, so the per-vertex test is not
    enough here)."""
    n = x.shape[0]
    p = np.empty(3)
    cur = np.empty(3)
    dx = np.empty(3)
    nb = np.empty(3)
    for v in range(n):
        if presc[v]:
            continue
        for a in range(3):
            cur[a] = xbar[v, a]
            dx[a] = omega * (xbar[v, a] - x_prev2[v, a]) + x_prev2[v, a] - xbar[v, a]
        t = ray_fraction(v, cur, dx, BD, nb)
        for a in range(3):
            x[v, a] = cur[a] + t * dx[a]
    tets = EL.tets
    for e in range(tets.shape[0]):
        V = tet_volume_moving(x, tets[e], 0, x[tets[e, 0]])
        if V < VOLUME_KEEP * vol_before[e]:
            for v in range(n):
                for a in range(3):
                    x[v, a] = xbar[v, a]
            return False
    return True


@njit(cache=True, fastmath=False)
def initial_guess(x, y, presc, BD, EL):
    """Start a step from the inertia target y (exact for free flight and rigid translation),
    each free vertex moved towards it as far as its admissible set allows; reverted if a tet
    would lose more than 1 - VOLUME_KEEP of its volume."""
    n = x.shape[0]
    tets = EL.tets
    vol_before = np.empty(tets.shape[0])
    _tet_volumes(x, tets, vol_before)
    x_old = x.copy()
    p = np.empty(3)
    nb = np.empty(3)
    cur = np.empty(3)
    dx = np.empty(3)
    for v in range(n):
        if presc[v]:
            continue
        for a in range(3):
            cur[a] = x_old[v, a]
            dx[a] = y[v, a] - x_old[v, a]
        t = ray_fraction(v, cur, dx, BD, nb)
        for a in range(3):
            x[v, a] = cur[a] + t * dx[a]
    for e in range(tets.shape[0]):
        V = tet_volume_moving(x, tets[e], 0, x[tets[e, 0]])
        if V < VOLUME_KEEP * vol_before[e]:
            x[:, :] = x_old
            return False
    return True


@njit(cache=True, fastmath=False)
def _tet_volumes(x, tets, out):
    for e in range(tets.shape[0]):
        out[e] = tet_volume_moving(x, tets[e], 0, x[tets[e, 0]])


@njit(cache=True, fastmath=False)
def run_sweeps(max_sweeps, x, y, mass, inv_h2, presc, group, n_groups, target, BD, EL, SH, CT, FR,
               col_start, col_verts, rho, tol, presc_tol, x_prev1, x_prev2, k_cheb, omega, cut_limit, parallel, out,
               AB):
    """Up to max_sweeps Gauss-Seidel sweeps over all colours, then the affine bodies, with Chebyshev
    acceleration after a sweep that cut no vertex (spectral-radius estimate rho; 0 switches it off,
    the stepper's setting). Stops early (out[3] = 1) when, in the last sweep, the largest residual
    length is below tol (m): over the free vertices |g_i| h^2 / m_i, the move vertex i's force would
    cause on its inertia alone, evaluated at its position before its own update in that sweep, and
    over the affine bodies their residual length (affine_block.affine_sweep) -- and every prescribed
    vertex is within presc_tol (m) of its target and every keyframed body at its target. The size of
    the moves the sweep made is not a stop test. Also stops when a collider's move was blocked by its
    admissible set two or more sweeps after the detection, when the admissible sets cut the steps of
    cut_limit vertices in one sweep, or of any vertex once CUT_PATIENCE sweeps have passed since the
    detection (out[2] = vertices cut: the caller re-detects contact, which re-centres the sets).
    x_prev1/x_prev2, the sweep count k_cheb and omega carry the acceleration across calls.
    out = (sweeps done, largest free residual length (m), cut, converged, Chebyshev count, omega after).
    AB: the affine bodies (affine_block.AffinePack), each one 12-DOF block updated after the
    vertex colours of every sweep; their vertices are prescribed here (presc) and left out of the colours."""
    n = x.shape[0]
    tets = EL.tets
    vol_before = np.empty(tets.shape[0])
    ncol = col_start.shape[0] - 1
    maxlen = 0
    for c in range(ncol):
        maxlen = max(maxlen, col_start[c + 1] - col_start[c])
    newp = np.empty((maxlen, 3))
    stat = np.empty((maxlen, 2))
    xbar = np.empty_like(x)
    skip = presc.copy()     # no terms for prescribed or collider vertices
    for v in range(n):
        if group[v] >= 0:
            skip[v] = True
    bstat = np.zeros(3)
    dihedrals_all(x, SH.quad, SH.theta, SH.grad, SH.ok)
    done = 0
    since_detect = 0
    big = 0.0
    cut = 0
    conv = 0
    for it in range(max_sweeps):
        blocked = _move_colliders(x, target, group, n_groups, BD)
        moves_from_centre(x, CT.centre, col_verts[:0], CT.D)   # every vertex: colliders, bodies and the
                                                               # acceleration moved some since the last sweep
        if blocked and since_detect >= 2:
            cut = cut_limit
            break
        for v in range(n):
            for a in range(3):
                x_prev2[v, a] = x_prev1[v, a]
                x_prev1[v, a] = x[v, a]
        big = 0.0
        cut = 0
        for c in range(ncol):
            verts = col_verts[col_start[c]:col_start[c + 1]]
            nv = verts.shape[0]
            _sweep_color(verts, x, y, mass, inv_h2, presc, group, target, BD, EL, SH, CT, FR, newp[:nv], stat[:nv],
                         parallel and nv >= PARALLEL_MIN_VERTICES, skip)
            for j in range(nv):
                if stat[j, 1] > 0:
                    cut += 1
                if not presc[verts[j]] and stat[j, 0] > big:
                    big = stat[j, 0]
        _affine.affine_sweep(x, target, inv_h2, BD, CT, FR, AB, presc_tol, bstat, parallel)
        big = max(big, bstat[0])
        cut += int(bstat[1])
        done += 1
        since_detect += 1
        k_cheb += 1
        if rho > 0.0 and cut == 0:
            if k_cheb == 1:
                omega = 1.0
            elif k_cheb == 2:
                omega = 2.0 / (2.0 - rho * rho)
            else:
                omega = 4.0 / (4.0 - rho * rho * omega)
            if k_cheb >= 2:
                for v in range(n):
                    for a in range(3):
                        xbar[v, a] = x[v, a]
                _tet_volumes(x, tets, vol_before)
                if not _accelerate(x, xbar, x_prev2, omega, presc, BD, EL, vol_before):
                    k_cheb = 0
                dihedrals_all(x, SH.quad, SH.theta, SH.grad, SH.ok)
        else:
            k_cheb = 0
        reached = True
        for v in range(n):
            if presc[v]:
                d = 0.0
                for a in range(3):
                    d += (x[v, a] - target[v, a]) ** 2
                if d > presc_tol * presc_tol:
                    reached = False
                    break
        # converged: the residual is below tol. A sweep's largest move is NOT a stop test: on a stack of
        # stiff soft cubes Gauss-Seidel moves stay below tol long before the forces balance (stopping
        # there left the stack moving at 3.7 cm/s after 12 frames)
        if big < tol and reached and bstat[2] > 0.0:
            conv = 1
            break
        if cut >= cut_limit or (cut > 0 and since_detect >= CUT_PATIENCE):
            break
    out[0] = done
    out[1] = big
    out[2] = cut
    out[3] = conv
    out[4] = k_cheb
    out[5] = omega
