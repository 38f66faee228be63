"""Affine (stiff) bodies in the Fast solver: each body is one 12-DOF block of the block-descent sweep
(solver_server/solvers/block_descent/affine_block.py). Every frame of every scene is checked by abd_scenes.Run:
zero edge-triangle intersections (the exact test) and |A A^T - I|_F < RIGIDITY_TOL for every body."""
import numpy as np
import pytest

from protocol.scene import Body, Material
from solver_server.model.primitives import box, grid_sheet
from tests.abd.abd_scenes import Run, ground, scene, stiff_box

THETA = np.radians(20.0)
R_INCLINE = np.array([[np.cos(THETA), 0, -np.sin(THETA)], [0, 1, 0], [np.sin(THETA), 0, np.cos(THETA)]])


def fast(*bodies, **settings):
    return scene(*bodies, solver_quality="fast", **settings)


def _skew(w):
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])


def test_fast_solver_uses_affine_blocks():
    """Stiff is an affine body in Fast too: 4 extra rows of z per body, no tetrahedra."""
    run = Run(fast(stiff_box("b", (0.1, 0.1, 0.1), (0.0, 0.0, 0.0505)), ground(), frame_end=2))
    assert type(run.b.stepper).__name__ == "BlockDescentStepper"
    assert run.ab is not None and run.ab.n == 1
    assert run.z.shape[0] == run.s.n + 4 and len(run.s.elastic.tets) == 0


def test_free_body_thrown_with_spin():
    """Linear momentum follows m (v0 + g t) (implicit Euler is exact for a constant force, the
    orthogonality energy exerts no net force); angular momentum about the centre decays by implicit
    Euler's known loss for a spin w about a principal axis, |L_n| / |L_0| ~= (1 + 2 n (w h)^2)^(-1/2)
    (see tests/abd/test_abd_scenes.py): the block descent converges to the same step as Newton."""
    v0 = np.array([1.0, 0.5, 3.0])
    w = np.array([0.0, 0.0, 2.0])
    b = stiff_box("thrown", (0.1, 0.2, 0.3), (0.0, 0.0, 1.0), velocity=v0)
    run = Run(fast(b, frame_end=25, newton_tol=1e-5))
    ab, st = run.ab, run.b.stepper
    r = int(ab.row0[0])
    st.v[r + 1:r + 4] = (_skew(w) @ (ab.L[0] * np.eye(3))).T
    run.s.dof_map.sync(st.v)
    m = ab.props[0].mass

    def l_centre():
        return ab.angular_momentum(st.x, st.v, 0) - m * np.cross(st.x[r], st.v[r])

    L0 = l_centre()
    run.advance(24)
    P = ab.linear_momentum(st.v, 0)
    P_exact = m * (v0 + np.array([0.0, 0.0, -9.81]))
    assert np.abs(P - P_exact).max() < 1e-6 * np.abs(P_exact).max()
    L = l_centre()
    h, n = 1.0 / (24 * 4), 24 * 4     # Fast: 4 block-descent steps per solver step
    predicted = 1.0 / np.sqrt(1.0 + 2.0 * n * (np.linalg.norm(w) * h) ** 2)
    ratio = np.linalg.norm(L) / np.linalg.norm(L0)
    assert abs(ratio - predicted) < 0.01 * predicted
    assert np.linalg.norm(np.cross(L / np.linalg.norm(L), L0 / np.linalg.norm(L0))) < 1e-6


def _incline(mu, frames, size=2.0):
    b = stiff_box("box", (0.1, 0.1, 0.1), R_INCLINE @ np.array([0.0, 0.0, 0.0505]), friction=mu, rot=R_INCLINE)
    run = Run(fast(b, ground(size, friction=mu, rot=R_INCLINE), frame_end=frames + 1))
    run.advance(frames)
    p = run.p(0)
    return np.linalg.norm(p - p[0], axis=1), run


def test_box_on_incline_sticks_for_mu_above_tan_theta():
    """mu = 1.1 tan(20 deg): the box stays within 1 mm over 2 s."""
    d, run = _incline(1.1 * np.tan(THETA), 48)
    assert d[-1] < 1e-3
    assert np.abs(np.diff(d[-5:])).max() * 24.0 < 1e-3


def test_box_on_incline_sticks_at_1_02_tan_theta():
    """The stick/slip threshold within 2%: mu = 1.02 tan(20 deg) holds the box within 1 mm over 2 s
    (measured 0.65 mm, 2026-11-24: the box rises 0.48 mm out of the barrier it starts 0.5 mm deep in,
    and moves 0.43 mm along the slope: 0.27 mm in frames 1-3 while it settles, then the smoothed
    friction's creep of 3.6 um a frame, 0.86 eps_v h per step as f1(u) = 1 / 1.02 predicts)."""
    d, run = _incline(1.02 * np.tan(THETA), 48)
    assert d[-1] < 1e-3, f"the box moved {d[-1]:.4g} m"


