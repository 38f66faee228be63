"""The fast solver's no-intersection guarantee (blockdescent/bounds.py), checked by brute force.

bounds.detect gives every surface vertex i an admissible set for its move delta_i = x_i - x0_i: the
ball |delta_i| <= gamma r (r the query distance) cut by one half-space u . delta_i <= gamma s_k(x0)
per pair k of i with s_k(x0) < r, u the unit vector from i's own primitive's closest point to the
other primitive's (u = -n_k on side A, +n_k on side B; this is independent of the order the broad
phase lists the two edges of an edge-edge pair in). A vertex with MAX_CONSTRAINTS or more such pairs
gets the ball radius gamma s of its MAX_CONSTRAINTS-th closest pair instead, and keeps only the
half-spaces with a bound below that radius (the ball implies the rest). Its docstring proves that
every configuration with all delta_i admissible, and every straight path between two of them, keeps
every pair at s_k(x) >= (1 - 2 gamma) min(s_k(x0), r) > 0.

Here, for small meshes (cloth patches with self contact, coarse and fine, a point just above a
triangle, rods crossing, the end of one rod above another) at random detection points and query
distances:

* every pair of the contact model is enumerated without a broad phase and its closest points found
  by enumerating the faces of the point-triangle / segment-segment problem (no shared distance
  code): that gives the sets the docstring PROMISES (radii, and each vertex's half-spaces u, b);
* test_the_claim_holds_for_the_promised_sets: random admissible configurations of the promised sets
  (uniform by rejection, on the boundary along random rays, and adversarial: every vertex of a pair
  moved as far as its set allows towards the other side, the same plus the largest tangential slide,
  every vertex at the limit of one of its own half-spaces, farther pairs pushed together through the
  balls) and points on straight paths between two of them keep s_k >= (1 - 2 gamma) min(s_k(x0), r)
  for every brute-force pair, with no edge-triangle intersection and every pair that gets closer
  than dhat in the barrier list; the adversarial ones reach the bound (within 1%), so the check is
  tight, and test_the_check_catches_a_wrong_constraint shows that it reports violations when fed a
  wrong set (b 1.3x too large, or u of the wrong sign);
* test_detection_gives_the_promised_sets: bounds.detect returns exactly those radii and half-spaces
  (per vertex, as a multiset: the broad phase missed nothing) and, as barrier list, exactly the pairs
  with s0 < dhat / (1 - 2 gamma);
* test_detection_sets_keep_every_pair_apart: the claim check run with the detection's own sets.
The last two caught edge-edge pairs whose closest point is an end point of the pair's second edge
getting u of the wrong sign (306 of 2,164 half-spaces on the coarse patches; the rods crossed, s down
to -0.57 mm, inside the detection's sets), fixed in cc38917; test_edge_endpoint_half_space_sign is the
minimal reproduction. Fixed seeds; the pair rules are the Newton solver's (no incident primitives, no
self contact for bodies without it, no static/static pairs).
"""
import numpy as np
import pytest

from solver_server.solvers.block_descent.bounds import GAMMA, MAX_CONSTRAINTS, detect
from solver_server.contact import (CollisionMesh, count_intersections, edge_edge_dist2_batch,
                                       point_triangle_dist2_batch)
from solver_server.threads import threads_for
from solver_server.model.primitives import grid_sheet

DHAT = 1e-3
R_MIN = DHAT / (1 - 2 * GAMMA)       # detect never queries below this distance


