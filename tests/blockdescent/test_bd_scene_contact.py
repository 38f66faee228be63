"""Fast solver (block descent) contact scenes through MeshBackend: cloth draped over a sphere, a fast
keyframed collider through a cloth pinned at its corners, a stack of soft cubes, momentum in a
two-body collision. Every frame: zero edge-triangle intersections by the exact check
(solver_server/contact count_intersections), every tet volume positive."""
import numpy as np
import pytest

from protocol.scene import Body, Material
from solver_server.energies import elastic_tet
from solver_server.model.primitives import box, icosphere
from tests.ipc.test_scene_helpers import plane

from .bd_scenes import (block_of, cloth, fast_backend, fast_scene, intersections, non_collider_intersections,
                        pairwise_distance_change, points_vs_convex_mesh)


def _check(b):
    assert intersections(b) == 0
    x = b.stepper.x
    el = b.system.elastic
    if len(el.tets):
        assert (elastic_tet.tet_volumes(x, el.tets) > 0).all()


# --- cloth over a sphere ---------------------------------------------------------------------------
def test_cloth_drapes_on_sphere_without_intersections():
    n, frames, R = 12, 14, 0.25
    S, ST = icosphere(R, subdivisions=2)
    cl = cloth(n, 0.3)
    sc = fast_scene(cl, Body("sphere", "collider", S, ST), frame_end=frames + 1)
    b = fast_backend(sc)
    nv = (n + 1) ** 2
    half_thick = 0.5 * cl.material.thickness
    contacts = 0
    for f in range(frames):
        r = b.advance()
        _check(b)
        x = b.stepper.x[:nv]
        inside, dist = points_vs_convex_mesh(x, S, ST)
        assert not inside.any(), f"frame {f + 1}: cloth vertices {np.nonzero(inside)[0]} inside the sphere"
        assert dist.min() > half_thick            # the barrier keeps s = d - thickness/2 > 0
        contacts = max(contacts, r.stats["contacts"])
        assert r.stats["min_distance"] is None or r.stats["min_distance"] > 0.0
    assert contacts > 0
    x = b.stepper.x[:nv]
    # the middle of the sheet rests on top of the sphere (within the contact gap + thickness) ...
    top = x[np.argmin(np.linalg.norm(x[:, :2], axis=1))]
    assert R + half_thick < top[2] < R + half_thick + sc.settings.contact_gap + 2e-3
    # ... and the free corners fell well past the sphere's top, draping around it
    assert x[:, 2].min() < 0.0


# --- a fast keyframed collider through a pinned cloth ----------------------------------------------
def _collider_through_cloth():
    n = 8
    F = 6
    S, ST = icosphere(0.08, subdivisions=1)
    z = np.array([0.3, -0.2, -0.7, -0.7, -0.7, -0.7])   # 0.5 m per frame through the sheet at z = 0
    anim = np.repeat(S[None], F, 0)
    anim[:, :, 2] += z[:, None]
    pins = np.array([0, n, n * (n + 1), (n + 1) ** 2 - 1], np.int32)   # the four corners
    cl = cloth(n, 0.0, size=0.5, pins=pins)
    ball = Body("ball", "collider", anim[0].copy(), ST, animation=anim.astype(np.float32))
    return fast_scene(cl, ball, frame_end=F, gravity=(0, 0, 0)), anim, pins


@pytest.fixture(scope="module")
def collider_run():
    """The scene above, run once (5 frames); per frame what the two tests below check."""
    sc, anim, pins = _collider_through_cloth()
    b = fast_backend(sc)
    ball = block_of(b, "ball")
    bx = slice(ball.offset, ball.offset + ball.n_nodes)
    nv = len(sc.bodies[0].vertices)
    corners = sc.bodies[0].vertices[pins]
    frames = []
    for f in range(sc.settings.frame_end - 1):
        r = b.advance()
        x = b.stepper.x
        frames.append(dict(
            cloth_ball=bool(non_collider_intersections(b)), hits=intersections(b),
            corners=float(np.abs(x[pins] - corners).max()),
            rigid=pairwise_distance_change(x[bx], anim[0]),
            lag=float(np.abs(x[bx] - anim[f + 1]).max()),                   # from the keyframed positions
            ball_z=float(x[bx, 2].mean()), key_z=float(anim[f + 1, :, 2].mean()),
            cloth_zmin=float(x[:nv, 2].min()), lagged=r.stats["lagged_steps"]))
    return frames


