"""Per-island step bounds for affine bodies (issue 19; docs/solver.md, "The body step", item 7).

One step size for the whole system lets the closest pair anywhere slow every body: on a bin of 200 props
97-100% of the Newton iterations had their step cut by CCD to a median 7-11%. Here each body (a group: one
body of the collision mesh, its vertex rows and, for an affine body, its 4 rows of z) takes its own
fraction s_g of its (bent) Newton step:

1. one broad phase: the swept candidate pairs of the full bent step q0, boxes inflated by dhat / 2 + MARGIN
   dhat; per pair its ACCD time of impact along q0 and whether it is within dhat now (touching);
2. islands: the moving groups joined by a pair that would collide within the step (toi < 1) or touches (the
   barrier couples them); a static collider joins nothing. Each island takes SHRINK x the smallest toi of its
   pairs (1 without one: a body far from every impact takes its full step);
3. the scaled step s p + s^2 (q0 - p) per body (the bend is quadratic in the step, so this is the bent step of
   the scaled Newton step; where it leaves q0's path by more than MARGIN dhat, s q0 instead) is checked by
   ACCD on the same candidates, which hold every pair that can meet along it: a pair that now collides
   (bodies scaled differently follow another relative path) merges its islands and lowers them;
4. a collision-free step is taken when it is valid and does not raise the energy (evaluated on the same
   candidates, which hold every pair within dhat on the path); when it raises it, the islands whose own
   energy rose (group_energies: a guide only) are halved. At most ATTEMPTS tries, then None and the caller's
   uniform search runs as before.

Only the search changes: the stop test still reads the true Newton step. Every quantity is a minimum over
pairs, a sum per group or a union of pairs, so the result does not depend on the thread count; nothing is
carried from one Newton iteration to the next.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from solver_server.bodies.affine import bodies_energy
from solver_server.contact.barrier_pair import pair_energy
from solver_server.contact.broad_phase import Candidates
from solver_server.contact.ccd import box_gap, accd_pair, gather_motion, pair_of, stencil_dist2
from solver_server.contact.friction import f0, tangent_displacement
from solver_server.contact.pairs import pair_set
from solver_server.threads import threads_for

ETA = 0.1        # the CCD's kept gap fraction (contact/ccd.py max_step_size's default)
SHRINK = 0.9     # an island takes this fraction of its smallest time of impact
ATTEMPTS = 10    # steps tried per Newton iteration (CCD re-checks and energy halvings together); bin of 200, frames
                 # 4-6: 20 / 47 / 27 of 100 iterations fell back to the uniform search with 6, 9 / 3 / 0 with 10
CCD_ROUNDS = 30  # CCD re-check rounds (island merges) per Newton iteration, besides the ATTEMPTS energy tries
MARGIN = 1.0     # x dhat: how far a tried step's vertex may leave its full-step segment (candidate boxes' extra pad)
JOIN_FRICTION = True   # the bodies of a friction pair share an island
JOIN_TOUCHING = True   # bodies within dhat of each other share an island (False: only pairs that would collide)
MIN_FACTOR = 1e-6   # an island's factor below this: give up (the caller's search)

STATS = {"tries": 0, "taken": 0, "fail": 0, "margin_fail": 0, "full_islands": 0, "ccd_retry": 0, "energy_retry": 0,
         "invalid_retry": 0, "margin_mixed": 0}
"""Counters for diagnosis (read and reset by scripts; never read by the solver)."""
TRACE = None
"""A diagnosis hook: TRACE(event, factor, moving, parent) on every outcome (never set by the solver)."""


APART = True   # skip the ACCD of element pairs whose bodies' bounding spheres stay apart (see _apart)


@njit(cache=True, fastmath=False)
def _body_spheres(x, dx, vbody, nb):
    """Per mesh body (nb,): the mean of its vertices at x (centre, m), the largest distance of a vertex from it
    (radius, m), the mean of their moves dx (m) and the largest distance of a vertex's move from that mean (m):
    along the straight moves x -> x + t dx every vertex of body b stays within radius + t spread of
    centre + t mean move, t in [0, 1]."""
    n = x.shape[0]
    cen = np.zeros((nb, 3))
    dcen = np.zeros((nb, 3))
    cnt = np.zeros(nb)
    for i in range(n):
        b = vbody[i]
        cnt[b] += 1.0
        for a in range(3):
            cen[b, a] += x[i, a]
            dcen[b, a] += dx[i, a]
    for b in range(nb):
        if cnt[b] > 0.0:
            for a in range(3):
                cen[b, a] /= cnt[b]
                dcen[b, a] /= cnt[b]
    rad = np.zeros(nb)
    spread = np.zeros(nb)
    for i in range(n):
        b = vbody[i]
        r2 = 0.0
        q2 = 0.0
        for a in range(3):
            r2 += (x[i, a] - cen[b, a]) ** 2
            q2 += (dx[i, a] - dcen[b, a]) ** 2
        rad[b] = max(rad[b], math.sqrt(r2))
        spread[b] = max(spread[b], math.sqrt(q2))
    return cen, rad, dcen, spread


@njit(cache=True, fastmath=False, inline="always")
def _apart(a, b, cen, rad, dcen, spread, off, dhat, eta):
    """True when every element pair of bodies a and b (contact offset off) is a far pair along the moves of
    _pair_tois / _pair_tois_moved: every vertex stays in its body's moving sphere (_body_spheres), so the pair's
    contact distance stays above the spheres' smallest gap g minus off for t in [0, 1], its start distance is below
    |c_a - c_b| + r_a + r_b, and its elements' boxes at the end lie in the spheres' boxes. With g - off > dhat and
    >= eta x that start bound, the pair does not touch at the start, is not near at the end (the end boxes' gap
    above dhat), and toi 1 meets ACCD's contract (no contact along the move, at least eta x the start distance at
    its end). ACCD itself returns 1 there too unless its last step looks past the move's end (it measures the
    distance at t + (1 - eta) s / l, which may exceed 1) and finds the pair closer than eta x its start distance
    there: then it returns less, conservatively. Slack 1e-9 relative against round-off."""
    d0x = cen[a, 0] - cen[b, 0]
    d0y = cen[a, 1] - cen[b, 1]
    d0z = cen[a, 2] - cen[b, 2]
    vx = dcen[a, 0] - dcen[b, 0]
    vy = dcen[a, 1] - dcen[b, 1]
    vz = dcen[a, 2] - dcen[b, 2]
    R = rad[a] + spread[a] + rad[b] + spread[b]
    vv = vx * vx + vy * vy + vz * vz
    t = 0.0
    if vv > 0.0:
        t = min(1.0, max(0.0, -(d0x * vx + d0y * vy + d0z * vz) / vv))
    ex = d0x + t * vx
    ey = d0y + t * vy
    ez = d0z + t * vz
    g = math.sqrt(ex * ex + ey * ey + ez * ez) - R - off
    slack = 1.0 + 1e-9
    if not g > dhat * slack + 1e-12:
        return False
    s0_up = math.sqrt(d0x * d0x + d0y * d0y + d0z * d0z) + rad[a] + rad[b]
    if not g >= eta * s0_up * slack + 1e-12:
        return False
    gx = max(abs(d0x + vx) - R, 0.0)
    gy = max(abs(d0y + vy) - R, 0.0)
    gz = max(abs(d0z + vz) - R, 0.0)
    return math.sqrt(gx * gx + gy * gy + gz * gz) - off > dhat * slack + 1e-12


@njit(cache=True, fastmath=False, inline="always")
def _pair_bodies(mode, ids, vbody):
    """The mesh bodies of a pair's two sides (ids: its 4 slot vertices from pair_of; mode 1: edge-edge)."""
    return vbody[ids[0]], (vbody[ids[2]] if mode == 1 else vbody[ids[1]])


