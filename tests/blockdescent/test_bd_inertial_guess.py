"""The start of a fast-solver step (blockdescent/inertial_guess.py): per-vertex CCD towards the
predicted positions, and VBD's adaptive prediction.

* The guess is intersection free and keeps every pair at >= ETA of its start distance, checked by
  brute force over every pair of the contact model (AllPairs of test_bd_bounds, no broad phase) on
  random crumpled sheets whose predicted moves cross each other;
* vertices with nothing in their way get their whole move; a vertex driven through a static
  triangle stops short of it while its neighbours still move;
* a tet that the moves would invert keeps its vertices;
* the prediction is y for a falling vertex, x + h v for a held one, and clamps in between;
* on a scene, a cloth falling past a sphere keeps up with the Newton solver (before the guess, the
  step's displacement balls held it back to ~1/3 of Newton's fall speed on a 64^2 grid).
"""
import numpy as np
import pytest

from solver_server.solvers.block_descent.inertial_guess import ETA, inertial_guess, predicted_positions
from solver_server.contact import CollisionMesh, count_intersections
from solver_server.model.primitives import grid_sheet

from .test_bd_bounds import AllPairs


def _sheets(n, seed, gap=0.02):
    """Two crumpled n x n sheets 0.2 m wide, the upper one (gap m above) shifted by 0.15 m in x so it
    overhangs, as one self-contacting body."""
    rng = np.random.default_rng(seed)
    V0, T0, _ = grid_sheet((0.2, 0.2), (n, n), center=(0, 0, 0))
    m = len(V0)
    V = np.r_[V0, V0 + [0.15, 0.005, gap]]
    V[:, 2] += rng.uniform(-0.2, 0.2, len(V)) * gap
    T = np.r_[T0, T0 + m].astype(np.int32)
    return V, T


def test_guess_is_intersection_free_and_keeps_eta_of_every_gap():
    for seed in range(6):
        V, T = _sheets(6, seed)
        mesh = CollisionMesh.build(len(V), T)
        rng = np.random.default_rng(100 + seed)
        y = V.copy()
        top = np.arange(len(V)) >= len(V) // 2
        y[top, 2] -= rng.uniform(0.0, 0.06, top.sum())        # the upper sheet falls through the lower one
        y[~top] += rng.normal(0.0, 0.002, ((~top).sum(), 3))    # and the lower one jitters
        free = np.ones(len(V), bool)
        x, passes, held = inertial_guess(V, y, free, mesh, np.zeros((0, 4), np.int32))
        assert count_intersections(x, mesh.faces, mesh.edges) == 0
        ap = AllPairs(mesh)
        s0, s1 = ap.s(V), ap.s(x)
        assert (s1 >= ETA * s0 * (1 - 1e-9)).all(), (s1 / s0).min()
        assert held > 0 and passes > 1    # the fall through the lower sheet was cut
        # the straight paths held too: no pair crossed on the way (sampled)
        for tau in np.linspace(0.0, 1.0, 11):
            assert (ap.s(V + tau * (x - V)) > 0).all()
        # the overhanging part, with nothing below it, made its whole move
        clear = top & (V[:, 0] > 0.12)
        assert clear.sum() >= 6
        np.testing.assert_array_equal(x[clear], y[clear])


def test_free_vertices_move_all_the_way_and_a_blocked_one_stops_short():
    # a static triangle at z = 0 and a small cloth strip above it whose middle vertex is driven through it
    V, T, _ = grid_sheet((0.1, 0.1), (2, 2), center=(0, 0, 0.01))
    tri = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0]])
    X = np.r_[V, tri]
    F = np.r_[T, [[len(V), len(V) + 1, len(V) + 2]]].astype(np.int32)
    vb = np.r_[np.zeros(len(V), np.int32), np.ones(3, np.int32)]
    mesh = CollisionMesh.build(len(X), F, vertex_body=vb, self_contact=np.array([1, 0], np.uint8),
                               body_static=np.array([0, 1], np.uint8))
    mid = 4
    y = X.copy()
    y[:len(V), 0] += 0.003                 # everyone slides sideways
    y[mid, 2] = -0.02                      # the middle vertex is predicted 2 cm below the floor
    free = np.r_[np.ones(len(V), bool), np.zeros(3, bool)]
    x, passes, held = inertial_guess(X, y, free, mesh, np.zeros((0, 4), np.int32))
    assert count_intersections(x, mesh.faces, mesh.edges) == 0
    assert x[mid, 2] >= ETA * 0.01 * (1 - 1e-9)        # kept half its height above the floor
    assert held >= 1
    far = [i for i in range(len(V)) if i != mid and np.linalg.norm(V[i, :2] - V[mid, :2]) > 0.06]
    np.testing.assert_array_equal(x[far], y[far])          # the corners still made their whole move
    np.testing.assert_array_equal(x[len(V):], X[len(V):])  # the static triangle did not move