def test_fast_collider_through_pinned_cloth_never_intersects(collider_run):
    """The rigid ball and the cloth never cross, the ball never deforms or crosses itself (it moves
    rigidly by a common fraction of its keyframed motion), the pinned corners stay put and the sheet is
    pushed down ahead of the ball."""
    for f, fr in enumerate(collider_run, 1):
        assert not fr["cloth_ball"], f"frame {f}: the cloth crosses the ball"
        assert fr["hits"] == 0, f"frame {f}: {fr['hits']} edge-triangle intersections"
        assert fr["corners"] < 1e-6                                           # corners held
        assert fr["rigid"] < 1e-6, f"frame {f}: the collider deformed by {fr['rigid']:.3g} m"
    assert collider_run[-1]["cloth_zmin"] < -0.05                             # pushed well below its plane
    assert collider_run[-1]["ball_z"] < 0.0                                   # the ball went down through z = 0


def test_fast_collider_reaches_its_keyframes(collider_run):
    """The keyframed ball is on its keyframes after every frame: each step moves it first, carrying the
    cloth in its way along as far as CCD allows (blockdescent/collider_carry.py). Limit: 1e-6 m, ten
    times the stepper's arrival tolerance (PRESCRIBED_TOL = 1e-7 m per coordinate); no step reports the
    ball lagging behind its keyframe. Before the carry the ball lagged 0.17-0.55 m behind (sweeps alone let it advance ~gamma
    times the contact gap per detection). The net cannot let the ball through (its cells, 6.25 cm, are
    smaller than the ball's 16 cm diameter), so with 0 intersections (the test above) the cloth must
    be below the ball's bottom: it went down with the ball."""
    lag = [fr["lag"] for fr in collider_run]
    assert max(lag) < 1e-6, f"largest distance (m) of a ball vertex from its keyframed position, per frame: {lag}"
    assert all(fr["lagged"] == 0 for fr in collider_run)
    for f, fr in enumerate(collider_run, 1):
        assert fr["cloth_zmin"] < fr["key_z"] - 0.08, f"frame {f}: the sheet is not below the ball"


# --- a stack of soft cubes --------------------------------------------------------------------------
def _stack(k):
    bodies = []
    for i in range(k):
        V, T = box((0.1, 0.1, 0.1), center=(0.01 * i, 0, 0.052 + 0.104 * i), divisions=1)
        bodies.append(Body(f"c{i}", "solid", V, T, material=Material(youngs_modulus=1e5, friction=0.3)))
    return bodies + [plane(friction=0.3)]


def _run_stack(k, frames):
    """Run a stack of k cubes; returns (backend, blocks, problems, speeds): every broken per-frame
    invariant (intersection, inverted tet, a vertex below the ground, the cubes no longer stacked) as a
    message, and the largest vertex speed (m/s) after each frame."""
    sc = fast_scene(*_stack(k), frame_end=frames + 1)
    b = fast_backend(sc)
    blocks = [block_of(b, f"c{i}") for i in range(k)]
    problems, speeds = [], []
    for f in range(1, frames + 1):
        b.advance()
        speeds.append(float(np.abs(b.stepper.v[b.system.dynamic]).max()))
        x = b.stepper.x
        if intersections(b):
            problems.append(f"frame {f}: {intersections(b)} edge-triangle intersections")
        if not (elastic_tet.tet_volumes(x, b.system.elastic.tets) > 0).all():
            problems.append(f"frame {f}: inverted tet")
        if x[b.system.dynamic, 2].min() <= 0.0:
            problems.append(f"frame {f}: a vertex below the ground")
        for i, (lo, hi) in enumerate(zip(blocks, blocks[1:])):           # still stacked, one cube on the next
            c_lo = x[lo.offset:lo.offset + lo.n_nodes].mean(0)
            c_hi = x[hi.offset:hi.offset + hi.n_nodes].mean(0)
            if not 0.09 < c_hi[2] - c_lo[2] < 0.106:
                problems.append(f"frame {f}: centres of cubes {i}, {i + 1} {c_hi[2] - c_lo[2]:.4f} m apart vertically")
            if not np.linalg.norm(c_hi[:2] - c_lo[:2]) < 0.03:
                problems.append(f"frame {f}: cube {i + 1} slid off cube {i}")
    return b, blocks, problems, speeds


@pytest.fixture(scope="module")
def stack_of_two():
    return _run_stack(2, 24)


def test_stack_of_soft_cubes_no_intersection_positive_tets(stack_of_two):
    b, blocks, problems, _ = stack_of_two
    assert not problems, problems[:5]
    x = b.stepper.x
    # resting on each other within the contact gap and barely squashed
    assert x[blocks[0].offset:blocks[0].offset + blocks[0].n_nodes, 2].min() < 1e-3   # on the ground
    c0 = x[blocks[0].offset:blocks[0].offset + blocks[0].n_nodes].mean(0)
    c1 = x[blocks[1].offset:blocks[1].offset + blocks[1].n_nodes].mean(0)
    assert c1[2] - c0[2] < 0.1 + 1e-3                                 # resting on the lower cube (gap < dhat)
    assert b.system.elastic.min_tet_volume_ratio(x) > 0.9