@njit(cache=True, fastmath=False, parallel=True)
def _pair_tois(x, dx, pairs, mode, faces, edges, vertex_offset, face_offset, edge_offset, vbody, dhat, eta, spheres,
               use_spheres):
    """For each pair (rows of pairs, mode 0: vertex-face, 1: edge-edge): its ACCD time of impact along the
    straight move x -> x + dx (1: none within the step), whether its contact distance at x is below dhat,
    and the mesh bodies of its two sides. spheres: _body_spheres of (x, dx); with use_spheres a pair whose bodies
    stay _apart gets the far pair's results (toi 1, not touching, not near at the end, distance inf) unevaluated."""
    m = pairs.shape[0]
    toi = np.ones(m)
    touch = np.zeros(m, np.bool_)
    dist = np.empty(m)
    near1 = np.zeros(m, np.bool_)
    ga = np.empty(m, np.int64)
    gb = np.empty(m, np.int64)
    cen, rad, dcen, spread = spheres
    for k in prange(m):
        X0 = np.empty(12)
        P = np.empty(12)
        ids = np.empty(4, dtype=np.int64)
        off = pair_of(mode, pairs[k, 0], pairs[k, 1], faces, edges, vertex_offset, face_offset, edge_offset, ids)
        ga[k], gb[k] = _pair_bodies(mode, ids, vbody)
        if use_spheres and _apart(ga[k], gb[k], cen, rad, dcen, spread, off, dhat, eta):
            dist[k] = np.inf
            continue
        moving = gather_motion(x, dx, ids, X0, P)
        s0 = box_gap(X0, mode == 1) - off   # a lower bound of the contact distance, exact enough beyond dhat
        if s0 < dhat:
            s0 = math.sqrt(stencil_dist2(X0, mode == 1)) - off
        touch[k] = s0 < dhat
        dist[k] = s0
        if moving:
            toi[k] = accd_pair(X0, P, mode == 1, off, eta, 1.0, 1_000_000)
            for j in range(12):
                X0[j] += P[j]
            near1[k] = box_gap(X0, mode == 1) - off < dhat
        else:
            near1[k] = s0 < dhat
    return toi, touch, ga, gb, dist, near1


