"""Keyframed colliders first: each moving collider takes its whole keyframed move of the step at once,
carrying the free vertices in its way along, as far as CCD allows.

Why. Inside the sweeps (sweep._move_colliders) a collider moves by the largest common fraction of
its keyframed move that every one of its vertices admits in its admissible set (bounds.py). Cloth
pressed against the collider has s_k ~ the contact gap, so each detection lets the collider advance
~gamma s_k: a ball keyframed 0.125 m per step through a pinned sheet lagged its keyframes by
0.17-0.55 m after 670-860 sweeps and 310-390 detections a frame.

What. Before a detection, while some collider is not at its target, every collider vertex i gets the
displacement w_i = target_i - x_i and the configuration moves along the straight path
x + tau p, tau in [0, 1], p_i = t_g w_i for the vertices of group g (a collider and what it pushes),
one fraction t_g per group, so a collider moves by one common fraction (the sweep's rule). Every pair
of primitives whose swept boxes meet (the broad phase's filters: the pairs a detection considers) is
checked by additive CCD (ipc/contact/ccd.py), as in inertial_guess.py: a pair that would come closer
than min(ETA s0, keep), s0 its contact distance at x and keep = KEEP_DHAT dhat in the stepper, is
hit. (The absolute floor lets far pairs come closer without counting: a sheet's own in-plane
neighbours, another layer 2 cm away. With ETA alone, two free sheets 2 cm apart hit by a ball moving
4-6 cm had 90-127 of their 242 vertices pushed, their borders too; with the floor, 34-50.)

A hit pair *pushes* each carriable vertex v (free surface vertices of no tet: cloth, rods) on a side
that the other side's grouped vertices approach: with wp their displacement at the other side's
closest point (closest-point weights at x), w_v v's own (0 if still) and n the pair's unit normal
towards v's side, if (wp - w_v) . n > 0 then v joins that group with w_v + ((wp - w_v) . n) n: it is
pushed out of the way along the normal, the least move that keeps its gap to a translating
collider, with no tangential drag (pushing with the whole wp glued cloth to a sphere keyframed
sideways under it: 16x16 sheet draped on a sphere moved 0.1 m a frame, the sheet's centre 0.73 m
along after 7 frames against 0.53 with the sweeps alone and 0.44 in the Accurate solver; normal
pushes: 0.56; with 100 sweeps a step all three Fast variants reach 0.61-0.63, so the rest is the
sweep budget). A pushed vertex hit again is pushed again from where it is. A hit pair with nothing to
push (a pinned, tet or affine vertex, another collider, sides moving apart) cuts the fractions of the
groups of its moving vertices to SHRINK times its time of impact (after SCALED_PASSES cuts: to 0).
Pushing stops after GROW_PASSES passes (from then on every hit cuts). The loop runs until one pass
finds no hit; all fractions 0 (p = 0: no pair moves) always passes.

Guarantee. The accepted move is the last one checked, along the straight path from x, which is
intersection free with every s > 0. Every pair whose swept boxes (inflated by the contact offsets)
meet was checked by ACCD along that path and keeps >= min(ETA s0, keep) > 0; a pair whose boxes stay
apart keeps s > 0 on its own; a pair of two still primitives does not move. So the path is
intersection free and ends with every s > 0. No vertex of a tet moves (colliders and pushed vertices
belong to none), so no tet changes. The sweeps then start from a new detection at the moved point
(bounds.py's guarantee from there on). The pushed vertices' elastic energy is whatever the push
leaves; the sweeps relax it.

Cost. Nothing when no collider moves (one comparison of the collider rows with their targets per
detection); otherwise one CCD pass (swept boxes, hash grid, ACCD of the moving pairs; serial) per
pass, 2-4 passes per step in the tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import math

import numpy as np
from numba import njit

from solver_server.contact.barrier_pair import pair_stencil_local
from solver_server.contact.broad_phase import element_boxes, hash_grid, query_grown
from solver_server.contact.ccd import stencil_dist2, accd_pair, gather_motion, pair_of
from solver_server.contact.distance import stencil_closest

ETA = 0.5          # a pair keeps at least this fraction of its contact distance along the push
SHRINK = 0.9       # first cutting passes: a cut group keeps this fraction of its time of impact
SCALED_PASSES = 3  # passes that shrink fractions; later ones stop the cut groups outright
GROW_PASSES = 12   # passes that may push vertices; then every hit cuts
KEEP_DHAT = 2.0    # the stepper's keep, in barrier distances dhat
MAX_PASSES = 20    # then every group still cut is stopped and the last check always passes


@njit(cache=True, fastmath=False)
def _push_pairs(x, p, qlo, qhi, tlo, thi, mode, faces, edges, vbody, self_contact, static, vertex_offset,
                face_offset, edge_offset, eta, keep, grp, w, carriable, grow, tv, hit_g, hit_w):
    """CCD of x + tau p, tau in [0, 1], for every accepted query/target pair with overlapping swept
    boxes and some moving vertex (mode 0: vertex-face, 1: edge-edge), toi the largest tau (ACCD) up
    to which its contact distance stays >= min(eta s0, keep) (m), s0 its distance at x. For toi < 1:
    if ``grow``, each carriable vertex v on a side that the other side's grouped vertices approach
    (their closest-point displacement wp, relative to v's own w_v (0 if still), has a positive
    component along the pair's unit normal n towards v's side) gets hit_g[v] = that group and
    hit_w[v] = w_v + ((wp - w_v) . n) n (m): pushed out of the way along the normal only, no
    tangential drag; the first proposal of a pass is kept. A hit pair with no such vertex sets
    tv[v] = min(tv[v], toi) for its vertices in groups. Returns the number of hit pairs."""
    nq = qlo.shape[0]
    if nq == 0 or tlo.shape[0] == 0:
        return 0
    origin, inv_cell, size, start, items, boxes, big = hash_grid(qlo, qhi, tlo, thi)
    buf = np.empty(64, dtype=np.int64)
    qidx = np.arange(nq)
    tidx = np.arange(tlo.shape[0])
    X0 = np.empty(12)
    P = np.empty(12)
    ids = np.empty(4, dtype=np.int64)
    wp = np.empty(3)
    nrm = np.empty(3)
    is_ee = mode == 1
    a_end = 2 if is_ee else 1
    hits = 0
    for q in range(nq):
        n, buf = query_grown(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode,
                             faces, edges, vbody, self_contact, static, buf, qidx, tidx)
        for jt in range(n):
            off = pair_of(mode, q, buf[jt], faces, edges, vertex_offset, face_offset, edge_offset, ids)
            if not gather_motion(x, p, ids, X0, P):
                continue
            # keep >= min(eta s0, keep) of the pair's contact distance s0: a far pair (the sheet's own
            # in-plane neighbours, another layer cm away) may come closer, down to ``keep``
            s0 = math.sqrt(stencil_dist2(X0, is_ee)) - off
            eta_k = min(eta, keep / s0) if s0 > 0.0 else eta
            toi = accd_pair(X0, P, is_ee, off, eta_k, 1.0, 1_000_000)
            if toi >= 1.0:
                continue
            hits += 1
            # push the still carriable vertices of a side that the other side's grouped vertices approach
            n_push = 0
            if grow:
                kind, i0, i1, i2, i3, d2 = pair_stencil_local(X0, is_ee)
                c, r, dc, sv, npar = stencil_closest(X0, kind, i0, i1, i2, i3)
                for side in range(2):
                    lo, hi = (a_end, 4) if side == 0 else (0, a_end)      # the side facing this one
                    s_lo, s_hi = (0, a_end) if side == 0 else (a_end, 4)
                    gbest = -1
                    cbest = -1.0
                    for j in range(lo, hi):
                        if grp[ids[j]] >= 0 and abs(c[j]) > cbest:
                            cbest = abs(c[j])
                            gbest = grp[ids[j]]
                    if gbest < 0:
                        continue
                    wsum = 0.0
                    cnt = 0
                    for j in range(lo, hi):
                        if grp[ids[j]] == gbest:
                            wsum += abs(c[j])
                            cnt += 1
                    for a in range(3):
                        wp[a] = 0.0
                        nrm[a] = 0.0
                    for j in range(lo, hi):
                        u = ids[j]
                        for a in range(3):
                            nrm[a] -= abs(c[j]) * X0[3 * j + a]        # from the other side's closest point ...
                        if grp[u] == gbest:
                            f = abs(c[j]) / wsum if wsum > 0.0 else 1.0 / cnt
                            for a in range(3):
                                wp[a] += f * w[u, a]
                    for i in range(s_lo, s_hi):
                        for a in range(3):
                            nrm[a] += abs(c[i]) * X0[3 * i + a]        # ... to this side's
                    nn = math.sqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + nrm[2] * nrm[2])
                    for i in range(s_lo, s_hi):
                        v = ids[i]
                        if not carriable[v]:
                            continue
                        # the other side's approach relative to v, along the pair's normal n (unit)
                        rn = 0.0
                        for a in range(3):
                            rn += (wp[a] - (w[v, a] if grp[v] >= 0 else 0.0)) * nrm[a]
                        if rn <= 0.0 or nn == 0.0:
                            continue                                   # it does not come closer to v
                        rn /= nn * nn
                        n_push += 1
                        if hit_g[v] >= 0:
                            continue                                   # the first proposal is kept
                        hit_g[v] = gbest
                        for a in range(3):
                            hit_w[v, a] = (w[v, a] if grp[v] >= 0 else 0.0) + rn * nrm[a]
            if n_push == 0:
                for i in range(4):
                    v = ids[i]
                    if grp[v] >= 0 and toi < tv[v]:
                        tv[v] = toi
    return hits


@njit(cache=True, fastmath=False)
def _group_min(tv, grp, n_groups):
    """Smallest tv over each group's vertices (1 if none)."""
    out = np.ones(n_groups)
    for v in range(tv.shape[0]):
        g = grp[v]
        if g >= 0 and tv[v] < out[g]:
            out[g] = tv[v]
    return out


