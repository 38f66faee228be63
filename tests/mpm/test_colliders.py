"""Colliders: the distance field is exact for a box, and an animated collider pushes sand without
letting particles inside."""
import numpy as np
import pytest

from solver_server.backends.mpm_backend import MPMBackend
from solver_server.solvers.mpm.grid import GridSpec
from solver_server.solvers.mpm.materials import preset
from solver_server.solvers.mpm.sdf import ColliderField
from .meshes import box
from .scenes import collider_box, granular, scene


def test_box_signed_distance_matches_analytic_in_the_band():
    spec = GridSpec.from_domain((0, 0, 0), (1, 1, 1), 0.05)
    f = ColliderField(spec)
    lo, hi = np.array([0.3, 0.32, 0.27]), np.array([0.61, 0.7, 0.52])
    v, t = box(lo, hi)
    f.add(v, np.tile([0.5, 0, 0], (8, 1)), t, True, 0.0, 0.4)
    nx, ny, nz = spec.shape
    g = np.stack(np.meshgrid(*[np.arange(n) for n in spec.shape], indexing="ij"), -1) * spec.dx + spec.origin
    q = np.abs(g - (lo + hi) / 2) - (hi - lo) / 2
    exact = np.linalg.norm(np.maximum(q, 0), axis=-1) + np.minimum(q.max(-1), 0)
    band = np.isfinite(f.phi)
    assert band.sum() > 500
    assert np.allclose(f.phi[band], exact[band], atol=1e-9)
    assert np.all(np.abs(exact[~band]) > 2.9 * spec.dx)
    assert np.allclose(f.vel[band], [0.5, 0, 0]) and np.allclose(f.fric[band], 0.4)


def test_animated_paddle_pushes_sand_and_nothing_gets_inside():
    frames = 8
    lo, hi = np.array([0.1, 0.3, 0.0]), np.array([0.18, 0.7, 0.3])
    v0, _ = box(lo, hi)
    anim = np.stack([v0 + [0.04 * k, 0, 0] for k in range(frames + 1)]).astype(np.float32)  # ~1 m/s at 24 fps
    paddle = collider_box("Paddle", lo, hi, friction=0.2, animation=anim)
    sand = granular("Sand", (0.25, 0.35, 0.0), (0.45, 0.65, 0.15), preset("sand", particle_spacing=0.02))
    be = MPMBackend(scene([sand, paddle], frames=frames, domain=((0, 0, 0), (1, 1, 1))))
    x0 = be.initial_positions()["Sand"][:, 0].mean()
    for k in range(frames):
        r = be.advance()
        p = r.positions["Sand"]
        plo, phi_ = lo + [0.04 * (k + 1), 0, 0], hi + [0.04 * (k + 1), 0, 0]
        # penetration depth: distance to the nearest face for points inside the box, else 0
        depth = np.clip(np.minimum(p - plo, phi_ - p).min(axis=1), 0, None)
        # the particle projection uses the trilinear distance field: exact on faces, within a small
        # fraction of a cell at the box's convex corners
        assert depth.max() < 0.1 * be.dx
    assert np.mean(p[:, 0] >= phi_[0] - 0.02) > 0.9   # the sand was pushed ahead of the paddle
    assert p[:, 0].mean() > x0 + 0.02


@pytest.mark.parametrize("mu", [0.2, 0.5])
def test_sliding_block_decelerates_at_mu_g(mu):
    """Coulomb friction of the separating wall condition: a block sliding on the ground slows
    down at mu g (an analytic result), then stops."""
    mat = preset("elastic", youngs_modulus=1e5, particle_spacing=0.02)
    block = granular("Block", (0.1, 0.4, 0.0), (0.26, 0.56, 0.1), mat, velocity=(2.0, 0, 0))
    fps = 48
    be = MPMBackend(scene([block], frames=16, fps=fps, domain=((0, 0, 0), (1.2, 1, 1)), friction=mu))
    s = be.solver
    t, v = [], []
    for f in range(16):
        be.advance()
        t.append((f + 1) / fps)
        v.append(np.average(s.v[:, 0], weights=s.mass))
    t, v = np.array(t), np.array(v)
    sliding = v > 0.3
    decel = -np.polyfit(t[sliding], v[sliding], 1)[0]
    assert decel == pytest.approx(mu * 9.81, rel=0.05)
    if mu * 9.81 * t[-1] > 2.0:     # stopped within the run: it stays at rest
        assert abs(v[-1]) < 0.05


def test_open_ground_sheet_holds_sand_with_its_thickness():
    """An open mesh (a single quad) acts as a slab of its Material.thickness."""
    v = np.array([[-0.1, -0.1, 0.3], [1.1, -0.1, 0.3], [1.1, 1.1, 0.3], [-0.1, 1.1, 0.3]])
    t = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    from protocol.scene import Body, Material
    sheet = Body(name="Sheet", role="collider", vertices=v, triangles=t, material=Material(friction=0.5, thickness=0.01))
    sand = granular("Sand", (0.4, 0.4, 0.4), (0.6, 0.6, 0.55), preset("sand", particle_spacing=0.025))
    be = MPMBackend(scene([sand, sheet], frames=12, domain=((0, 0, 0), (1, 1, 1))))
    for _ in range(12):
        r = be.advance()
    z = r.positions["Sand"][:, 2]
    assert z.min() >= 0.31 - 1e-4          # on top of the 1 cm slab, none fell through
    assert z.max() < 0.5                    # it did fall onto it


@pytest.mark.parametrize("kind", ["sticky", "slip", "separate"])
def test_collider_boundary_kinds_on_a_floor(kind):
    """A block sliding on a collider floor: sticky stops it, frictionless slip and separate keep its
    speed (no friction), and nothing sinks into the floor."""
    mat = preset("elastic", youngs_modulus=1e5, particle_spacing=0.02)
    block = granular("Block", (0.1, 0.4, 0.1), (0.26, 0.56, 0.2), mat, velocity=(1.0, 0, 0))
    floor = collider_box("Floor", (-0.1, -0.1, -0.1), (1.3, 1.1, 0.1), friction=0.0)
    be = MPMBackend(scene([block, floor], frames=8, fps=48, domain=((0, 0, 0), (1.2, 1, 1)), friction=0.0),
                    collider_boundary=kind)
    s = be.solver
    for _ in range(8):
        r = be.advance()
        assert r.positions["Block"][:, 2].min() >= 0.1 - 1e-6
    vx = np.average(s.v[:, 0], weights=s.mass)
    if kind == "sticky":
        assert vx < 0.5
    else:
        assert vx == pytest.approx(1.0, abs=0.05)