def test_box_on_incline_slides_at_0_98_tan_theta():
    """Just below the threshold, mu = 0.98 tan(20 deg), the box slides at a = g (sin - mu cos)
    = 0.067 m/s^2 (2% of g sin theta), fitted over 2 s within 2% (measured +0.35%, 2026-11-24)."""
    mu = 0.98 * np.tan(THETA)
    d, run = _incline(mu, 48)
    t = np.arange(49) / 24.0
    a_fit = 2.0 * np.polyfit(t[6:], d[6:], 2)[0]
    a = 9.81 * (np.sin(THETA) - mu * np.cos(THETA))
    assert abs(a_fit - a) < 0.02 * a, f"a_fit = {a_fit:.4g} m/s^2, expected {a:.4g} m/s^2"


def test_box_on_incline_slides_at_coulomb_acceleration():
    """mu = 0.5 tan(20 deg): distance along the slope fits 1/2 a t^2, a = g (sin - mu cos), within 2%."""
    mu = 0.5 * np.tan(THETA)
    d, run = _incline(mu, 24, size=4.0)
    t = np.arange(25) / 24.0
    a_fit = 2.0 * np.polyfit(t[6:], d[6:], 2)[0]
    a = 9.81 * (np.sin(THETA) - mu * np.cos(THETA))
    assert abs(a_fit - a) < 0.02 * a


def _stack(n, frames):
    bs = [stiff_box(f"b{i}", (0.1, 0.1, 0.1), (0.003 * (i % 2), 0.0, 0.0505 + 0.1015 * i)) for i in range(n)]
    run = Run(fast(*bs, ground(), frame_end=frames + 1))
    run.advance(frames)
    return np.array([run.p(i) for i in range(n)]), run


@pytest.mark.slow
def test_small_stack_stays_stacked():
    """Four 10 cm boxes (staggered by 3 mm) on the ground, default tolerance: after settling (1 s) no box
    moves more than 1 mm over the next second, and they are still on top of each other."""
    ps, run = _stack(4, 48)
    drift = np.linalg.norm(ps[:, -1] - ps[:, 24], axis=1)
    assert drift.max() < 1e-3
    assert (np.diff(ps[:, -1, 2]) > 0.099).all()


@pytest.mark.slow
def test_stack_of_ten_stays_stacked_for_five_seconds():
    """The issue's check in Fast at the default tolerance: ten staggered 10 cm boxes drift < 1 mm over
    5 s after settling (1 s). Block Gauss-Seidel alone let this stack sway and walk by mm/s (its load
    passes one body per colour and the sweep budget ran out every step); the coupled body step
    (joint_bodies.py) and the adaptive start of each step (AffineBlocks.start_rows) hold it (measured
    0.02 mm over 1 s, 1 sweep per step once settled)."""
    ps, run = _stack(10, 144)
    drift = np.linalg.norm(ps[:, -1] - ps[:, 24], axis=1)
    assert drift.max() < 1e-3
    assert (np.diff(ps[:, -1, 2]) > 0.099).all()


def test_heavy_block_on_light_block_1_to_1000():
    """The issue's 1:1000 check in Fast: an 80 kg block dropped 1.5 mm onto a 0.08 kg one (density
    10,000 vs 20 kg/m^3, half the volume) on the ground: intersection free and rigid every frame (Run), the light block
    is not pushed through the ground (nor off it: it stays within a contact gap of resting), and the
    heavy one comes to rest on it, its bottom within a few contact gaps of the light block's top."""
    light = stiff_box("light", (0.2, 0.2, 0.1), (0.0, 0.0, 0.0505), density=20.0)
    heavy = stiff_box("heavy", (0.2, 0.2, 0.2), (0.02, 0.01, 0.2035), density=10000.0)
    run = Run(fast(light, heavy, ground(), frame_end=25))
    assert abs(run.ab.props[1].mass / run.ab.props[0].mass - 1000.0) < 1e-9
    run.advance(24)
    x = run.x
    lo, hi = (x[b.offset:b.offset + 8, 2] for b in run.s.blocks[:2])
    light_bottom, light_top, heavy_bottom = lo.min(), lo.max(), hi.min()
    assert 0.0 < light_bottom < 2e-3                      # squeezed to the ground, not through it
    assert 0.0 < heavy_bottom - light_top < 3e-3          # resting on the light block (gap ~ dhat)
    assert np.abs(np.diff(run.p(1)[-4:, 2])).max() < 1e-5