@njit(cache=True, fastmath=False, parallel=True)
def _pair_tois_moved(x, dx, pairs, mode, faces, edges, vertex_offset, face_offset, edge_offset, eta, vbody, dhat,
                     spheres, use_spheres):
    """The part of _pair_tois that depends on the move dx (a CCD round re-evaluates pairs at the same start x):
    each pair's ACCD time of impact along x -> x + dx and whether its box gap at the end is below dhat, by the
    same arithmetic as _pair_tois, without its start-distance terms (and the same _apart shortcut: toi 1, end gap
    inf)."""
    m = pairs.shape[0]
    toi = np.ones(m)
    end_gap = np.empty(m)
    moved = np.zeros(m, np.bool_)
    cen, rad, dcen, spread = spheres
    for k in prange(m):
        X0 = np.empty(12)
        P = np.empty(12)
        ids = np.empty(4, dtype=np.int64)
        off = pair_of(mode, pairs[k, 0], pairs[k, 1], faces, edges, vertex_offset, face_offset, edge_offset, ids)
        if use_spheres:
            a, b = _pair_bodies(mode, ids, vbody)
            if _apart(a, b, cen, rad, dcen, spread, off, dhat, eta):
                moved[k] = True
                end_gap[k] = np.inf
                continue
        if gather_motion(x, dx, ids, X0, P):
            moved[k] = True
            toi[k] = accd_pair(X0, P, mode == 1, off, eta, 1.0, 1_000_000)
            for j in range(12):
                X0[j] += P[j]
            end_gap[k] = box_gap(X0, mode == 1) - off
        else:
            end_gap[k] = np.inf
    return toi, end_gap, moved


@njit(cache=True, fastmath=False)
def _find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@njit(cache=True, fastmath=False)
def _islands(parent, factor, toi, join, ga, gb, moving, shrink):
    """Unions the moving groups of the pairs flagged join (both sides moving) into parent (union-find over
    groups, in place) and lowers each island's factor to shrink x the smallest toi < 1 of a pair with a
    moving side in it. factor (groups,) holds the current factor per group; returns the new factor per group
    (every member of an island the island's smallest factor)."""
    n = parent.shape[0]
    for k in range(toi.shape[0]):
        a = ga[k]
        b = gb[k]
        if join[k] and moving[a] and moving[b]:
            ra = _find(parent, a)
            rb = _find(parent, b)
            if ra != rb:
                if ra < rb:
                    parent[rb] = ra
                else:
                    parent[ra] = rb
    root_f = np.full(n, np.inf)
    for g in range(n):
        r = _find(parent, g)
        if factor[g] < root_f[r]:
            root_f[r] = factor[g]
    for k in range(toi.shape[0]):
        if toi[k] < 1.0:
            for g in (ga[k], gb[k]):
                if moving[g]:
                    r = _find(parent, g)
                    f = shrink * toi[k] * factor[g]
                    if f < root_f[r]:
                        root_f[r] = f
    out = np.empty(n)
    for g in range(n):
        out[g] = root_f[_find(parent, g)]
    return out


