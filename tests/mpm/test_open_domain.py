"""The automatic, open MPM domain (Settings.mpm_domain "auto", issue 10): sand that slides off the
edge of every collider falls on instead of resting in mid-air on an invisible wall, leaves the
grid below the lowest collider, is counted in the frame stats, and keeps its place in the
positions (the point count never changes)."""
import numpy as np
import pytest

from solver_server.backends.mpm_backend import MPMBackend, auto_domain
from solver_server.solvers.mpm.materials import preset
from .scenes import collider_box, granular, scene

G = 9.81
FPS = 24.0
FLOOR_TOP = 0.05
FLOOR_EDGE = 0.3


def _edge_scene(frames):
    """A 0.16 m sand block launched at 2 m/s towards the edge of a 0.6 m floor slab."""
    mat = preset("sand", particle_spacing=0.02)
    sand = granular("Sand", (0.06, -0.08, FLOOR_TOP), (0.22, 0.08, FLOOR_TOP + 0.1), mat, velocity=(2.0, 0, 0))
    floor = collider_box("Floor", (-0.3, -0.3, 0.0), (FLOOR_EDGE, 0.3, FLOOR_TOP), friction=0.5)
    return scene([sand, floor], frames=frames, fps=FPS, domain=None)


def test_auto_domain_covers_colliders_with_a_margin():
    sc = _edge_scene(4)
    lo, hi = auto_domain(sc, 0.04)
    # bounds x -0.3..0.3, y -0.3..0.3, z 0..0.15: margin max(0.1 * 0.6, 4 * 0.04) = 0.16, then whole cells
    assert np.allclose(lo, [-0.48, -0.48, -0.16]) and np.allclose(hi, [0.48, 0.48, 0.32])


def test_sand_sliding_off_a_floor_edge_falls_on_and_is_counted():
    frames = 24
    be = MPMBackend(_edge_scene(frames))
    s = be.solver
    n = be.n_particles
    lo_z = s.lo[2]
    counts = []
    for f in range(frames):
        r = be.advance()
        p = r.positions["Sand"]
        assert p.shape == (n, 3)                       # the point count never changes
        x = s.x
        out = np.any((x < s.lo) | (x > s.hi), axis=1)
        assert r.stats["left_domain"] == int(out.sum()) == r.stats["left_domain_per_body"]["Sand"]
        counts.append(r.stats["left_domain"])
        # off the grid: beyond the floor's edge (flying out sideways) or below the domain's floor
        assert np.all((x[out, 0] > FLOOR_EDGE + 0.16) | (x[out, 2] < lo_z))
    counts = np.array(counts)
    assert np.all(np.diff(counts) >= 0)                # once gone, gone (they fall away)
    assert counts[-1] > 0.1 * n                        # a good part of the block went over the edge
    x, v = s.x, s.v
    speed = np.linalg.norm(v, axis=1)
    on_floor = (x[:, 0] < FLOOR_EDGE + 0.04) & (x[:, 2] > FLOOR_TOP - 1e-6) & (x[:, 2] < FLOOR_TOP + 0.15)
    # nothing at rest in mid-air: every particle is on the floor, or falling
    assert np.all(on_floor | (v[:, 2] < -1.0)), "a particle hangs in mid-air"
    assert np.all(speed[~on_floor] > 1.0)
    # particles off the grid fall freely: the speed gained over the last frame is g / fps
    r0 = s.x.copy(), s.v.copy()
    off = np.any((r0[0] < s.lo) | (r0[0] > s.hi), axis=1)
    be_v0 = r0[1][off, 2].copy()
    be.advance()
    assert np.allclose(s.v[off, 2], be_v0 - G / FPS, rtol=0, atol=1e-9)
    assert np.allclose(s.v[off, :2], r0[1][off, :2], rtol=0, atol=0)


def test_box_domain_still_has_walls():
    """mpm_domain "box" keeps the old walled box: the same sand stops on the box's floor wall."""
    mat = preset("sand", particle_spacing=0.02)
    sand = granular("Sand", (0.3, 0.3, 0.2), (0.46, 0.46, 0.3), mat)
    be = MPMBackend(scene([sand], frames=12, domain=((0, 0, 0), (1, 1, 1))))
    for _ in range(12):
        r = be.advance()
    assert "left_domain" not in r.stats
    assert be.solver.x[:, 2].min() >= 0.0 and be.solver.x[:, 2].max() < 0.15


def test_threaded_p2g_leaves_out_the_particles_off_the_grid():
    """Both P2G kernels scatter the binned blocks; the particles off the grid are in no block and left
    out by both (same grid mass and momentum)."""
    frames = 10
    be = MPMBackend(_edge_scene(frames))
    s = be.solver
    for _ in range(frames):
        r = be.advance()
    assert r.stats["left_domain"] > 0
    grids = []
    for parallel in (True, False):
        s.use_threads(parallel)
        s.gm[:] = 0.0
        s.gv[:] = 0.0
        s.p2g(1e-4)
        grids.append((s.gm.copy(), s.gv.copy()))
    (m1, v1), (m2, v2) = grids
    assert np.array_equal(m1, m2) and np.array_equal(v1, v2)   # same order of addition: the same bits
    inside = ~np.any((s.x < s.lo) | (s.x > s.hi), axis=1)
    assert m1.sum() == pytest.approx(s.mass[inside].sum(), rel=1e-12)   # exactly the particles on the grid
