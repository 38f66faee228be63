"""The sweep's side of the no-intersection guarantee (blockdescent/sweep.py): every vertex move the
sweep makes stays inside the vertex's admissible set of the last detection (bounds.py), so the
configuration after any number of sweeps is covered by the bounds proof.

* sweep._admissible_move, from random admissible current positions towards random targets (short,
  long, straight at the ground), with and without sliding, always returns a point of the set, leaves
  admissible targets alone, and with one blocking half-space stops where the ray meets it, or with
  the slide ("the rest of the move along the blocking constraint") lands on the Euclidean projection
  of the target onto it (the slide skips the constraint it slides along: rounding lost it a quarter of the time);
* sweep._move_colliders moves every collider rigidly by one common fraction of its keyframed motion,
  the largest that all of its vertices admit, and reports when a collider was stopped short.

These drive internal numba functions on purpose, with the element tuple of a real stepper (a cube
resting 2 mm above the ground) so the argument types are the solver's.
"""
import numpy as np
import pytest

from solver_server.solvers.block_descent.bounds import Bounds, detect, unbounded
from solver_server.solvers.block_descent.sweep import _admissible_move, _move_colliders

from .bd_scenes import fast_backend, fast_scene
from .test_bd_scene_contact import _stack


@pytest.fixture(scope="module")
def cube_on_ground():
    b = fast_backend(fast_scene(*_stack(1), frame_end=2))
    st, ct = b.stepper, b.contact
    x = st.x.copy()
    x[b.system.dynamic, 2] -= 0.0018                  # 0.2 mm above the ground: half-spaces active
    det = detect(x, ct.mesh, 0.01, ct.dhat, st.on_surface)
    return b, x, det, det.bounds()


def _inside(det, v, p, tol=1e-12):
    d = p - det.center[v]
    U = det.cs_u[det.cs_start[v]:det.cs_start[v + 1]]
    B = det.cs_b[det.cs_start[v]:det.cs_start[v + 1]]
    return (np.linalg.norm(d) <= det.radius[v] * (1 + tol)
            and (U @ d <= B + tol * det.radius[v]).all())


def _admissible_point(det, v, rng):
    """A random point of vertex v's set (rejection from the ball, else the centre)."""
    for _ in range(200):
        d = rng.standard_normal(3)
        d *= det.radius[v] * rng.uniform() ** (1 / 3) / np.linalg.norm(d)
        if _inside(det, v, det.center[v] + d, 0.0):
            return det.center[v] + d
    return det.center[v].copy()


@pytest.mark.parametrize("slide", [True, False])
def test_admissible_move_stays_in_the_set(cube_on_ground, slide):
    b, x0, det, BD = cube_on_ground
    EL = b.stepper.EL
    rng = np.random.default_rng(5)
    surface = np.nonzero(b.stepper.on_surface & b.system.dynamic)[0]
    constrained = [v for v in surface if det.cs_start[v + 1] > det.cs_start[v]]
    assert len(constrained) >= 4                      # the bottom vertices face the ground
    n_cut = n_free = 0
    for j in range(600):
        v = int(rng.choice(constrained if j % 2 else surface))
        x = x0.copy()
        x[v] = _admissible_point(det, v, rng)
        R = det.radius[v]
        d = rng.standard_normal(3)
        if j % 3 == 0:
            d[2] = -abs(d[2]) - 1.0                   # straight at the ground
        target = x[v] + d / np.linalg.norm(d) * R * rng.choice([0.05, 0.5, 1.5, 5.0])
        p = target.copy()
        cut = _admissible_move(v, x, p, BD, EL, slide)
        assert _inside(det, v, p), f"vertex {v}: move left its admissible set"
        if _inside(det, v, target, 0.0):
            assert cut == 0 and np.array_equal(p, target)   # admissible targets are taken as they are
            n_free += 1
        else:
            assert cut == 1
            n_cut += 1
    assert n_cut > 100 and n_free > 50