@pytest.mark.xfail(strict=True, reason=(
    "Preview (unconverged) leaves the stack jittering at 3-11 mm/s: frames 13-24 measured 10.7 10.7 7.3 3.0 "
    "8.9 9.8 6.6 2.9 6.3 8.3 6.2 3.3 5.8 mm/s after the sweep's slide fix (2026-11-27, bounds.ray_fraction_skip), "
    "just above the 10 mm/s bar; it had passed for one day after the energy guard landed, 5-17 mm/s before. "
    "The default (Converged) solver's stack rests below 1 mm/s: tests/ipc/test_default_rests.py."))
def test_stack_of_soft_cubes_settles(stack_of_two):
    """Below 10 mm/s over frames 13-24 (see the xfail: Preview's jitter sits around the bar)."""
    _, _, _, speeds = stack_of_two
    assert max(speeds[12:]) < 0.01, f"largest vertex speed (mm/s) per frame: {np.round(np.array(speeds) * 1e3, 1)}"


@pytest.mark.slow
def test_stack_of_three_soft_cubes_long():
    b, blocks, problems, _ = _run_stack(3, 36)
    assert not problems, problems[:5]
    assert np.abs(b.stepper.v[b.system.dynamic]).max() < 0.01


# --- momentum ---------------------------------------------------------------------------------------
MOMENTUM_TOL = 1e-9   # of sum |m_i v_i|: rounding. Every step ends with the exact translation step of the free
                      # cluster (free_translation.py); without it the unconverged contact steps drifted 3-5%


def test_two_soft_bodies_collide_and_keep_momentum():
    """Two soft cubes collide head-on without gravity or friction: the total linear momentum is
    conserved to rounding through the contact, although no step converges within its sweep budget."""
    V1, T1 = box((0.1, 0.1, 0.1), center=(-0.08, 0, 0), divisions=1)
    V2, T2 = box((0.1, 0.1, 0.1), center=(0.08, 0.02, 0.01), divisions=1)
    a = Body("a", "solid", V1, T1, material=Material(youngs_modulus=2e4, friction=0.0), initial_velocity=(1.0, 0, 0))
    c = Body("b", "solid", V2, T2, material=Material(youngs_modulus=2e4, friction=0.0, density=2000.0),
             initial_velocity=(-0.5, 0, 0))
    sc = fast_scene(a, c, frame_end=13, gravity=(0, 0, 0))
    b = fast_backend(sc)
    M = b.system.mass[:, None]
    p0 = (M * b.stepper.v).sum(0)
    scale = np.linalg.norm(M * b.stepper.v, axis=1).sum()   # sum |m_i v_i| (the total is ~0 here)
    touched = 0
    drift = []
    for _ in range(12):
        r = b.advance()
        _check(b)
        touched = max(touched, r.stats["contacts"])
        drift.append(np.linalg.norm((M * b.stepper.v).sum(0) - p0) / scale)
    assert touched > 0
    na = b.system.blocks[0].n_nodes
    assert (M[:na] * b.stepper.v[:na]).sum(0)[0] / M[:na].sum() < 0.9   # they bounced
    assert max(drift) <= MOMENTUM_TOL, f"momentum drift per frame (of sum |m v|): {np.round(drift, 4)}"


def test_two_soft_bodies_collide_without_intersection_and_bounce():
    """The part of the collision that holds today: no intersection, no inverted tet, a real bounce."""
    V1, T1 = box((0.1, 0.1, 0.1), center=(-0.08, 0, 0), divisions=1)
    V2, T2 = box((0.1, 0.1, 0.1), center=(0.08, 0.02, 0.01), divisions=1)
    m = Material(youngs_modulus=2e4, friction=0.0)
    sc = fast_scene(Body("a", "solid", V1, T1, material=m, initial_velocity=(1.0, 0, 0)),
                    Body("b", "solid", V2, T2, material=m, initial_velocity=(-1.0, 0, 0)),
                    frame_end=9, gravity=(0, 0, 0))
    b = fast_backend(sc)
    M = b.system.mass[:, None]
    na = b.system.blocks[0].n_nodes
    touched = 0
    for _ in range(8):
        r = b.advance()
        _check(b)
        touched = max(touched, r.stats["contacts"])
    assert touched > 0
    va = (M[:na] * b.stepper.v[:na]).sum(0)[0] / M[:na].sum()
    vb = (M[na:] * b.stepper.v[na:]).sum(0)[0] / M[na:].sum()
    assert va < 0 < vb                                              # they separate after the impact