@pytest.fixture(scope="module")
def block_on_cloth():
    """A 72 kg stiff block set down on a 72 g cloth lying on the ground (mass ratio 1000), 32 frames."""
    Vc, Tc, Ec = grid_sheet((0.6, 0.6), (8, 8), center=(0.0, 0.0, 0.0015))
    cloth = Body("sheet", "cloth", Vc, Tc, Ec, material=Material(density=200.0, youngs_modulus=1e5, thickness=1e-3,
                                                                bending_stiffness=1e-6, friction=0.3))
    heavy = stiff_box("heavy", (0.2, 0.2, 0.2), (0.0, 0.0, 0.104), density=9000.0)
    run = Run(fast(cloth, heavy, ground(), frame_end=33))
    run.advance(32)
    return run, len(Vc)


def test_heavy_block_on_cloth_1_to_1000(block_on_cloth):
    """Intersection free and rigid every frame (Run checks both), and the cloth stays between block and
    ground: every cloth vertex under the block's bottom face (1 cm inside its edges; the block rocks
    and drifts by 1-2 cm, see the xfail below) is below that face's plane."""
    run, n = block_on_cloth
    x = run.x
    corners = x[n:n + 8]
    bottom = corners[np.argsort(corners[:, 2])[:4]]
    down = np.cross(bottom[1] - bottom[0], bottom[2] - bottom[0])
    down = down / np.linalg.norm(down) * -np.sign(down[2])
    lo, hi = bottom[:, :2].min(0), bottom[:, :2].max(0)
    under = ((x[:n, :2] > lo + 0.01) & (x[:n, :2] < hi - 0.01)).all(1)
    assert x[:n, 2].min() > 0.0
    assert under.sum() >= 9
    assert ((x[:n][under] - bottom[0]) @ down > 0.0).all()


@pytest.mark.xfail(strict=True, reason=(
    "the block does not come to rest: it sits still to a few um a frame, then jolts by 0.1-1 mm in single "
    "frames (vertical moves per frame over frames 21-32, um: 3.4 -2.9 118 -116 -2.2 2.9 -3.4 4.3 0.2 28 1059 "
    "with the Verlet list that re-measures only moved pairs; -4.6 3.2 -7.8 -5.0 213 300 -526 2.1 at 918bc5d, where this test's older version passed "
    "because it looked only at frames 21-24). Measured 2026-11-24; cause not found (the cloth vertices "
    "squeezed between two barriers, or the body's shared step fraction, are the suspects)."))
def test_heavy_block_on_cloth_comes_to_rest(block_on_cloth):
    run, _ = block_on_cloth
    dz = np.diff(run.p(0)[20:, 2])
    assert np.abs(dz).max() < 1e-4, f"vertical moves per frame (um): {np.round(dz * 1e6, 1)}"


@pytest.mark.slow
def test_stiff_box_falls_onto_cloth_over_soft_cube():
    """Coupled: a stiff box falls onto a cloth draped over a soft FEM cube; zero intersections and a
    rigid box every frame, and the box ends above the cube (resting on it through the cloth): above the
    cube's top under the box's footprint, which the box indents (1.4 kg on 144 cm^2 of a 50 kPa cube,
    ~1 mm), while the cube's unloaded top edges may stand higher than the box's bottom."""
    Vs, Ts = box((0.2, 0.2, 0.2), center=(0.0, 0.0, 0.101), divisions=2)
    soft = Body("soft", "solid", Vs, Ts, material=Material(density=500.0, youngs_modulus=5e4, friction=0.3))
    Vc, Tc, Ec = grid_sheet((0.5, 0.5), (8, 8), center=(0.0, 0.0, 0.21))
    cloth = Body("sheet", "cloth", Vc, Tc, Ec, material=Material(density=200.0, youngs_modulus=1e5, thickness=1e-3,
                                                                bending_stiffness=1e-6, friction=0.3))
    stiff = stiff_box("crate", (0.12, 0.12, 0.12), (0.0, 0.0, 0.3), density=800.0)
    run = Run(fast(soft, cloth, stiff, ground(), frame_end=13))
    run.advance(12)
    x = run.x
    blk = run.s.blocks[2]
    crate = x[blk.offset:blk.offset + 8]
    crate_bottom = crate[:, 2].min()
    lo, hi = crate[:, :2].min(0), crate[:, :2].max(0)
    under = ((x[:len(Vs), :2] > lo) & (x[:len(Vs), :2] < hi)).all(1)
    assert under.any()                           # the centre column of the 2-division cube
    assert crate_bottom > x[:len(Vs)][under, 2].max()
    assert run.p(0)[-1, 2] < 0.3 - 0.03          # it fell onto the cloth-covered cube