@dataclass
class CarryStats:
    passes: int = 0        # CCD passes
    carried: int = 0       # free vertices pushed by a collider
    fraction: float = 1.0  # smallest fraction of a collider's remaining keyframed move taken


class ColliderCarry:
    """The collider-first move of a step (module docstring) for a collision mesh whose rows are the
    stepper's vertex rows. group (n,) int32: collider body index of each vertex, -1 for the rest;
    carriable (n,) bool: free surface vertices that belong to no tet; keep (m): a pair keeps at least
    min(eta s0, keep) of its contact distance s0 (the stepper: KEEP_DHAT dhat, so the carry brings no
    pair farther than that into the barrier's range)."""

    def __init__(self, mesh, group: np.ndarray, n_groups: int, carriable: np.ndarray, keep: float,
                 eta: float = ETA):
        self.mesh = mesh
        self.group = np.ascontiguousarray(group, np.int32)
        self.n_groups = int(n_groups)
        self.carriable = np.ascontiguousarray(carriable, np.bool_)
        self.eta = float(eta)
        self.keep = float(keep)
        self.rows = np.nonzero(self.group >= 0)[0]
        self.last = CarryStats()

    def pending(self, x: np.ndarray, target: np.ndarray, tol: float) -> bool:
        """Some collider vertex is more than tol (m) from its target."""
        r = self.rows
        return bool(len(r)) and float(np.abs(x[r] - target[r]).max()) > tol

    def apply(self, x: np.ndarray, target: np.ndarray) -> CarryStats:
        """Move the colliders towards their targets (n, 3) m, carrying what is in their way: x (n, 3)
        is updated in place to the last checked configuration. Returns the pass statistics."""
        m = self.mesh
        n = len(x)
        x0 = np.ascontiguousarray(x, np.float64)
        grp = self.group.copy()
        w = np.zeros((n, 3))
        w[self.rows] = target[self.rows] - x0[self.rows]
        t = np.ones(self.n_groups)
        verts = np.arange(m.n_verts, dtype=np.int32).reshape(-1, 1)
        args = (m.faces, m.edges, m.vertex_body, m.self_contact, m.body_static, m.vertex_offset, m.face_offset,
                m.edge_offset, self.eta, self.keep)
        cuts = 0
        st = CarryStats()
        for k in range(MAX_PASSES + 1):
            moving = grp >= 0
            p = np.zeros((n, 3))
            p[moving] = t[grp[moving], None] * w[moving]
            x1 = x0 + p
            tv = np.ones(n)
            hit_g = -np.ones(n, np.int32)
            hit_w = np.zeros((n, 3))
            grow = k < GROW_PASSES
            vlo, vhi = element_boxes(x0, x1, verts, m.vertex_offset)
            flo, fhi = element_boxes(x0, x1, m.faces, m.face_offset)
            elo, ehi = element_boxes(x0, x1, m.edges, m.edge_offset)
            hits = _push_pairs(x0, p, vlo, vhi, flo, fhi, 0, *args, grp, w, self.carriable, grow, tv, hit_g, hit_w)
            hits += _push_pairs(x0, p, elo, ehi, elo, ehi, 1, *args, grp, w, self.carriable, grow, tv, hit_g,
                                hit_w)
            st.passes = k + 1
            if hits == 0:
                x[:] = x1
                break
            new = hit_g >= 0
            grp[new] = hit_g[new]
            w[new] = hit_w[new]
            tg = _group_min(tv, grp, self.n_groups)
            if (tg < 1.0).any():
                if cuts < SCALED_PASSES and k < MAX_PASSES - 1:
                    t = np.where(tg < 1.0, t * SHRINK * tg, t)
                elif k < MAX_PASSES - 1:
                    t = np.where(tg < 1.0, 0.0, t)
                else:
                    t[:] = 0.0
                cuts += 1
            elif k == MAX_PASSES - 1:
                t[:] = 0.0
        st.carried = int(((grp >= 0) & (self.group < 0)).sum())
        moved = np.unique(self.group[self.rows]) if len(self.rows) else np.zeros(0, np.int64)
        st.fraction = float(t[moved].min()) if len(moved) else 1.0
        self.last = st
        return st