# --- brute force -----------------------------------------------------------------------------------
class AllPairs:
    """Every point-triangle and edge-edge pair the contact model considers, without a broad phase."""

    def __init__(self, mesh: CollisionMesh):
        F, E = mesh.faces, mesh.edges
        vb, sc, st = mesh.vertex_body, mesh.self_contact, mesh.body_static

        def allowed(ba, bb):
            return not (ba == bb and not sc[ba]) and not (st[ba] and st[bb])

        pt = [(v, f) for v in range(mesh.n_verts) for f in range(len(F))
              if v not in F[f] and allowed(vb[v], vb[F[f, 0]])]
        ee = [(a, b) for a in range(len(E)) for b in range(a + 1, len(E))
              if not set(E[a]) & set(E[b]) and allowed(vb[E[a, 0]], vb[E[b, 0]])]
        pt = np.array(pt, np.int64).reshape(-1, 2)
        ee = np.array(ee, np.int64).reshape(-1, 2)
        self.ids = np.concatenate([np.column_stack([pt[:, 0], F[pt[:, 1]]]).reshape(-1, 4),
                                   np.column_stack([E[ee[:, 0]], E[ee[:, 1]]]).reshape(-1, 4)]).astype(np.int32)
        self.is_ee = np.r_[np.zeros(len(pt)), np.ones(len(ee))].astype(np.uint8)
        self.off = np.r_[mesh.vertex_offset[pt[:, 0]] + mesh.face_offset[pt[:, 1]],
                         mesh.edge_offset[ee[:, 0]] + mesh.edge_offset[ee[:, 1]]]
        self.npt = len(pt)

    def s(self, x):
        """Contact distances (K,) of every pair at x, from the squared-distance batch kernels."""
        if not hasattr(self, "_cols"):
            p = self.npt
            self._cols = ([np.ascontiguousarray(self.ids[:p, j], np.intp) for j in range(4)],
                          [np.ascontiguousarray(self.ids[p:, j], np.intp) for j in range(4)])
        pt, ee = self._cols
        d2 = np.empty(len(self.ids))
        with threads_for(len(self.ids)):             # small batches: a parallel launch costs more than it saves
            d2[:self.npt] = point_triangle_dist2_batch(*(x[c] for c in pt))
            d2[self.npt:] = edge_edge_dist2_batch(*(x[c] for c in ee))
        return np.sqrt(d2) - self.off

    def subset(self, idx):
        """The pairs idx (ascending) as an AllPairs of their own."""
        sub = AllPairs.__new__(AllPairs)
        sub.ids, sub.is_ee, sub.off = self.ids[idx], self.is_ee[idx], self.off[idx]
        sub.npt = int((idx < self.npt).sum())
        keys = self.keys()
        sub._keys = [keys[k] for k in idx]
        return sub

    def keys(self, rows=None, is_ee=None):
        """Order-free keys: a point-triangle pair by (point, face), an edge-edge pair by its two edges."""
        if rows is None:
            if not hasattr(self, "_keys"):
                self._keys = self.keys(self.ids, self.is_ee)
            return self._keys
        is_ee = self.is_ee if is_ee is None else is_ee
        out = []
        for r, e in zip(rows, is_ee):
            r = [int(v) for v in r]
            if e:
                out.append((1,) + tuple(sorted([tuple(sorted(r[:2])), tuple(sorted(r[2:]))])))
            else:
                out.append((0, r[0], tuple(sorted(r[1:]))))
        return out


def _closest_on_segment(p, a, b):
    d = b - a
    t = np.clip((p - a) @ d / (d @ d), 0.0, 1.0)
    return a + t * d


def closest_point_triangle(p, a, b, c):
    """Closest point of triangle abc to p: the plane projection if it lies inside, else the best of the
    three clamped edge projections (the minimum of a convex function over the triangle lies in its
    interior, where the gradient vanishes, or on its boundary)."""
    cands = [_closest_on_segment(p, a, b), _closest_on_segment(p, b, c), _closest_on_segment(p, c, a)]
    nrm = np.cross(b - a, c - a)
    q = p - (p - a) @ nrm / (nrm @ nrm) * nrm
    bary = [np.cross(c - b, q - b) @ nrm, np.cross(a - c, q - c) @ nrm, np.cross(b - a, q - a) @ nrm]
    if min(bary) >= 0.0:
        cands.append(q)
    return min(cands, key=lambda z: (z - p) @ (z - p))


def closest_points_segments(p0, p1, q0, q1):
    """Closest points (on pq0-p1, on q0-q1) of two segments: the interior stationary point when it
    exists, else the best of the four boundary cases (one parameter at 0 or 1, the other clamped)."""
    d1, d2, w = p1 - p0, q1 - q0, p0 - q0
    a, b, c, d, e = d1 @ d1, d1 @ d2, d2 @ d2, d1 @ w, d2 @ w
    cands = []
    det = a * c - b * b
    if det > 1e-14 * a * c:
        s, t = (b * e - c * d) / det, (a * e - b * d) / det
        if 0 <= s <= 1 and 0 <= t <= 1:
            cands.append((p0 + s * d1, q0 + t * d2))
    for P in (p0, p1):
        cands.append((P, _closest_on_segment(P, q0, q1)))
    for Q in (q0, q1):
        cands.append((_closest_on_segment(Q, p0, p1), Q))
    return min(cands, key=lambda z: (z[0] - z[1]) @ (z[0] - z[1]))