@njit(cache=True, fastmath=False)
def _body_energies(z, zt, row0, L, kV, mbar, g, h2, active, bgroup, out):
    """Adds each affine body's inertia + h2 (gravity + orthogonality) to out[its group]."""
    for b in range(row0.size):
        out[bgroup[b]] += bodies_energy(z, zt, row0[b:b + 1], L[b:b + 1], kV[b:b + 1], mbar[b:b + 1], g, 1.0, h2,
                                        active[b:b + 1])


@njit(cache=True, fastmath=False)
def _pair_energies(x, ids, is_ee, off, epsx, dhat, w, vbody, static, out):
    """Adds w x each barrier pair's energy to out[group] of both its sides (static colliders left out)."""
    X = np.empty(12)
    for k in range(ids.shape[0]):
        for i in range(4):
            for a in range(3):
                X[3 * i + a] = x[ids[k, i], a]
        e = w * pair_energy(X, is_ee[k], off[k], epsx[k], dhat)
        ga = vbody[ids[k, 0]]
        gb = vbody[ids[k, 2]] if is_ee[k] else vbody[ids[k, 1]]
        if not static[ga]:
            out[ga] += e
        if gb != ga and not static[gb]:
            out[gb] += e


@njit(cache=True, fastmath=False)
def _friction_energies(x, x_prev, ids, coef, T, ml, eps, w, vbody, static, out):
    """Adds w x each friction pair's energy to out[group] of both its sides (static colliders left out)."""
    for k in range(ids.shape[0]):
        u0, u1 = tangent_displacement(x, x_prev, ids, coef, T, k)
        e = w * ml[k] * f0(math.sqrt(u0 * u0 + u1 * u1), eps)
        ga = vbody[ids[k, 0]]
        gb = vbody[ids[k, 3]]
        if not static[ga]:
            out[ga] += e
        if gb != ga and not static[gb]:
            out[gb] += e


@njit(cache=True, fastmath=False)
def _merge(parent, factor, toi, ga, gb, moving, shrink):
    """One CCD round on a scaled step (factor: each group its island's factor; toi: the pairs' times of impact
    along the step). A colliding pair between two islands merges them at the smaller factor (moving together
    at the same fraction they follow a prefix of their full-step relative path, which the first pass bounded);
    a colliding pair inside one island (from the start of the round) or against a non-moving side shrinks
    its island to shrink x toi of its factor. Returns the new factor per group (parent updated in place)."""
    n = parent.shape[0]
    root0 = np.empty(n, np.int64)
    rf = np.full(n, np.inf)
    for g in range(n):
        r = _find(parent, g)
        root0[g] = r
        if factor[g] < rf[r]:
            rf[r] = factor[g]
    for k in range(toi.shape[0]):
        a = ga[k]
        b = gb[k]
        if toi[k] < 1.0 and moving[a] and moving[b] and root0[a] != root0[b]:
            ra = _find(parent, a)
            rb = _find(parent, b)
            if ra != rb:
                f = min(rf[ra], rf[rb])
                if ra < rb:
                    parent[rb] = ra
                    rf[ra] = f
                else:
                    parent[ra] = rb
                    rf[rb] = f
    cut = np.full(n, np.inf)
    for k in range(toi.shape[0]):
        a = ga[k]
        b = gb[k]
        if toi[k] >= 1.0:
            continue
        if moving[a] and moving[b] and root0[a] != root0[b]:
            continue
        for g in (a, b):
            if moving[g]:
                r = _find(parent, g)
                f = shrink * toi[k] * factor[g]
                if f < cut[r]:
                    cut[r] = f
    out = np.empty(n)
    for g in range(n):
        r = _find(parent, g)
        out[g] = min(rf[r], cut[r])
    return out