def _one_half_space_cases(x0, count, seed):
    """Random (vertex, BD, target, u, b): one half-space u . d <= b = 1 mm (the ball, 1 m, far away) and a
    target 1 mm beyond its plane with a random tangential part (2 mm rms per axis)."""
    n = len(x0)
    rng = np.random.default_rng(seed)
    for _ in range(count):
        v = int(rng.integers(n))
        u = rng.standard_normal(3)
        u /= np.linalg.norm(u)
        bnd = 1e-3
        start = np.zeros(n + 1, np.int64)
        start[v + 1:] = 1
        BD = Bounds(x0.copy(), np.full(n, 1.0), start, u[None, :].copy(), np.array([bnd]))
        target = x0[v] + rng.standard_normal(3) * 2e-3
        target += (bnd + 1e-3 - u @ (target - x0[v])) * u
        yield v, BD, target, u, bnd


def test_admissible_move_without_slide_stops_on_the_half_space(cube_on_ground):
    b, x0, _, _ = cube_on_ground
    for v, BD, target, u, bnd in _one_half_space_cases(x0, 200, 11):
        p = target.copy()
        assert _admissible_move(v, x0, p, BD, b.stepper.EL, False) == 1
        want = x0[v] + bnd / (u @ (target - x0[v])) * (target - x0[v])      # where the ray meets the plane
        np.testing.assert_allclose(p, want, rtol=0, atol=1e-15)


def test_admissible_move_slides_to_the_projection_on_one_half_space(cube_on_ground):
    """One half-space u . d <= b (the ball far away): the cut move plus the slide along the blocking
    constraint lands exactly on the Euclidean projection of the target onto the half-space. A strict
    xfail until 2026-11-27: in 56 of these 200 cases the slide was lost (the slid direction's component
    along the blocking normal is rounding noise, and the second ray stopped at t ~ 0 whenever it was
    positive); the slide now skips the constraint it slides along (bounds.ray_fraction_skip)."""
    b, x0, _, _ = cube_on_ground
    lost = []
    for v, BD, target, u, bnd in _one_half_space_cases(x0, 200, 11):
        p = target.copy()
        assert _admissible_move(v, x0, p, BD, b.stepper.EL, True) == 1
        want = target - (u @ (target - x0[v]) - bnd) * u
        lost.append(float(np.linalg.norm(p - want)))
    lost = np.array(lost)
    assert (lost < 1e-15).all(), (f"{(lost >= 1e-15).sum()} of {len(lost)} slides fell short of the projection "
                                  f"(median {np.median(lost[lost >= 1e-15]) * 1e3:.2f} mm)")


def test_colliders_move_rigidly_by_a_common_fraction(cube_on_ground):
    b, x0, _, _ = cube_on_ground
    n = len(x0)
    rng = np.random.default_rng(3)
    x = x0 + rng.standard_normal((n, 3)) * 0.01
    group = -np.ones(n, np.int32)
    group[:4] = 0                                     # collider 0: vertices 0-3, collider 1: vertices 4-6
    group[4:7] = 1
    shift = np.array([0.0, 0.0, -0.01])
    target = x.copy()
    target[:7] += shift
    target[7:] += 0.005                               # non-collider vertices: never touched here
    # vertex 2 may move only 3 mm along -z (a half-space), everything else is free
    start = np.zeros(n + 1, np.int64)
    start[3:] = 1
    BD = Bounds(x.copy(), np.full(n, np.inf), start, np.array([[0.0, 0.0, -1.0]]), np.array([0.003]))
    xm = x.copy()
    assert _move_colliders(xm, target, group, 2, BD)            # collider 0 stopped short
    np.testing.assert_allclose(xm[:4] - x[:4], np.tile(0.3 * shift, (4, 1)), rtol=0, atol=1e-15)
    np.testing.assert_allclose(xm[4:7], target[4:7], rtol=0, atol=0)   # collider 1 reaches its target
    np.testing.assert_array_equal(xm[7:], x[7:])
    # nothing in the way: every collider reaches its target and nothing is reported
    BD = unbounded(x)
    xm = x.copy()
    assert not _move_colliders(xm, target, group, 2, BD)
    np.testing.assert_array_equal(xm[:7], target[:7])
