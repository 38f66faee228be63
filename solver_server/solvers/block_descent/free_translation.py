"""Exact linear momentum for isolated bodies in the Fast solver: one Newton step in the translation
subspace of every free cluster at the end of a step.

Implicit Euler conserves the total linear momentum of bodies that touch nothing else only at the
step's minimiser: the incremental potential's gradient there is zero, and summed over a cluster C
it reads sum_C m_i (x_i - y_i) / h^2 = -sum_C dE/dx_i = 0 (elasticity, barrier and friction between
members of C are invariant under a common translation, so their gradients sum to zero). A block-
descent step stopped on its sweep budget leaves a net residual g_C = sum_C g_i, and with it a
momentum error h g_C per step (tests/blockdescent/test_bd_scene_contact.py measured 3-5% of sum |m v|
over a collision).

On the translation subspace x_C + t the potential is exactly quadratic with Hessian sum_C m_i / h^2
(the internal terms do not change), as long as no term couples C to anything outside it. So the step
t = -g_C / (sum_C m_i / h^2) is that subspace's exact minimiser: afterwards sum_C g_i = 0 and the
cluster's momentum balance, sum_C m v^{n+1} = sum_C m v^n + h M_C g_ext (BDF-2: with its h_e, v_hat),
holds to rounding.

A cluster is the set of bodies joined by the step's barrier or friction pairs. It is free when it
holds no collider, no affine body and no prescribed vertex (pin), and it is moved only when no pair
between it and anything else is closer than dhat + |t_C| + |t_other| (every such pair is in the
Verlet list's query at that distance): then no cross pair enters the barrier's range, the subspace
model above is exact, and no intersection can appear (a rigid translation changes no distance inside
the cluster, and a cross pair's distance by at most |t_C| + |t_other|). Nothing is inverted: a
translation does not deform.

Solids resting on or sliding along something (a cluster of solid bodies joined by contact to a
collider, a pinned or an affine body): the Newton step in the same subspace, d = -H_t^{-1} g_C, whose
3x3 Hessian H_t = sum_C m_i / h^2 I + K adds what the cross pairs' barrier and friction contribute
(K by finite differences of g_C, projected to positive semi-definite). It is taken up to the largest common
fraction tau that keeps every vertex of C inside its admissible set of the last detection (bounds.py:
the sets are convex and hold the straight path, so the no-intersection argument is unchanged), and
shortened to the secant estimate of the minimiser along d when the directional derivative has turned
positive by tau. Block descent moves a near-rigid solid's translation slowly (its stiff elasticity
passes a push on one vertex per colour, and the correction's per-vertex cut deforms the body instead
of moving it): a box on an incline slid 24% slower than Coulomb friction allows. Cloth is left to
the sweeps and the stretching correction (its translation is blocked by what it drapes over, and the
two extra gradients over a large sheet cost ~4% of a drape frame for nothing).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .dihedral_cache import DihedralCache, dihedrals_all
from .global_correction import gradient_all
from .bounds import Bounds, ray_fraction
from .incidence import Elements
from .vertex_contact import ContactPack, FrictionPack


@njit(cache=True, fastmath=False)
def common_fraction(x, d, idx, BD):
    """Largest t in [0, 1] with x_i + t d inside the admissible set of every vertex i in idx."""
    nb = np.empty(3)
    cur = np.empty(3)
    t = 1.0
    for k in range(idx.shape[0]):
        v = idx[k]
        for a in range(3):
            cur[a] = x[v, a]
        t = min(t, ray_fraction(v, cur, d, BD, nb))
        if t <= 0.0:
            return 0.0
    return t


FD_STEP = 1.0e-7   # m, finite-difference step of the held clusters' translation Hessian


class FreeTranslation:
    """Per stepper: which vertex rows belong to which body, and which bodies may translate."""

    def __init__(self, sys, presc: np.ndarray, mass: np.ndarray):
        n = sys.n
        self.body_of = np.full(n, -1, np.int64)
        ok, solid = [], []
        for bi, b in enumerate(sys.blocks):
            rows = np.arange(b.offset, min(b.offset + b.n_nodes, n))
            self.body_of[rows] = bi
            ok.append(b.role in ("solid", "cloth", "rod") and len(rows) > 0 and not presc[rows].any()
                      and float(mass[rows].sum()) > 0.0)
            solid.append(b.role == "solid")
        self.free_body = np.array(ok, bool)
        self.solid_body = np.array(solid, bool) & self.free_body
        self.n_bodies = len(sys.blocks)
        self.moved = 0   # clusters translated so far (statistics)

    def _clusters(self, pair_ids) -> np.ndarray:
        """Component label per body, joining the bodies of every pair in pair_ids (list of (K, 4))."""
        src, dst = [np.arange(self.n_bodies)], [np.arange(self.n_bodies)]
        for ids in pair_ids:
            if len(ids):
                b = self.body_of[ids]
                for j in (1, 2, 3):
                    src.append(b[:, 0])
                    dst.append(b[:, j])
        src, dst = np.concatenate(src), np.concatenate(dst)
        keep = (src >= 0) & (dst >= 0)
        g = coo_matrix((np.ones(int(keep.sum())), (src[keep], dst[keep])), shape=(self.n_bodies,) * 2)
        return connected_components(g, directed=False)[1]

    def apply(self, x: np.ndarray, y: np.ndarray, mass: np.ndarray, inv_h2: float, EL: Elements,
              SH: DihedralCache, CT: ContactPack, FR: FrictionPack, BD: Bounds, pairs, dhat: float) -> int:
        """Translate every free cluster of x (n, 3), in place, to its translation subspace's minimiser,
        and every cluster of solids held by contact along its free direction (module docstring).
        pairs: the stepper's PairCache (or None without contact). Returns the clusters moved."""
        label = self._clusters([CT.ids, FR.ids])
        anchored = np.zeros(label.max() + 1, bool)
        np.logical_or.at(anchored, label, ~self.free_body)
        all_solid = np.ones(label.max() + 1, bool)
        np.logical_and.at(all_solid, label, self.solid_body | ~self.free_body)
        has_solid = np.zeros(label.max() + 1, bool)
        np.logical_or.at(has_solid, label, self.solid_body)
        vlabel = np.where(self.body_of >= 0, label[np.maximum(self.body_of, 0)], -1)
        held = np.flatnonzero(anchored & all_solid & has_solid)
        comps = np.flatnonzero(~anchored)
        if not len(held) and not len(comps):
            return 0
        dihedrals_all(x, SH.quad, SH.theta, SH.grad, SH.ok)   # translations leave it valid
        for c in held:
            self._held_step(x, y, mass, inv_h2, EL, SH, CT, FR, BD, c, vlabel)
        if not len(comps):
            return len(held)
        shift = np.zeros((label.max() + 1, 3))
        members = {}
        for c in comps:
            idx = np.ascontiguousarray(np.flatnonzero((vlabel == c) & (mass[:len(vlabel)] > 0.0)), np.int32)
            G = np.zeros((len(idx), 3))
            gradient_all(x, y, mass, inv_h2, idx, EL, SH, CT, FR, G)
            shift[c] = -G.sum(0) / (float(mass[idx].sum()) * inv_h2)
            members[c] = idx
        move = np.r_[np.linalg.norm(shift, axis=1), 0.0]     # last entry: rows on no body
        vlabel = np.where(vlabel >= 0, vlabel, len(move) - 1)
        if pairs is not None and move.max() > 0.0:
            r = dhat + 2.0 * float(move.max())
            ps = pairs.near(x, r)
            if len(ps):
                close = ps.s < r
                lab = vlabel[ps.ids[close]]                          # (k, 4) cluster of each slot
                cross = (lab != lab[:, :1]).any(1)
                need = (move[lab[cross]].max(1) * 2.0 + dhat) if cross.any() else np.zeros(0)
                bad = lab[cross][ps.s[close][cross] < need]
                move[np.unique(bad)] = 0.0                            # too close to something: stay
        moved = 0
        for c in comps:
            if move[c] > 0.0:
                x[members[c]] += shift[c]
                moved += 1
        self.moved += moved
        return moved + len(held)

    def _held_step(self, x, y, mass, inv_h2, EL, SH, CT, FR, BD, c, vlabel) -> None:
        """The translation step of cluster c's free bodies (its held bodies stay), cut at the sets."""
        idx = np.ascontiguousarray(np.flatnonzero((vlabel == c) & (mass[:len(vlabel)] > 0.0)
                                                  & self.free_body[np.maximum(self.body_of, 0)]), np.int32)
        if not len(idx):
            return
        G = np.zeros((len(idx), 3))
        gradient_all(x, y, mass, inv_h2, idx, EL, SH, CT, FR, G)
        g0 = G.sum(0)
        # the translation Hessian: inertia sum m / h^2 exactly, plus what the cross pairs' barrier and
        # friction add, by finite differences of the summed gradient (elasticity and the pairs inside
        # the cluster add nothing); projected to positive semi-definite
        mh = float(mass[idx].sum()) * inv_h2
        K = np.zeros((3, 3))
        xt = x.copy()
        for a in range(3):
            xt[idx, a] += FD_STEP
            gradient_all(xt, y, mass, inv_h2, idx, EL, SH, CT, FR, G)
            K[:, a] = (G.sum(0) - g0) / FD_STEP
            K[a, a] -= mh
            xt[idx, a] = x[idx, a]
        w, V = np.linalg.eigh(0.5 * (K + K.T))
        Ht = (V * np.maximum(w, 0.0)) @ V.T + mh * np.eye(3)
        d = -np.linalg.solve(Ht, g0)
        slope0 = float(g0 @ d)
        if not slope0 < 0.0:
            return
        tau = common_fraction(x, np.ascontiguousarray(d), idx, BD)
        if not tau > 0.0:
            return
        xt[idx] += tau * d                     # a translation: the dihedral cache stays valid
        gradient_all(xt, y, mass, inv_h2, idx, EL, SH, CT, FR, G)
        slope1 = float(G.sum(0) @ d)
        alpha = tau if slope1 <= 0.0 else tau * slope0 / (slope0 - slope1)
        if alpha > 0.0:
            x[idx] += alpha * d