def expected_sets(x0, allp, s0, r):
    """What bounds.py promises, by brute force: radius (n,) and for each vertex the list of (u, b) of
    its half-spaces, plus the closest-pair direction (from side A to side B) of every pair with s < r."""
    n = len(x0)
    near = np.nonzero(s0 < r)[0]
    per_vertex = [[] for _ in range(n)]
    for k in near:
        ids = allp.ids[k]
        P = x0[ids]
        if allp.is_ee[k]:
            ca, cb = closest_points_segments(P[0], P[1], P[2], P[3])
            side_a = [True, True, False, False]
        else:
            ca, cb = P[0], closest_point_triangle(P[0], P[1], P[2], P[3])
            side_a = [True, False, False, False]
        d = np.linalg.norm(ca - cb)
        # the brute-force closest points reproduce the distance kernels' distance
        assert d - allp.off[k] == pytest.approx(s0[k], rel=1e-9, abs=1e-15)
        n_ab = (cb - ca) / d                     # from side A's closest point to side B's
        for v, a in zip(ids, side_a):
            per_vertex[v].append((s0[k], n_ab if a else -n_ab))
    radius = np.full(n, GAMMA * r)
    cons = []
    for v in range(n):
        ss = sorted(e[0] for e in per_vertex[v])
        if len(ss) >= MAX_CONSTRAINTS:
            radius[v] = GAMMA * min(r, ss[MAX_CONSTRAINTS - 1])
        cons.append([(u, GAMMA * sk) for sk, u in per_vertex[v] if GAMMA * sk < radius[v]])
    counts = np.array([len(p) for p in per_vertex])
    return radius, cons, counts


# --- meshes ----------------------------------------------------------------------------------------
def _two_patches(quads, gap, turn, noise):
    V1, T1, _ = grid_sheet((0.06, 0.06), (quads, quads), center=(0, 0, 0))
    V2, T2, _ = grid_sheet((0.06, 0.06), (quads, quads), center=(0, 0, 0))
    c, s = np.cos(turn), np.sin(turn)
    V2 = V2 @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]).T + [0.005, 0.003, gap]
    V = np.vstack([V1, V2])
    F = np.vstack([T1, T2 + len(V1)]).astype(np.int32)
    n = len(V)
    vb = np.r_[np.zeros(len(V1)), np.ones(len(V2))].astype(np.int32)
    mesh = CollisionMesh.build(n, F, vertex_offset=np.full(n, 5e-4), vertex_body=vb, body_friction=np.zeros(2),
                               self_contact=np.array([1, 1]), rest_positions=V)
    return V, mesh, noise


def two_patches():
    """Two cloth patches (self contact on, thickness 1 mm) 2.5 mm apart, the upper one turned 20 deg; most
    vertices have MAX_CONSTRAINTS or more pairs within the query distance (shrunken balls)."""
    return _two_patches(3, 0.0025, 0.35, 4e-4)


def fine_patches():
    """Two finer patches (7.5 mm edges) 1.8 mm apart, ~5,000 pairs within the query distance (slow)."""
    return _two_patches(8, 0.0018, 0.5, 1.5e-4)


def point_near_triangle():
    """A small triangle (body 1) whose tip is 0.8 mm above the interior of a big one (body 0)."""
    V = np.array([[0, 0, 0], [0.05, 0, 0], [0, 0.05, 0],
                  [0.012, 0.015, 0.0008], [0.03, 0.02, 0.02], [0.02, 0.04, 0.015]], float)
    F = np.array([[0, 1, 2], [3, 4, 5]], np.int32)
    mesh = CollisionMesh.build(6, F, vertex_offset=np.zeros(6), vertex_body=np.array([0, 0, 0, 1, 1, 1]),
                               body_friction=np.zeros(2), self_contact=np.array([0, 0]), rest_positions=V)
    return V, mesh, 2e-4


def crossing_edges():
    """Two rods (polylines of 3 edges, 0.4 mm radius) crossing with a 1.2 mm gap between centre lines."""
    t = np.linspace(-0.03, 0.03, 4)
    A = np.column_stack([t, 0.002 * np.sin(40 * t), np.zeros(4)])
    B = np.column_stack([0.001 + 0.003 * np.cos(30 * t), t, np.full(4, 0.0012)])
    V = np.vstack([A, B])
    E = np.array([[0, 1], [1, 2], [2, 3], [4, 5], [5, 6], [6, 7]], np.int32)
    mesh = CollisionMesh.build(8, np.zeros((0, 3), np.int32), edges=E, vertex_offset=np.full(8, 4e-4),
                               vertex_body=np.array([0] * 4 + [1] * 4), body_friction=np.zeros(2),
                               self_contact=np.array([1, 1]), rest_positions=V)
    return V, mesh, 1e-4