def test_a_tet_the_moves_would_invert_keeps_its_vertices():
    X = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]) * 0.1
    tets = np.array([[0, 1, 2, 3]], np.int32)
    F = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], np.int32)
    mesh = CollisionMesh.build(4, F)
    y = X.copy()
    y[3, 2] = -0.05                        # apex through the base: the tet would invert
    x, _, held = inertial_guess(X, y, np.ones(4, bool), mesh, tets)
    V = np.linalg.det(np.stack([x[1] - x[0], x[2] - x[0], x[3] - x[0]]))
    assert V > 0.1 * np.linalg.det(np.stack([X[1] - X[0], X[2] - X[0], X[3] - X[0]]))
    y2 = X + [0.0, 0.0, -0.05]              # a pure translation keeps its whole move
    x2, _, held2 = inertial_guess(X, y2, np.ones(4, bool), mesh, tets)
    np.testing.assert_allclose(x2, y2)
    assert held2 == 0


def test_prediction_is_adaptive_along_gravity():
    h, g = 0.01, np.array([0.0, 0.0, -9.81])
    x = np.zeros((4, 3))
    v = np.array([[0, 0, -1.0], [0, 0, 0], [0.5, 0, 0], [0, 0, -0.2]])
    v_prev = np.array([[0, 0, -1.0 + 9.81 * h],   # fell freely: a = g
                       [0, 0, 0],                 # at rest, held up: a = 0
                       [0.5, 0, 0.0],             # moves sideways steadily: a = 0
                       [0, 0, -0.2 + 0.5 * 9.81 * h]])  # half of g
    free = np.array([True, True, True, True])
    p = predicted_positions(x, v, v_prev, h, g, free)
    np.testing.assert_allclose(p[0], h * v[0] + h * h * g)
    np.testing.assert_allclose(p[1], 0.0)
    np.testing.assert_allclose(p[2], h * v[2])
    np.testing.assert_allclose(p[3], h * v[3] + 0.5 * h * h * g)
    # first step: the whole inertia target; prescribed rows never move
    p0 = predicted_positions(x, v, None, h, g, np.array([True, False, True, True]))
    np.testing.assert_allclose(p0[0], h * v[0] + h * h * g)
    np.testing.assert_allclose(p0[1], x[1])
    # an upward kick (a opposite to g) is clamped at 0, not predicted to rise
    up = predicted_positions(x, np.zeros((4, 3)), np.array([[0, 0, -1.0]] * 4), h, g, free)
    np.testing.assert_allclose(up, 0.0)


def test_fast_falling_fine_cloth_with_contact_on_is_exact_free_fall():
    """A 32^2 cloth (edge 1.6 cm) thrown down at 3 m/s with a sphere far below: contact detection runs
    every step, but nothing is near, so each step's answer is the inertia target and the cloth must
    follow the discrete free fall exactly. Before the guess each detection let a vertex move at most
    0.2 edge lengths (3 mm), so the cloth lagged behind at ~1.2 m/s (a 33 mm move per step needs ~10
    detections)."""
    from protocol.scene import Body, Material
    from solver_server.model.primitives import icosphere
    from .bd_scenes import cloth, fast_backend, fast_scene, intersections
    S, ST = icosphere(0.25, subdivisions=2)
    c = cloth(32, 1.0, size=0.5)
    c = Body(c.name, c.role, c.vertices, c.triangles, c.edges, material=c.material,
             initial_velocity=np.array([0.0, 0.0, -3.0]))
    b = fast_backend(fast_scene(c, Body("sphere", "collider", S - [0, 0, 1.0], ST), frame_end=4))
    n = 33 * 33
    x0 = b.stepper.x[:n].copy()
    h = b.stepper.h
    g = b.stepper.gravity
    xe, ve = x0.copy(), np.array([0.0, 0.0, -3.0])
    for f in range(3):
        b.advance()
        for k in range(round(1.0 / 24.0 / h)):
            ve = ve + h * g
            xe = xe + h * ve
        assert intersections(b) == 0
        np.testing.assert_allclose(b.stepper.x[:n], xe, rtol=0, atol=1e-9)
