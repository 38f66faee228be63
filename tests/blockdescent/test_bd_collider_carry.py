"""The collider-first move of a fast-solver step (blockdescent/collider_carry.py), checked directly:

* a ball keyframed down through two free cloth layers takes its whole move and pushes the cloth in
  its way (both layers) down, leaving the sheets' borders where they are; the result is
  checked against every pair of the contact model (AllPairs of test_bd_bounds: brute force, no broad
  phase): positive distances along the sampled straight path, 0 exact intersections, and
  >= min(ETA s0, KEEP) for every pair whose swept boxes meet (s0 its start distance);
* with a rotation in the keyframed move as well, the same guarantee (whatever fraction it takes);
* cloth that cannot be carried (pinned) stops the ball short, by one common fraction of its move,
  with the same guarantee.
"""
import numpy as np

from solver_server.solvers.block_descent.collider_carry import ETA, ColliderCarry
from solver_server.contact import CollisionMesh, count_intersections
from solver_server.model.primitives import grid_sheet, icosphere

from .test_bd_bounds import AllPairs

OFFSET = 5e-4   # m, contact offset of every vertex (half a cloth thickness)
KEEP = 2e-3     # m, a pair farther than KEEP / ETA may come down to KEEP (the stepper: 2 dhat)


def _scene(seed):
    """Two 10x10 sheets 0.5 m wide at z = 0 and z = -0.02 (one self-contacting body, slightly
    crumpled), a ball of radius 0.08 m whose bottom is 1 cm above the upper sheet (a collider body)."""
    rng = np.random.default_rng(seed)
    V0, T0, _ = grid_sheet((0.5, 0.5), (10, 10), center=(0, 0, 0))
    m = len(V0)
    V = np.r_[V0, V0 + [0.01, 0.007, -0.02]]
    V[:, 2] += rng.uniform(-2e-3, 2e-3, len(V))
    S, ST = icosphere(0.08, subdivisions=1)
    S = S + [rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03), 0.09]
    X = np.r_[V, S]
    F = np.r_[T0, T0 + m, ST + 2 * m].astype(np.int32)
    vb = np.r_[np.zeros(2 * m, np.int32), np.ones(len(S), np.int32)]
    mesh = CollisionMesh.build(len(X), F, vertex_offset=np.full(len(X), OFFSET), vertex_body=vb,
                               self_contact=np.array([1, 0], np.uint8), body_static=np.array([0, 0], np.uint8))
    group = np.r_[-np.ones(2 * m, np.int32), np.zeros(len(S), np.int32)]
    return X, mesh, group, 2 * m


def _rotation(axis, angle):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


_PAIRS = {}


def _all_pairs(mesh):
    """AllPairs of the scene's mesh (every seed has the same topology: built once)."""
    if "ap" not in _PAIRS:
        _PAIRS["ap"] = AllPairs(mesh)
    return _PAIRS["ap"]


def _check_guarantee(X, x, mesh):
    """0 exact intersections at x; every pair's contact distance positive at x and along the straight
    path (sampled at 21 points); and every pair that ended below min(ETA s0, KEEP) has swept boxes
    (over X and x, inflated by the contact offsets) that do not meet: CCD checks every pair whose
    swept boxes meet and keeps it above that; boxes that stay apart keep s > 0 on their own."""
    assert count_intersections(x, mesh.faces, mesh.edges) == 0
    ap = _all_pairs(mesh)
    s0 = ap.s(X)
    assert (s0 > 0).all()
    s1 = ap.s(x)
    for k in np.nonzero(s1 < np.minimum(ETA * s0, KEEP) * (1 - 1e-9))[0]:
        a_end = 2 if ap.is_ee[k] else 1
        ids = ap.ids[k]
        P = np.stack([X[ids], x[ids]])                      # (2, 4, 3)
        lo_a, hi_a = P[:, :a_end].min((0, 1)) - OFFSET, P[:, :a_end].max((0, 1)) + OFFSET
        lo_b, hi_b = P[:, a_end:].min((0, 1)) - OFFSET, P[:, a_end:].max((0, 1)) + OFFSET
        assert ((hi_a < lo_b) | (hi_b < lo_a)).any(), f"pair {ids}: s {s0[k]:.4g} -> {s1[k]:.4g} m"
    for tau in np.linspace(0.0, 1.0, 21):
        assert (ap.s(X + tau * (x - X)) > 0).all()


def test_ball_takes_its_whole_move_through_two_free_layers_and_keeps_every_gap():
    for seed in range(4):
        X, mesh, group, nc = _scene(seed)
        rng = np.random.default_rng(10 + seed)
        move = np.array([rng.uniform(-0.01, 0.01), rng.uniform(-0.01, 0.01), -rng.uniform(0.04, 0.06)])
        target = X.copy()
        target[nc:] += move                                  # 3-5 cm through the upper sheet, into the lower
        carriable = np.r_[np.ones(nc, bool), np.zeros(len(X) - nc, bool)]
        cc = ColliderCarry(mesh, group, 1, carriable, KEEP)
        x = X.copy()
        st = cc.apply(x, target)
        np.testing.assert_array_equal(x[nc:], target[nc:])   # the ball is on its keyframe
        assert st.fraction == 1.0 and st.carried > 0
        _check_guarantee(X, x, mesh)
        moved = np.nonzero(np.linalg.norm(x[:nc] - X[:nc], axis=1) > 0)[0]
        assert (moved >= nc // 2).any() and (moved < nc // 2).any()   # it pushed both layers
        # pushed out of the way along the contact normals: every moved vertex went down (the ball's lower
        # half, and the upper sheet onto the lower one, face downwards)
        assert ((x[moved] - X[moved])[:, 2] < 0).all()
        # the cloth out of the ball's way did not move: the borders of both 11x11-vertex sheets; in all
        # 34-50 of the 242 cloth vertices moved
        i, j = np.divmod(np.arange(nc) % (nc // 2), 11)
        border = np.nonzero((np.minimum(i, j) == 0) | (np.maximum(i, j) == 10))[0]
        assert not np.isin(border, moved).any()
        assert len(moved) < nc // 4


def test_rotating_ball_keeps_every_gap():
    for seed in range(3):
        X, mesh, group, nc = _scene(seed)
        rng = np.random.default_rng(20 + seed)
        c = X[nc:].mean(0)
        R = _rotation(rng.normal(size=3), rng.uniform(0.1, 0.4))
        target = X.copy()
        target[nc:] = (X[nc:] - c) @ R.T + c + [0.0, 0.0, -0.1]
        carriable = np.r_[np.ones(nc, bool), np.zeros(len(X) - nc, bool)]
        x = X.copy()
        st = ColliderCarry(mesh, group, 1, carriable, KEEP).apply(x, target)
        np.testing.assert_allclose(x[nc:], X[nc:] + st.fraction * (target[nc:] - X[nc:]), atol=1e-15)
        assert st.fraction > 0.0
        _check_guarantee(X, x, mesh)


def test_cloth_that_cannot_be_carried_stops_the_ball_short():
    X, mesh, group, nc = _scene(0)
    target = X.copy()
    target[nc:, 2] -= 0.1
    x = X.copy()
    st = ColliderCarry(mesh, group, 1, np.zeros(len(X), bool), KEEP).apply(x, target)   # every cloth vertex pinned
    assert 0.0 < st.fraction < 0.2 and st.carried == 0
    np.testing.assert_array_equal(x[:nc], X[:nc])
    np.testing.assert_allclose(x[nc:], X[nc:] + st.fraction * (target[nc:] - X[nc:]), atol=1e-15)
    _check_guarantee(X, x, mesh)