@pytest.mark.slow
def test_cloth_over_a_falling_stiff_box_landing_on_a_soft_cube():
    """The issue's arrangement in Fast: a cloth sheet 4 cm above a stiff box that falls 4 cm onto a soft
    FEM cube; the box lands, the cloth falls onto it and drapes over its sides. Zero intersections and a
    rigid box every frame (Run). After 16 frames (0.67 s): the box rests on the cube (its bottom above the
    cube's top under its footprint, within a few contact gaps: 1.4 kg on a 50 kPa cube indents it ~1 mm);
    on every frame the cloth over the box's top face is on the outer side of that face's plane, and on
    some frame it touches it (within 2 mm: cloth offset 0.5 mm + gap < 1 mm); the sheet hangs past the
    box's sides (its lowest vertex below the box's bottom). The coarse sheet lands on the top, flaps by
    mm to cm, and settles: nearest per frame at 17fd160, mm: 40 40 2.4 11 9.6 8.1 8.8 14 2.8 7.7 7.1 4.3
    1.4 1.4 1.5 1.5 (1.4-1.9 through frame 24); an earlier trajectory touched at frame 6 (1.8 mm), so
    12 frames, this test's earlier window, was a matter of luck."""
    Vs, Ts = box((0.2, 0.2, 0.2), center=(0.0, 0.0, 0.101), divisions=2)
    soft = Body("soft", "solid", Vs, Ts, material=Material(density=500.0, youngs_modulus=5e4, friction=0.3))
    stiff = stiff_box("crate", (0.12, 0.12, 0.12), (0.0, 0.0, 0.3), density=800.0)
    # 16 x 16 cells (3.1 cm): a sheet much coarser than the box's top levers its centre up over the edges
    Vc, Tc, Ec = grid_sheet((0.5, 0.5), (16, 16), center=(0.0, 0.0, 0.4))
    cloth = Body("sheet", "cloth", Vc, Tc, Ec, material=Material(density=200.0, youngs_modulus=1e5, thickness=1e-3,
                                                                bending_stiffness=1e-6, friction=0.3))
    run = Run(fast(soft, stiff, cloth, ground(), frame_end=17))
    blk_soft, blk_crate, blk_cloth = run.s.blocks[:3]
    closest = []                                             # per frame: cloth over the top, nearest to it
    for _ in range(16):
        run.advance(1)
        x = run.x
        crate = x[blk_crate.offset:blk_crate.offset + 8]
        sheet = x[blk_cloth.offset:blk_cloth.offset + len(Vc)]
        lo, hi = crate[:, :2].min(0), crate[:, :2].max(0)
        top = crate[np.argsort(crate[:, 2])[4:]]             # the top face's 4 corners
        n = np.cross(top[1] - top[0], top[2] - top[0])
        n = n / np.linalg.norm(n) * np.sign(n[2])
        over = ((sheet[:, :2] > lo + 0.01) & (sheet[:, :2] < hi - 0.01)).all(1)
        lift = (sheet[over] - top[0]) @ n
        assert over.sum() >= 9 and (lift > 0.0).all()        # the cloth stays on the top's outer side
        closest.append(lift.min())
    cube = x[blk_soft.offset:blk_soft.offset + len(Vs)]
    under = ((cube[:, :2] > lo) & (cube[:, :2] < hi)).all(1)
    assert under.any()                                       # the centre column of the 2-division cube
    gap = crate[:, 2].min() - cube[under, 2].max()
    assert 0.0 < gap < 3e-3                                  # resting on the cube
    assert run.p(0)[-1, 2] < 0.3 - 0.035                     # it fell ~4 cm
    assert min(closest) < 2e-3, np.round(np.array(closest) * 1e3, 2)   # the cloth came down onto the top
    assert sheet[:, 2].min() < crate[:, 2].min()             # draped past the box's sides


def test_keyframed_stiff_body_pushes_a_free_one():
    """A keyframed stiff body follows its animation (its rows are prescribed) and pushes a free box."""
    frames = 24
    Vk, Tk = box((0.1, 0.1, 0.1), center=(0.0, 0.0, 0.0), divisions=1)
    anim = []
    for t in np.linspace(0.0, 1.0, frames + 1):
        a = 0.5 * t
        Rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        anim.append(Vk @ Rz.T + [-0.2 + 0.3 * t, 0.0, 0.0505])
    anim = np.array(anim, np.float32)
    pusher = Body("pusher", "stiff", anim[0].astype(np.float64), Tk, material=Material(density=1000.0),
                  animation=anim)
    free = stiff_box("free", (0.1, 0.1, 0.1), (0.0, 0.0, 0.0505), friction=0.3)
    run = Run(fast(pusher, free, ground(), frame_end=frames + 1))
    run.advance(frames)
    assert np.abs(run.x[:8] - anim[frames]).max() < 1e-5
    assert run.p(1)[-1, 0] > 0.01