def rod_end_over_rod():
    """Two rods (0.4 mm radius): the first end of the second rod 1.3 mm above the middle of the first,
    so the closest point of their nearest edge pair is an end point of the pair's second edge."""
    t = np.linspace(-0.03, 0.03, 4)
    A = np.column_stack([t, 0.002 * np.sin(40 * t), np.zeros(4)])
    B = np.column_stack([np.full(4, 0.004), 0.003 * np.sin(30 * t + 1), 0.0013 + 0.01 * (t + 0.03)])
    V = np.vstack([A, B])
    E = np.array([[0, 1], [1, 2], [2, 3], [4, 5], [5, 6], [6, 7]], np.int32)
    mesh = CollisionMesh.build(8, np.zeros((0, 3), np.int32), edges=E, vertex_offset=np.full(8, 4e-4),
                               vertex_body=np.array([0] * 4 + [1] * 4), body_friction=np.zeros(2),
                               self_contact=np.array([1, 1]), rest_positions=V)
    return V, mesh, 1e-4


MESHES = {"two_cloth_patches": two_patches, "fine_cloth_patches": fine_patches,
          "point_near_triangle": point_near_triangle, "crossing_edges": crossing_edges,
          "rod_end_over_rod": rod_end_over_rod}


# --- admissible configurations ---------------------------------------------------------------------
class Sets:
    """Per-vertex admissible sets {|d| <= R, U d <= B} (the detection's, possibly mutated) and samplers."""

    def __init__(self, radius, start, U, B):
        self.R = radius
        self.U = [U[start[v]:start[v + 1]] for v in range(len(radius))]
        self.B = [B[start[v]:start[v + 1]] for v in range(len(radius))]

    def ray(self, v, d):
        """The farthest point t d (t >= 0) of vertex v's set along direction d (the set holds 0)."""
        t = self.R[v] / np.linalg.norm(d)
        ud = self.U[v] @ d
        pos = ud > 0
        if pos.any():
            t = min(t, (self.B[v][pos] / ud[pos]).min())
        return t * d

    def uniform(self, v, rng):
        """A uniform sample of vertex v's set by rejection from its ball (fallback: a random point on a
        random ray, still inside since the set is convex and holds 0)."""
        d = rng.standard_normal((64, 3))
        d *= (self.R[v] * rng.uniform(0, 1, (64, 1)) ** (1 / 3)) / np.linalg.norm(d, axis=1)[:, None]
        ok = (d @ self.U[v].T <= self.B[v]).all(axis=1)
        if ok.any():
            return d[np.argmax(ok)]
        return rng.uniform() * self.ray(v, rng.standard_normal(3))

    def contains(self, v, d, tol):
        return np.linalg.norm(d) <= self.R[v] * (1 + 1e-12) and (self.U[v] @ d <= self.B[v] + tol).all()


def _tangent(u, rng):
    t = rng.standard_normal(3)
    t -= (t @ u) * u
    return t / np.linalg.norm(t)


def admissible_configurations(x0, allp, s0, r, sets, rng, per_kind):
    """Random admissible configurations: uniform, on random rays, and adversarial (see module doc)."""
    n = len(x0)
    to_b = {}                                      # pair -> per-vertex direction towards the other side

    def towards(k):
        if k not in to_b:
            ids = allp.ids[k]
            P = x0[ids]
            if allp.is_ee[k]:
                ca, cb = closest_points_segments(P[0], P[1], P[2], P[3])
                side_a = [True, True, False, False]
            else:
                ca, cb = P[0], closest_point_triangle(P[0], P[1], P[2], P[3])
                side_a = [True, False, False, False]
            nab = (cb - ca) / np.linalg.norm(cb - ca)
            to_b[k] = [(v, nab if a else -nab) for v, a in zip(ids, side_a)]
        return to_b[k]

    order = np.argsort(s0)
    near = order[s0[order] < r]
    far = order[s0[order] >= r]
    hot = list(near[:6]) + list(rng.choice(near, min(len(near), 6), replace=False)) if len(near) else []
    out = []
    for j in range(per_kind):
        base = np.array([sets.uniform(v, rng) for v in range(n)])
        out.append(("uniform", x0 + base))
        out.append(("ray", x0 + np.array([sets.ray(v, rng.standard_normal(3)) for v in range(n)])))
        # every vertex at the limit of one of its own half-spaces (towards the other side of that pair)
        d = base.copy()
        for v in range(n):
            if len(sets.U[v]):
                d[v] = sets.ray(v, sets.U[v][rng.integers(len(sets.U[v]))])
        out.append(("own_limit", x0 + d))
        if hot:
            k = hot[j % len(hot)]
            d = base.copy()
            for v, u in towards(k):
                d[v] = sets.ray(v, u)                 # as far towards the other side as admitted
            out.append(("push_pair", x0 + d))
            d = base.copy()
            for v, u in towards(k):                   # the same plus the largest tangential slide
                b = sets.ray(v, u) @ u
                d[v] = sets.ray(v, b * u + np.sqrt(max(sets.R[v] ** 2 - b * b, 0.0)) * _tangent(u, rng))
            out.append(("push_and_slide", x0 + d))
        if len(far):
            k = far[min(j, len(far) - 1)] if j % 2 else rng.choice(far[:20])
            d = base.copy()
            for v, u in towards(k):
                d[v] = sets.ray(v, u)
            out.append(("push_far_pair", x0 + d))
    return out


