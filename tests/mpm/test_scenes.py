"""Physics scenes (book §30-31 case studies and DIGEST §4 checks), coarse enough for the default
suite; each compares against an analytic result, a conservation law or a guarantee."""
import numpy as np
import pytest

from solver_server.backends.mpm_backend import MPMBackend
from solver_server.solvers.mpm.materials import preset
from .scenes import collider_box, granular, scene

G = 9.81


def test_elastic_block_bounces_then_rests_never_below_ground():
    mat = preset("elastic", youngs_modulus=1e5, particle_spacing=0.025)
    be = MPMBackend(scene([granular("Jelly", (0.4, 0.4, 0.1), (0.6, 0.6, 0.3), mat)], frames=72,
                          domain=((0, 0, 0), (1, 1, 1)), friction=0.5))
    s = be.solver
    vz, ke, zmin = [], [], []
    for _ in range(72):
        r = be.advance()
        p = r.positions["Jelly"]
        zmin.append(p[:, 2].min())
        vz.append(np.average(s.v[:, 2], weights=s.mass))
        ke.append(0.5 * (s.mass * (s.v ** 2).sum(1)).sum())
    vz = np.array(vz)
    assert min(zmin) >= 0.0                      # no particle inside the ground, ever
    hit = int(np.argmax(vz < -1.0))              # falling ...
    assert vz[hit:].max() > 0.5                  # ... then bouncing back up
    # free fall before contact: v = -g t (0.1 m drop, contact after ~0.14 s = 3 frames)
    assert vz[1] == pytest.approx(-G * 2 / 24, rel=0.05)
    assert max(ke[-6:]) < 0.02 * max(ke)         # comes to rest (numerical dissipation only)
    assert np.mean(zmin[-6:]) < 0.75 * be.dx      # resting on the ground (about half a cell gap)


def test_two_elastic_blocks_collide_conserving_momentum():
    """Book §30 two colliding blocks, in 3D, asymmetric so the total momentum is not trivially 0, under
    gravity: before ground contact the total momentum follows p0 + M g t within 1 %."""
    mat = preset("elastic", youngs_modulus=1e4, poisson_ratio=0.3, particle_spacing=0.02)
    a = granular("Left", (0.2, 0.4, 0.5), (0.36, 0.56, 0.66), mat, velocity=(3.0, 0, 0))
    b = granular("Right", (0.5, 0.42, 0.52), (0.62, 0.54, 0.64), mat, velocity=(-2.0, 0, 0))
    fps = 30
    be = MPMBackend(scene([a, b], frames=5, fps=fps, domain=((0, 0, 0), (1, 1, 1))))
    s = be.solver
    la, lb = be.ranges["Left"], be.ranges["Right"]
    p0 = s.total_momentum()
    M = s.mass.sum()
    scale = np.abs(s.mass[:, None] * s.v).sum(0)[0]
    for f in range(1, 6):
        be.advance()
        assert s.x[:, 0].min() > 0.05 and s.x[:, 0].max() < 0.95 and s.x[:, 2].min() > 0.2  # no wall, no ground
        expected = p0 + M * np.array([0, 0, -G]) * f / fps
        assert np.allclose(s.total_momentum(), expected, rtol=0, atol=0.01 * scale)
    va = np.average(s.v[la[0]:la[1], 0], weights=s.mass[la[0]:la[1]])
    vb = np.average(s.v[lb[0]:lb[1], 0], weights=s.mass[lb[0]:lb[1]])
    assert va < 3.0 - 1.0 and vb > -2.0 + 1.0    # they hit each other and exchanged momentum


def pile_angle(p, spacing, floor):
    """Slope angle (degrees) of a pile's right flank: the top particle of every column one particle
    spacing wide traces the surface; a line is fitted to it between 20 % and 80 % of the pile
    height, right of the peak (toe and crest excluded). On lattice-sampled wedges of 30..45 deg it
    reads the true angle within 1 deg (a 95th-percentile profile on columns dx wide read 2-4 deg low)."""
    edges = np.arange(p[:, 0].min(), p[:, 0].max() + spacing, spacing)
    idx = np.digitize(p[:, 0], edges)
    xs, hs = [], []
    for k in np.unique(idx):
        sel = np.flatnonzero(idx == k)
        if sel.size >= 3:
            j = sel[np.argmax(p[sel, 2])]
            xs.append(p[j, 0])
            hs.append(p[j, 2] - floor)
    xs, hs = np.array(xs), np.array(hs)
    top = hs.max()
    m = (hs > 0.2 * top) & (hs < 0.8 * top) & (xs > xs[np.argmax(hs)])
    slope = np.polyfit(xs[m], hs[m], 1)[0]
    return np.degrees(np.arctan(-slope))