def group_energies(obj, z: np.ndarray, cands) -> np.ndarray:
    """(groups,) J: the affine bodies' own energies (inertia, gravity, orthogonality) per group, plus every
    barrier and friction pair's energy added to the groups of both its sides. Only a guide to which islands
    raised the energy (a pair between two islands counts in both; elastic and soft-vertex terms are left
    out): the step is accepted on the objective's own energy."""
    from solver_server.contact.terms import EPS_V
    ng = obj.n_groups
    out = np.zeros(ng)
    ab = obj.ab
    h2 = obj.h * obj.h
    bg = obj.step_groups[ab.row0]
    _body_energies(z, obj.x_tilde, ab.row0, ab.L, ab.kV, ab.mbar, np.asarray(obj.g, np.float64), h2, ab.active,
                   bg, out)
    c = obj.contact
    m = c.mesh
    xs = np.ascontiguousarray(obj.D.to_x(z), np.float64)
    vb = np.asarray(m.vertex_body, np.int64)
    st = np.asarray(m.body_static, np.bool_)
    if cands is not None and len(cands):
        ps = pair_set(cands, m, xs)
        if len(ps):
            _pair_energies(xs, ps.ids, ps.is_ee, ps.off, ps.epsx, float(c.dhat), h2 * c.kappa, vb, st, out)
    fs = c.fs
    if fs is not None and len(fs):
        _friction_energies(xs, np.ascontiguousarray(c.x_prev, np.float64), fs.ids, fs.coef, fs.T, fs.mu_lambda,
                           EPS_V * obj.h, h2, vb, st, out)
    return out


def _tois(obj, xs: np.ndarray, dx: np.ndarray, cands):
    """(toi, touching, group a, group b, contact distance at xs) of the candidate pairs cands along the straight
    move xs -> xs + dx (vertex positions)."""
    c = obj.contact
    m = c.mesh
    out = []
    vbody = np.ascontiguousarray(m.vertex_body, np.int64)
    spheres = _body_spheres(xs, dx, vbody, int(m.body_static.shape[0]))
    for mode, pairs in ((0, cands.pt), (1, cands.ee)):
        pairs = np.ascontiguousarray(np.asarray(pairs).reshape(-1, 2), np.int64)
        out.append(_pair_tois(xs, dx, pairs, mode, m.faces, m.edges, m.vertex_offset, m.face_offset,
                              m.edge_offset, vbody, float(c.dhat), ETA, spheres, APART))
    return tuple(np.concatenate([a[i] for a in out]) for i in range(6))


def _tois_subset(obj, xs: np.ndarray, dx: np.ndarray, pt: np.ndarray, ee: np.ndarray, redo: np.ndarray,
                 dist: np.ndarray):
    """The times of impact of the pairs flagged redo (over pt then ee rows) along xs -> xs + dx, and whether each
    is within dhat at the end; dist: every pair's contact distance at xs (the first pass's)."""
    c = obj.contact
    m = c.mesh
    k = pt.shape[0]
    out = []
    dhat = float(c.dhat)
    vbody = np.ascontiguousarray(m.vertex_body, np.int64)
    spheres = _body_spheres(xs, dx, vbody, int(m.body_static.shape[0]))
    for mode, pairs, sel, d0 in ((0, pt, redo[:k], dist[:k]), (1, ee, redo[k:], dist[k:])):
        sub = np.ascontiguousarray(pairs[sel])
        toi, end_gap, moved = _pair_tois_moved(xs, dx, sub, mode, m.faces, m.edges, m.vertex_offset,
                                               m.face_offset, m.edge_offset, ETA, vbody, dhat, spheres, APART)
        # a pair that does not move keeps its start distance (as _pair_tois: near1 = s0 < dhat)
        out.append((toi, np.where(moved, end_gap < dhat, d0[sel] < dhat)))
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])