def claim_check(x0, mesh, allp, s0, r, sets, kept, rng, per_kind=24, n_paths=12):
    """Run the samples and paths through the brute-force pair list. Returns (worst ratio
    s(x) / ((1 - 2 gamma) min(s0, r)) over everything, list of failure messages, counts)."""
    # pairs with s0 >= 2 r cannot get near the bound (each vertex moves at most gamma r < r / 2, so
    # s > s0 - r >= r > (1 - 2 gamma) r): leave them out to keep the brute force fast on finer meshes
    idx = np.nonzero(s0 < 2 * r)[0]
    sub = allp.subset(idx)
    s0 = s0[idx]
    floor = (1 - 2 * GAMMA) * np.minimum(s0, r)
    all_keys = sub.keys()
    fails = []
    worst = np.inf
    checked = 0

    def check(kind, x):
        nonlocal worst, checked
        checked += 1
        s = sub.s(x)
        ratio = s / floor
        worst = min(worst, float(ratio.min()))
        if (ratio < 1 - 1e-9).any():
            k = int(np.argmin(ratio))
            fails.append(f"{kind}: pair {all_keys[k]} s = {s[k]:.4e} < (1 - 2 gamma) min(s0, r) = {floor[k]:.4e}")
        missing = [all_keys[k] for k in np.nonzero(s < DHAT)[0] if all_keys[k] not in kept]
        if missing:
            fails.append(f"{kind}: pairs within dhat not in the barrier list: {missing}")
        if len(mesh.faces) and count_intersections(x, mesh.faces, mesh.edges):
            fails.append(f"{kind}: edge-triangle intersection")

    configs = admissible_configurations(x0, sub, s0, r, sets, rng, per_kind)
    for kind, x in configs:
        check(kind, x)
    for _ in range(n_paths):                         # straight paths between two admissible configurations
        (ka, a), (kb, b) = configs[rng.integers(len(configs))], configs[rng.integers(len(configs))]
        for t in np.linspace(0, 1, 9)[1:-1]:
            check(f"path {ka}-{kb}", (1 - t) * a + t * b)
    return worst, fails, configs, checked


def _detection_points(V, allp, noise, rng, count):
    for _ in range(count):
        while True:
            x0 = V + noise * rng.standard_normal(V.shape)
            s0 = allp.s(x0)
            if s0.min() > 0:
                break
        r_query = float(rng.choice([0.0, DHAT, 0.003, 0.008]))
        yield x0, s0, r_query


_PAIRS = {}


def _all_pairs(name):
    if name not in _PAIRS:
        V, mesh, noise = MESHES[name]()
        _PAIRS[name] = (V, mesh, noise, AllPairs(mesh))
    return _PAIRS[name]


def _csr(cons):
    start = np.r_[0, np.cumsum([len(c) for c in cons])].astype(np.int64)
    U = np.array([u for c in cons for u, _ in c]).reshape(-1, 3)
    B = np.array([b for c in cons for _, b in c])
    return start, U, B


def _constraint_mismatches(det, cons, scale):
    """Compare the detection's half-spaces of every vertex with the brute-force ones as multisets.
    Returns (missing, wrong_sign, extra): expected half-spaces the detection lacks, how many of those
    it has with u negated instead, and detection half-spaces matching nothing expected."""
    st = det.cs_start
    missing, wrong_sign, extra = [], 0, 0
    for v, want in enumerate(cons):
        U, B = det.cs_u[st[v]:st[v + 1]], det.cs_b[st[v]:st[v + 1]]
        used = np.zeros(len(U), bool)
        for u, b in want:
            same_b = np.abs(B - b) <= 1e-9 * scale
            ok = ~used & same_b & (np.abs(U - u).max(axis=1) <= 1e-7)
            if ok.any():
                used[np.argmax(ok)] = True
                continue
            missing.append((v, u, b))
            flipped = ~used & same_b & (np.abs(U + u).max(axis=1) <= 1e-7)
            if flipped.any():
                used[np.argmax(flipped)] = True
                wrong_sign += 1
        extra += int((~used).sum())
    return missing, wrong_sign, extra


def _mesh(name, sign_bug=None):
    """A parametrised mesh name (sign_bug: the edge-edge orientation bug this mesh exposed before
    bounds._constraints oriented n_k by the coefficient sum; kept as documentation)."""
    marks = [pytest.mark.slow] if name == "fine_cloth_patches" else []
    return pytest.param(name, marks=marks)


