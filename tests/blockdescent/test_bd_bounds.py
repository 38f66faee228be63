"""The fast solver's no-intersection guarantee (blockdescent/bounds.py), checked by brute force.

bounds.detect gives every surface vertex a ball |x_i - x0_i| <= b_i. Its docstring proves that every
configuration inside all balls, and every straight path between two of them, keeps every contact
pair at s_k(x) >= s_k(x0) - 2 gamma min(r, s_k(x0)) >= (1 - 2 gamma) min(r, s_k(x0)) > 0. Here, for
small random meshes (two cloth patches with self contact, a point just above a triangle, crossing
rod edges), at random detection points:

* every radius equals gamma min(r, min over ALL pairs containing the vertex of s_k(x0)), all pairs
  enumerated by brute force (no broad phase), so the broad phase missed nothing that matters;
* thousands of random configurations inside the balls (uniform, on the ball surfaces, and adversarial
  ones that push both sides of the closest pairs straight at each other) and points on straight paths
  between two of them satisfy the bound for every pair of the brute-force list, so no s_k <= 0;
  for the cloth patches the exact edge-triangle intersection test finds nothing;
* the barrier pair list contains every pair that gets closer than dhat anywhere inside the balls.
Fixed seeds; the pair rules are the Newton solver's (no incident primitives, no self contact for
bodies without it).
"""
import numpy as np
import pytest

from solver_server.blockdescent.bounds import GAMMA, detect
from solver_server.ipc.contact import (CollisionMesh, count_intersections, edge_edge_dist2_batch,
                                       point_triangle_dist2_batch)
from solver_server.ipc.contact.pairs import contact_distances
from solver_server.scene.primitives import grid_sheet

DHAT = 1e-3


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
        self.ids = np.concatenate([np.column_stack([pt[:, 0], F[pt[:, 1]]]),
                                   np.column_stack([E[ee[:, 0]], E[ee[:, 1]]])]).astype(np.int32)
        self.is_ee = np.r_[np.zeros(len(pt)), np.ones(len(ee))].astype(np.uint8)
        self.off = np.r_[mesh.vertex_offset[pt[:, 0]] + mesh.face_offset[pt[:, 1]],
                         mesh.edge_offset[ee[:, 0]] + mesh.edge_offset[ee[:, 1]]]
        self.npt = len(pt)

    def s(self, x):
        """Contact distances (K,) of every pair at x, from the squared-distance batch kernels."""
        i = self.ids
        p = self.npt
        d2 = np.r_[point_triangle_dist2_batch(x[i[:p, 0]], x[i[:p, 1]], x[i[:p, 2]], x[i[:p, 3]]),
                   edge_edge_dist2_batch(x[i[p:, 0]], x[i[p:, 1]], x[i[p:, 2]], x[i[p:, 3]])]
        return np.sqrt(d2) - self.off

    def keys(self, rows=None, is_ee=None):
        rows = self.ids if rows is None else rows
        is_ee = self.is_ee if is_ee is None else is_ee
        return [(int(e),) + tuple(int(v) for v in r) for r, e in zip(rows, is_ee)]


# --- meshes ----------------------------------------------------------------------------------------
def two_patches():
    """Two cloth patches (self contact on, thickness 1 mm) 2.5 mm apart, the upper one turned 20 deg."""
    V1, T1, _ = grid_sheet((0.06, 0.06), (3, 3), center=(0, 0, 0))
    V2, T2, _ = grid_sheet((0.06, 0.06), (3, 3), center=(0, 0, 0))
    c, s = np.cos(0.35), np.sin(0.35)
    V2 = V2 @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]).T + [0.005, 0.003, 0.0025]
    V = np.vstack([V1, V2])
    F = np.vstack([T1, T2 + len(V1)]).astype(np.int32)
    n = len(V)
    vb = np.r_[np.zeros(len(V1)), np.ones(len(V2))].astype(np.int32)
    mesh = CollisionMesh.build(n, F, vertex_offset=np.full(n, 5e-4), vertex_body=vb, body_friction=np.zeros(2),
                               self_contact=np.array([1, 1]), rest_positions=V)
    return V, mesh, 4e-4


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


MESHES = {"two_cloth_patches": two_patches, "point_near_triangle": point_near_triangle,
          "crossing_edges": crossing_edges}


def _unit_ball(rng, n, surface=False):
    u = rng.standard_normal((n, 3))
    u /= np.linalg.norm(u, axis=1)[:, None]
    if not surface:
        u *= rng.uniform(0, 1, (n, 1)) ** (1 / 3)
    return u


def _adversarial(x0, radius, allp, s0, rng):
    """All vertices on their ball surfaces, those of the closest pairs pushed straight at each other
    (along -dd/dx_i, the direction that shrinks that pair's distance fastest), the rest at random."""
    x = x0 + radius[:, None] * _unit_ball(rng, len(x0), surface=True)
    order = np.argsort(s0)[:3]
    k = order[rng.integers(len(order))]
    ids, ee, off = allp.ids[k:k + 1], allp.is_ee[k:k + 1], allp.off[k:k + 1]
    for v in ids[0]:
        grad = np.zeros(3)
        for a in range(3):
            xp, xm = x0.copy(), x0.copy()
            xp[v, a] += 1e-9
            xm[v, a] -= 1e-9
            grad[a] = (contact_distances(xp, ids, ee, off)[0] - contact_distances(xm, ids, ee, off)[0]) / 2e-9
        if np.linalg.norm(grad) > 1e-6:
            x[v] = x0[v] - radius[v] * grad / np.linalg.norm(grad)
    return x