def collapse_column(phi, spacing=0.01, frames=18, damping=0.0):
    """Quasi-2D sand column 0.25 m wide, 0.2 m high (frictionless side walls, symmetry wall on the
    left) released on a rough floor collider; returns (backend, final particle positions)."""
    dx = 2 * spacing
    width = 4 * dx
    mat = preset("sand", friction_angle=phi, particle_spacing=spacing)
    floor = collider_box("Floor", (-0.2, -0.2, -0.2), (1.4, width + 0.2, 0.02), friction=1.0)
    sand = granular("Sand", (0.0, 0.0, 0.02), (0.25, width, 0.22), mat)
    be = MPMBackend(scene([sand, floor], frames=frames, domain=((0, 0, 0), (1.0, width, 0.4)), friction=0.0))
    be.solver.damping = damping
    for _ in range(frames):
        r = be.advance()
    return be, r.positions["Sand"].astype(float)


RELAXATION = 6.5
"""Grid damping rate (1/s) for the quasi-static collapse: about 0.3 % of the grid velocity per
substep, an e-folding time of 0.15 s against the 0.2 s free-fall time of the column."""


@pytest.mark.parametrize("phi", [30.0, pytest.param(40.0, marks=pytest.mark.slow)])
def test_sand_pile_stands_at_its_friction_angle(phi):
    """Angle of repose: the column collapses quasi-statically (dynamic relaxation, so the flank is
    not flattened by the momentum of the slide) on a rough floor; the flank of the settled pile
    stands at the friction angle within 5 deg (measured 28.7 for 30, 36.2 for 40 at spacing 1 cm, and
    38.0 for 40 at 0.5 cm; 29.2 / 38.9 at 1 cm while the floor's condition reached half a cell into
    the sand, before issue 10's runout fix)."""
    be, p = collapse_column(phi, frames=30, damping=RELAXATION)
    assert np.percentile(np.linalg.norm(be.solver.v, axis=1), 99) < 0.02  # settled
    assert p[:, 2].min() >= 0.02 - 1e-6  # nothing sank into the floor collider
    assert p[:, 0].max() > 0.3           # it did collapse
    assert pile_angle(p, 0.01, 0.02) == pytest.approx(phi, abs=5.0)


@pytest.mark.slow
@pytest.mark.parametrize("phi, measured", [(30.0, 24.1), (40.0, 32.3)])
@pytest.mark.xfail(strict=True, reason="a free (undamped) collapse overshoots: the flank settles 6-8 deg below "
                                       "phi (docs/mpm.md, limits); the mu(I) rheology with 1 mm grains (the "
                                       "preset's default since issue 10) does not change it")
def test_free_sand_collapse_flank_at_its_friction_angle(phi, measured):
    """The same column released freely: the slide's momentum carries material past the repose slope
    (rate-independent friction, no collisional losses), measured 24.1 deg for 30 and 32.3 for 40
    (24.4 and 34.1 before issue 10's floor fix)."""
    be, p = collapse_column(phi, frames=18)
    assert np.percentile(np.linalg.norm(be.solver.v, axis=1), 99) < 0.05  # settled
    assert pile_angle(p, 0.01, 0.02) == pytest.approx(phi, abs=5.0)


def test_dam_break_front_moves_at_the_ritter_speed():
    """Ritter's shallow-water dam break: the front runs at 2 sqrt(g h0). After the initial
    acceleration (t sqrt(g/h0) < ~1.2, where the column is not shallow yet) the front position is
    a Ritter line x0 + 2 sqrt(g h0) (t - t0); we check the fitted speed within 15 %."""
    s = 0.01
    dx = 2 * s
    width = 4 * dx
    h0, L = 0.2, 0.4
    mat = preset("water", particle_spacing=s)
    be = MPMBackend(scene([granular("Water", (0, 0, 0), (L, width, h0), mat)], frames=24, fps=60,
                          domain=((0, 0, 0), (2.0, width, 0.4)), friction=0.0))
    ts, fronts = [], []
    for f in range(24):
        r = be.advance()
        ts.append((f + 1) / 60)
        fronts.append(np.percentile(r.positions["Water"][:, 0], 99.9))
    ts, fronts = np.array(ts), np.array(fronts)
    T = ts * np.sqrt(G / h0)
    late = T > 1.2
    speed, intercept = np.polyfit(ts[late], fronts[late], 1)
    ritter = 2 * np.sqrt(G * h0)
    assert speed == pytest.approx(ritter, rel=0.15)
    resid = fronts[late] - (speed * ts[late] + intercept)
    assert np.abs(resid).max() < 0.15 * (fronts[-1] - L)   # the front really follows a line
    assert np.all(np.diff(fronts) > -1e-3)                  # and never retreats