@pytest.mark.parametrize("name", [_mesh(m) for m in MESHES])
def test_the_claim_holds_for_the_promised_sets(name):
    """The docstring's proof, by brute force: the sets bounds.py promises (computed here without the
    solver's code) keep every pair at s >= (1 - 2 gamma) min(s0, r), and the adversarial samples reach
    that bound. The barrier list checked against is the promised one (pairs with s0 < dhat / (1 - 2 gamma))."""
    V, mesh, noise, allp = _all_pairs(name)
    assert len(allp.ids) > 0
    rng = np.random.default_rng(2024)
    all_keys = allp.keys()
    worst = np.inf
    n_checked = n_capped = n_cons = 0
    kinds = set()
    for x0, s0, r_query in _detection_points(V, allp, noise, rng, 5):
        r = max(r_query, R_MIN)
        radius, cons, counts = expected_sets(x0, allp, s0, r)
        n_capped += int((counts >= MAX_CONSTRAINTS).sum())
        start, U, B = _csr(cons)
        n_cons += len(B)
        sets = Sets(radius, start, U, B)
        kept = {all_keys[k] for k in np.nonzero(s0 < R_MIN)[0]}
        w, fails, configs, checked = claim_check(x0, mesh, allp, s0, r, sets, kept, rng)
        for kind, x in configs:                      # the samplers really stay inside the sets
            assert all(sets.contains(v, x[v] - x0[v], 1e-12 * r) for v in range(len(x0))), kind
        assert not fails, f"{len(fails)} violations, first: {fails[:3]}"
        worst = min(worst, w)
        n_checked += checked
        kinds |= {k for k, _ in configs}
    assert n_checked >= 5 * 100 and n_cons > 0
    assert {"uniform", "ray", "own_limit", "push_pair", "push_and_slide"} <= kinds
    assert worst >= 1.0 - 1e-9
    # the adversarial samples reach the bound: the proof is tight here, and the check is not vacuous
    assert worst < 1.01, f"closest approach {worst:.4f} x the bound"
    if "patches" in name:
        assert n_capped > 0                          # some balls were shrunk to the MAX_CONSTRAINTS-th pair


@pytest.mark.parametrize("name", [
    _mesh("two_cloth_patches", "306 of the 2,164 half-spaces at the 5 detection points differ from the brute "
                               "force, all 306 by u's sign; the point-triangle half-spaces of the same vertices "
                               "still keep the sampled cloth configurations apart"),
    _mesh("fine_cloth_patches", "1,462 of 11,490 half-spaces, all by u's sign"),
    _mesh("point_near_triangle"),
    _mesh("crossing_edges"),
    _mesh("rod_end_over_rod", "56 of 116 half-spaces, all by u's sign")])
def test_detection_gives_the_promised_sets(name):
    """bounds.detect's radii, half-spaces (u and b, per vertex, as a multiset) and barrier list equal
    the brute-force ones, at random detection points and query distances."""
    V, mesh, noise, allp = _all_pairs(name)
    rng = np.random.default_rng(2024)
    on_surface = np.ones(mesh.n_verts, bool)
    all_keys = allp.keys()
    n_want = n_missing = n_wrong = n_extra = 0
    for x0, s0, r_query in _detection_points(V, allp, noise, rng, 5):
        det = detect(x0, mesh, r_query, DHAT, on_surface)
        r = max(r_query, R_MIN)
        np.testing.assert_array_equal(det.center, x0)
        radius, cons, counts = expected_sets(x0, allp, s0, r)
        np.testing.assert_allclose(det.radius, radius, rtol=1e-12, atol=0)
        st = det.cs_start
        assert st[0] == 0 and (np.diff(st) >= 0).all() and st[-1] == len(det.cs_u) == len(det.cs_b)
        np.testing.assert_allclose(np.linalg.norm(det.cs_u, axis=1), 1.0, rtol=1e-12)
        np.testing.assert_array_equal(np.diff(st), [len(c) for c in cons])
        missing, wrong, extra = _constraint_mismatches(det, cons, r)
        n_want += sum(len(c) for c in cons)
        n_missing += len(missing)
        n_wrong += wrong
        n_extra += extra
        if s0.min() < r:
            assert det.min_distance == pytest.approx(s0.min(), rel=1e-12)
        det_keys = allp.keys(det.ids, det.is_ee)
        assert len(set(det_keys)) == len(det_keys)   # no duplicate barrier pairs
        assert set(det_keys) == {all_keys[k] for k in np.nonzero(s0 < R_MIN)[0]}
    assert n_want > 0
    assert n_missing == 0 and n_extra == 0, (
        f"{n_missing} of {n_want} half-spaces differ from the brute force ({n_wrong} of them with u of the "
        f"wrong sign), {n_extra} unexpected")