@pytest.mark.parametrize("name", list(MESHES))
def test_displacement_bounds_keep_every_pair_apart(name):
    V, mesh, noise = MESHES[name]()
    allp = AllPairs(mesh)
    all_keys = allp.keys()
    assert len(allp.ids) > 0
    rng = np.random.default_rng(2024)
    on_surface = np.ones(mesh.n_verts, bool)
    n_samples = n_path_points = 0
    worst_ratio = np.inf              # min over samples and pairs of s(x) / ((1 - 2 gamma) min(r, s(x0)))
    for det_point in range(8):
        while True:
            x0 = V + noise * rng.standard_normal(V.shape)
            s0 = allp.s(x0)
            if s0.min() > 0:
                break
        r_query = float(rng.choice([0.0, DHAT, 0.003, 0.01]))
        det = detect(x0, mesh, r_query, DHAT, on_surface)
        r = max(r_query, DHAT / (1 - 2 * GAMMA))
        # radius = gamma min(r, min over all pairs containing i of s_k(x0)), by brute force
        smin = np.full(mesh.n_verts, r)
        for k in range(len(s0)):
            for v in allp.ids[k]:
                smin[v] = min(smin[v], s0[k])
        np.testing.assert_allclose(det.radius, GAMMA * smin, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(det.center, x0)
        near = s0 < r
        assert det.min_distance == pytest.approx(s0[near].min() if near.any() else np.inf, rel=1e-12)
        floor = s0 - 2 * GAMMA * np.minimum(r, s0)           # the proof's bound, > 0
        assert floor.min() > 0
        det_keys = allp.keys(det.ids, det.is_ee)
        kept = set(det_keys)
        assert len(kept) == len(det_keys)                      # no duplicate barrier pairs
        assert kept <= set(all_keys)                           # and only pairs the contact model has

        def check(x):
            s = allp.s(x)
            assert (s >= floor - 1e-12).all(), f"bound broken: min s - floor = {(s - floor).min():.3e}"
            active = np.nonzero(s < DHAT)[0]
            missing = [all_keys[k] for k in active if all_keys[k] not in kept]
            assert not missing, f"pairs within dhat not in the barrier list: {missing}"
            if len(mesh.faces):
                assert count_intersections(x, mesh.faces, mesh.edges) == 0
            return float((s / ((1 - 2 * GAMMA) * np.minimum(r, s0))).min())

        configs = []
        for j in range(200):
            kind = j % 4
            if kind == 0:
                x = x0 + det.radius[:, None] * _unit_ball(rng, len(x0))
            elif kind == 1:
                x = x0 + det.radius[:, None] * _unit_ball(rng, len(x0), surface=True)
            else:
                x = _adversarial(x0, det.radius, allp, s0, rng)
            worst_ratio = min(worst_ratio, check(x))
            configs.append(x)
            n_samples += 1
        for j in range(30):                                    # straight paths between two admissible configurations
            a, b = configs[rng.integers(len(configs))], configs[rng.integers(len(configs))]
            for t in np.linspace(0, 1, 17)[1:-1]:
                worst_ratio = min(worst_ratio, check((1 - t) * a + t * b))
                n_path_points += 1
    assert n_samples >= 1600 and n_path_points >= 3000
    assert worst_ratio >= 1.0 - 1e-9
    # the adversarial samples come close to the bound: the proof is tight, not vacuous
    assert worst_ratio < 1.3


def test_interior_vertices_get_no_ball_and_gamma_is_checked():
    V, _, _ = point_near_triangle()
    V = np.vstack([V, [0.5, 0.5, 0.5]])               # vertex 6: on no face or edge (an interior tet node)
    F = np.array([[0, 1, 2], [3, 4, 5]], np.int32)
    mesh = CollisionMesh.build(7, F, vertex_body=np.array([0, 0, 0, 1, 1, 1, 1]), body_friction=np.zeros(2),
                               self_contact=np.array([0, 0]), rest_positions=V)
    on_surface = np.r_[np.ones(6, bool), False]
    det = detect(V, mesh, 0.0, DHAT, on_surface)
    assert np.isinf(det.radius[6]) and np.isfinite(det.radius[:6]).all()
    assert det.radius[:6].max() <= GAMMA * DHAT / (1 - 2 * GAMMA) * (1 + 1e-12)
    for bad in (0.0, 0.5, 0.7):
        with pytest.raises(ValueError):
            detect(V, mesh, 0.0, DHAT, on_surface, gamma=bad)


def test_detect_refuses_an_already_intersecting_configuration():
    V, mesh, _ = point_near_triangle()
    x = V.copy()
    x[3, 2] = 0.0                                    # the tip touches the big triangle: s = 0
    with pytest.raises(RuntimeError):
        detect(x, mesh, 0.0, DHAT, np.ones(6, bool))