@njit(cache=True, fastmath=False)
def _off_segment(dx, d0, vbody, ng):
    """(ng,) the largest distance (m) of a vertex's move dx[i] from the segment [0, d0[i]] of its full-step move,
    per mesh body vbody[i] (a group)."""
    worst = np.zeros(ng)
    for i in range(dx.shape[0]):
        dd = d0[i, 0] * d0[i, 0] + d0[i, 1] * d0[i, 1] + d0[i, 2] * d0[i, 2]
        t = 0.0
        if dd > 0.0:
            t = (dx[i, 0] * d0[i, 0] + dx[i, 1] * d0[i, 1] + dx[i, 2] * d0[i, 2]) / dd
            t = min(1.0, max(0.0, t))
        e0 = dx[i, 0] - t * d0[i, 0]
        e1 = dx[i, 1] - t * d0[i, 1]
        e2 = dx[i, 2] - t * d0[i, 2]
        e = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
        g = vbody[i]
        if e > worst[g]:
            worst[g] = e
    return worst


def scaled_step(obj, x: np.ndarray, p: np.ndarray, q0: np.ndarray):
    """See _scaled_step; the thread policy decided once for the whole search (its pair kernels)."""
    c = obj.contact
    with threads_for(c.mesh.n_verts + c.mesh.edges.shape[0]):
        return _scaled_step(obj, x, p, q0)