@pytest.mark.parametrize("name", [
    _mesh("two_cloth_patches"), _mesh("fine_cloth_patches"), _mesh("point_near_triangle"), _mesh("crossing_edges"),
    _mesh("rod_end_over_rod", "560 violations among the samples and path points; closest approach s = -0.57 mm "
                              "(the rods cross) where the claim promises s >= 0.24 mm; rods have no faces, so no "
                              "point-triangle half-space covers for the wrong ones")])
def test_detection_sets_keep_every_pair_apart(name):
    """The claim with the sets bounds.detect actually returns: the same samples and paths as above."""
    V, mesh, noise, allp = _all_pairs(name)
    rng = np.random.default_rng(2024)
    on_surface = np.ones(mesh.n_verts, bool)
    worst = np.inf
    all_fails = []
    for x0, s0, r_query in _detection_points(V, allp, noise, rng, 5):
        det = detect(x0, mesh, r_query, DHAT, on_surface)
        r = max(r_query, R_MIN)
        sets = Sets(det.radius, det.cs_start, det.cs_u, det.cs_b)
        w, fails, configs, _ = claim_check(x0, mesh, allp, s0, r, sets, set(allp.keys(det.ids, det.is_ee)), rng)
        for kind, x in configs:
            assert all(sets.contains(v, x[v] - x0[v], 1e-12 * r) for v in range(len(x0))), kind
        worst = min(worst, w)
        all_fails += fails
    assert not all_fails, (f"{len(all_fails)} violations, closest approach {worst:.3f} x the bound; "
                           f"first: {all_fails[:2]}")
    assert worst >= 1.0 - 1e-9


@pytest.mark.parametrize("name", ["two_cloth_patches", "point_near_triangle", "crossing_edges"])
@pytest.mark.parametrize("mutant", ["b_1.3x", "u_flipped"])
def test_the_check_catches_a_wrong_constraint(name, mutant):
    """The claim check above, fed with a deliberately wrong version of the promised sets, reports
    violations (a test of the test)."""
    V, mesh, noise, allp = _all_pairs(name)
    rng = np.random.default_rng(7)
    all_keys = allp.keys()
    worst = np.inf
    for x0, s0, r_query in _detection_points(V, allp, noise, rng, 2):
        r = max(r_query, R_MIN)
        radius, cons, _ = expected_sets(x0, allp, s0, r)
        start, U, B = _csr(cons)
        if mutant == "b_1.3x":
            B = 1.3 * B
        else:
            U = -U
        kept = {all_keys[k] for k in np.nonzero(s0 < R_MIN)[0]}
        w, fails, _, _ = claim_check(x0, mesh, allp, s0, r, Sets(radius, start, U, B), kept, rng)
        worst = min(worst, w)
        if s0.min() < r:                            # a constrained pair exists: the mutant must be caught
            assert fails, f"{mutant}: no violation found (closest approach {w:.3f} x the bound)"
    assert worst < 1.0


@pytest.mark.parametrize("first", [
    "crossed_rod_first",  # the case that exposed the edge-edge orientation bug (fixed)
    "endpoint_rod_first"])
def test_edge_endpoint_half_space_sign(first):
    """Minimal reproduction of the orientation bug fixed in cc38917: an edge-edge pair whose closest
    point is an end point of one edge, with either edge listed first. Every half-space must point from
    the vertex towards the other edge, and moving the end point as far as admitted straight at the
    other rod must keep the bound."""
    V = np.array([[-0.01, 0, 0], [0.01, 0, 0], [0.001, 0.0005, 0.0012], [0.001, 0.0005, 0.0112]])
    E = np.array([[0, 1], [2, 3]] if first == "crossed_rod_first" else [[2, 3], [0, 1]], np.int32)
    mesh = CollisionMesh.build(4, np.zeros((0, 3), np.int32), edges=E, vertex_offset=np.full(4, 4e-4),
                               vertex_body=np.array([0, 0, 1, 1]), body_friction=np.zeros(2),
                               self_contact=np.array([0, 0]), rest_positions=V)
    det = detect(V, mesh, 0.004, DHAT, np.ones(4, bool))

    def s(x):
        return float(np.sqrt(edge_edge_dist2_batch(x[[0]], x[[1]], x[[2]], x[[3]]))[0]) - 8e-4

    s0 = s(V)
    assert det.cs_start.tolist() == [0, 1, 2, 3, 4] and len(det.ids) == 1
    ca, cb = closest_points_segments(V[0], V[1], V[2], V[3])          # on the first rod, the end point
    to_b = (cb - ca) / np.linalg.norm(cb - ca)
    sets = Sets(det.radius, det.cs_start, det.cs_u, det.cs_b)
    x = V.copy()
    x[2] += sets.ray(2, -to_b)                                          # the end point straight at rod A
    assert s(x) >= (1 - 2 * GAMMA) * s0 - 1e-12, f"s0 = {s0:.3e} m, after the admitted move s = {s(x):.3e} m"
    np.testing.assert_allclose(det.cs_u, [to_b, to_b, -to_b, -to_b], atol=1e-12)   # rod A's towards B