def _scaled_step(obj, x: np.ndarray, p: np.ndarray, q0: np.ndarray):
    """The step to take for the Newton step p whose full bent step is q0: q0 itself or a per-island scaled
    step (see module doc), or None (then the caller's uniform search runs). obj provides step_groups (n_z,)
    int64 (the group of each row of z; -1 for none), n_groups, group_static (groups,) bool, search_direction,
    valid, energy_on(cands) and contact.

    One broad phase: the swept candidates of the full step q0 with boxes inflated by dhat / 2 + MARGIN. Every
    step tried moves each vertex to within MARGIN of its full-step segment (checked; else None), so these
    candidates hold every pair that can reach contact along it (ACCD on all of them is the CCD of the step)
    and every pair within dhat anywhere on it (its energy, and the next iteration's candidates)."""
    groups = obj.step_groups
    ng = obj.n_groups
    rows = groups >= 0
    mag = np.zeros(ng)
    np.maximum.at(mag, groups[rows], np.abs(p[rows]).max(axis=1))
    moving = (mag > 0.0) & ~obj.group_static
    if not moving.any():
        return None
    STATS["tries"] += 1
    c = obj.contact
    dhat = float(c.dhat)
    margin = MARGIN * dhat
    xs = np.ascontiguousarray(obj.D.to_x(x), np.float64)
    d0 = np.ascontiguousarray(obj.D.to_x(q0), np.float64)
    cands = c.candidates_swept(xs, xs + d0, dhat=dhat + 2.0 * margin)
    parent = np.arange(ng, dtype=np.int64)
    if JOIN_FRICTION and c.fs is not None and len(c.fs):
        # lagged friction couples the bodies of its pairs (frozen at the step's start) wherever they are now
        vb = np.asarray(c.mesh.vertex_body, np.int64)
        fa, fb = vb[c.fs.ids[:, 0]], vb[c.fs.ids[:, 3]]
        ones = np.ones(fa.size)
        _islands(parent, np.ones(ng), ones, np.ones(fa.size, np.bool_), fa, fb, moving, SHRINK)
    toi, touch, ga, gb, dist, near1 = _tois(obj, xs, d0, cands)
    pair0 = (toi, touch, ga, gb, dist)
    pt = np.ascontiguousarray(np.asarray(cands.pt).reshape(-1, 2), np.int64)
    ee = np.ascontiguousarray(np.asarray(cands.ee).reshape(-1, 2), np.int64)
    f_eval = np.ones(ng)   # the factors toi was evaluated with
    mode_eval = np.zeros(ng, np.bool_)   # and each group's mode (True: its full bent step scaled; at factor 1: q0)
    vbody = np.ascontiguousarray(c.mesh.vertex_body, np.int64)
    factor = np.ones(ng)
    if (toi < 1.0).any():
        factor = _islands(parent, factor, toi, (toi < 1.0) | (touch & JOIN_TOUCHING), ga, gb, moving, SHRINK)
    else:   # the full step is clear: islands of touching bodies only (energy halvings)
        _islands(parent, factor, toi, touch & JOIN_TOUCHING, ga, gb, moving, SHRINK)
    q = q0
    dx = d0
    corr = q0 - p   # the bend of the full step (bodies/affine.py rotation_following_step: W^2 A / 2 per body)
    clear = not (toi < 1.0).any()
    e_start = None
    rounds = 0
    for attempt in range(ATTEMPTS + CCD_ROUNDS):
        if attempt > 0:
            if factor[moving].min() < MIN_FACTOR:
                break
            scale = np.ones(x.shape[0])
            scale[rows] = factor[groups[rows]]
            sc = scale[:, None]
            # = search_direction(x, scale p) (the bend is quadratic in the step); rows at factor 1 are q0's, bit for bit
            q = np.where(sc == 1.0, q0, sc * p + (sc * sc) * corr)
            dx = np.ascontiguousarray(obj.D.to_x(q), np.float64)
            mode = _off_segment(dx, d0, vbody, ng) > margin
            if mode.any():
                # a body re-bent too far from its full step's path takes its full bent step scaled instead (each
                # vertex on its segment; its rotation is then bent for the full step only); the others keep
                # their re-bent steps, within the margin of their paths, so the candidates hold every pair. (One
                # body off its path used to put every body on its scaled full step: a small factor on a turning
                # body then stretches it to first order, E_orth grows as the square of the factor where the
                # model saw a fall, and the energy halvings cut its island to 1/16-1/32 of its CCD bound.)
                STATS["margin_fail"] += 1
                if (moving & ~mode & (factor < 1.0)).any():
                    STATS["margin_mixed"] += 1   # scaled islands keep their re-bent steps beside it
                far = np.zeros(x.shape[0], np.bool_)
                far[rows] = mode[groups[rows]]
                q = np.where(far[:, None], sc * q0, q)
                dx = np.ascontiguousarray(obj.D.to_x(q), np.float64)
            # a pair's time of impact depends on its two groups' moves only: recompute the pairs of the groups
            # whose move changed since the last evaluation
            changed = (factor != f_eval) | ((mode != mode_eval) & (factor != 1.0))
            redo = changed[ga] | changed[gb]
            if redo.any():
                sub, sub_near = _tois_subset(obj, xs, dx, pt, ee, redo, dist)
                toi = toi.copy()
                toi[redo] = sub
                near1 = near1.copy()
                near1[redo] = sub_near
            f_eval, mode_eval = factor.copy(), mode
            clear = not (toi < 1.0).any()
        if not clear and attempt == 0:
            continue   # the islands' factors of the full step's times of impact (above)
        if not clear:
            # pairs that collide along this step join their islands, which take SHRINK x the pair's toi of
            # their present factors (then every member the island's smallest)
            STATS["ccd_retry"] += 1
            rounds += 1
            if rounds > CCD_ROUNDS:
                break
            factor = _merge(parent, factor, toi, ga, gb, moving, SHRINK)
            continue
        if attempt - rounds >= ATTEMPTS:
            break
        xn = x + q
        if not obj.valid(xn):
            STATS["invalid_retry"] += 1
            factor = 0.5 * factor
            continue
        # the energy on the pairs within dhat of each other (by their boxes) at x or at the step's end: every
        # pair with a barrier there, and the candidates of the accepted point
        k = pt.shape[0]
        near = touch | near1
        ecands = Candidates(pt[near[:k]].astype(np.int32), ee[near[k:]].astype(np.int32))
        E = obj.energy_on(ecands)
        if E(xn) <= E(x):
            STATS["taken"] += 1
            STATS["full_islands"] += float(np.mean(factor[moving] >= 1.0))
            if TRACE is not None:
                TRACE("taken", factor, moving, parent, obj, x, p, pair0)
            return q
        # halve the islands whose own energy rose (all of them when none is found)
        STATS["energy_retry"] += 1
        roots = np.array([_find(parent, g) for g in range(ng)], np.int64)
        dE = group_energies(obj, xn, ecands) - group_energies(obj, x, ecands)
        dI = np.zeros(ng)
        np.add.at(dI, roots, dE)
        up = (dI[roots] > 0.0) & moving
        factor = np.where(up if up.any() else moving, 0.5 * factor, factor)
    STATS["fail"] += 1
    if TRACE is not None:
        TRACE("fail", factor, moving, parent, obj, x, p, pair0)
    return None