def test_interior_vertices_get_no_ball_and_gamma_is_checked():
    V, _, _ = point_near_triangle()
    V = np.vstack([V, [0.5, 0.5, 0.5]])               # vertex 6: on no face or edge (an interior tet node)
    F = np.array([[0, 1, 2], [3, 4, 5]], np.int32)
    mesh = CollisionMesh.build(7, F, vertex_body=np.array([0, 0, 0, 1, 1, 1, 1]), body_friction=np.zeros(2),
                               self_contact=np.array([0, 0]), rest_positions=V)
    on_surface = np.r_[np.ones(6, bool), False]
    for r_query in (0.0, 0.01):
        det = detect(V, mesh, r_query, DHAT, on_surface)
        assert np.isinf(det.radius[6]) and det.cs_start[7] == det.cs_start[6]   # no ball, no half-space
        np.testing.assert_allclose(det.radius[:6], GAMMA * max(r_query, R_MIN), rtol=1e-15)
    for bad in (0.0, 0.5, 0.7):
        with pytest.raises(ValueError):
            detect(V, mesh, 0.0, DHAT, on_surface, gamma=bad)


def test_detect_refuses_an_already_intersecting_configuration():
    V, mesh, _ = point_near_triangle()
    x = V.copy()
    x[3, 2] = 0.0                                    # the tip touches the big triangle: s = 0
    with pytest.raises(RuntimeError):
        detect(x, mesh, 0.0, DHAT, np.ones(6, bool))


@pytest.mark.parametrize("name", ["two_cloth_patches", "point_near_triangle", "crossing_edges", "rod_end_over_rod"])
def test_verlet_list_gives_the_same_detection(name):
    """bounds.PairCache (one broad phase serving several detections while every vertex stays within
    its margin): a sequence of detections at drifting configurations, some within the margin (the
    list is reused) and some beyond it (rebuilt), returns exactly the brute-force radii, half-spaces
    and barrier list every time, as a fresh broad phase does."""
    from solver_server.solvers.block_descent.bounds import MARGIN_FRACTION, PairCache
    V, mesh, noise, allp = _all_pairs(name)
    rng = np.random.default_rng(11)
    on_surface = np.ones(mesh.n_verts, bool)
    all_keys = allp.keys()
    edge = float(np.median(np.linalg.norm(V[mesh.edges[:, 1]] - V[mesh.edges[:, 0]], axis=1)))
    cache = PairCache(mesh, on_surface, edge)
    n_want = 0
    for x0, s0, r_query in _detection_points(V, allp, noise, rng, 3):
        x = x0
        for step in range(6):
            if step:
                # drift: every vertex by the same distance in its own random direction, a quarter of
                # the list's margin (MARGIN_FRACTION r) up to one and a half times it (the pairs' own
                # moves decide which are re-measured; beyond the margin the list is rebuilt), then a
                # common translation by three margins (a rebuild that cannot intersect)
                r = max(r_query, R_MIN)
                size = r * MARGIN_FRACTION * [0.25, 0.5, 1.0, 1.5, 3.0][step - 1]
                d = rng.standard_normal(x.shape) if step < 5 else np.tile(rng.standard_normal(3), (len(x), 1))
                x_try = x + size * d / np.linalg.norm(d, axis=1, keepdims=True)
                if allp.s(x_try).min() <= 0:
                    continue
                x = x_try
            s = allp.s(x)
            det = detect(x, mesh, r_query, DHAT, on_surface, cache=cache)
            r = max(r_query, R_MIN)
            radius, cons, _ = expected_sets(x, allp, s, r)
            np.testing.assert_allclose(det.radius, radius, rtol=1e-12, atol=0)
            np.testing.assert_array_equal(np.diff(det.cs_start), [len(c) for c in cons])
            missing, _, extra = _constraint_mismatches(det, cons, r)
            assert not missing and not extra, f"step {step}: {len(missing)} missing, {extra} extra half-spaces"
            assert set(allp.keys(det.ids, det.is_ee)) == {all_keys[k] for k in np.nonzero(s < R_MIN)[0]}
            n_want += sum(len(c) for c in cons)
    assert n_want > 0
    assert cache.reuses > 0 and cache.builds > 1, (cache.reuses, cache.builds)
