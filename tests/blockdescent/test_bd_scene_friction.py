"""Coulomb friction with the fast solver: a box on a 20 degree incline sticks for mu = 1.1 tan(theta)
and slides at a = g (sin theta - mu cos theta) for mu = 0.5 tan(theta) (same scene and measurement
as tests/ipc/test_scene_friction.py, with solver_quality="fast")."""
import numpy as np
import pytest

from protocol.scene import Scene, Settings
from tests.ipc.test_scene_friction import THETA, _incline

from .bd_scenes import fast_backend, intersections

NORMAL = np.array([-np.sin(THETA), 0.0, np.cos(THETA)])
DOWNHILL = np.array([-np.cos(THETA), 0.0, -np.sin(THETA)])


def _run(mu, frames, plane_size=2.0):
    """Per frame: centroid distance from the start (m), its downhill component (m), the lowest cube vertex
    above the incline plane (m, along its normal) and the edge-triangle intersection count."""
    sc = _incline(mu, frames, plane_size)
    sc = Scene(Settings(**{**sc.settings.__dict__, "solver_quality": "fast"}), sc.bodies)
    b = fast_backend(sc)
    n = len(sc.bodies[0].vertices)
    c0 = b.stepper.x[:n].mean(0)
    d, along, height, hits = [], [], [], []
    for _ in range(frames):
        b.advance()
        x = b.stepper.x[:n]
        height.append((x @ NORMAL).min())
        hits.append(intersections(b))
        d.append(np.linalg.norm(x.mean(0) - c0))
        along.append((x.mean(0) - c0) @ DOWNHILL)
    return np.array(d), np.array(along), np.array(height), np.array(hits)


def _no_penetration(height, hits):
    assert (height > 0.0).all(), f"a cube vertex below the incline plane in frames {np.nonzero(height <= 0)[0] + 1}"
    assert (hits == 0).all()


@pytest.mark.xfail(strict=True, reason=(
    "the box moves 1.32 mm (1.29 mm downhill; 0.75 mm in frame 1, 0.40 mm in frame 2, then ~3 um a "
    "frame; this test allows 1 mm). Mostly not the solver: converged steps (2000 sweeps, tol 1e-9 m) "
    "still move it 1.15 mm, and the same converged steps at Newton's h = 1/24 s move it 0.55 mm (Newton: "
    "0.54 mm). This soft box (E = 1e5 Pa: its shear mode spans several Fast steps) is released undeformed, "
    "0.5 mm deep in the barrier: the shear wave and the rebound load the base beyond mu N for a few steps "
    "(lagged N = 0.83 W cos(theta) in step 3), it slips, and at mu = 1.1 tan(theta) it stops at only "
    "0.1 g sin(theta). h = 1/96 s damps that transient far less than 1/24 s. Unconverged sweeps add "
    "0.17 mm. The late creep, 0.7 eps_v h a step, is the friction smoothing. A stiff (affine) box holds "
    "at 1.02 tan(theta) and slides at 0.98 (tests/blockdescent/test_bd_affine.py). (measured 2026-11-24)"))
def test_incline_sticks_with_mu_above_tan_theta():
    d, along, height, hits = _run(1.1 * np.tan(THETA), 48)        # 2 s at 24 fps
    assert d[-1] < 1e-3, f"centroid moved {d[-1]:.4g} m (downhill per 6 frames: {np.round(along[5::6], 4)})"
    assert abs(along[-1]) < 1e-3
    _no_penetration(height, hits)


def test_incline_slides_at_coulomb_acceleration():
    """Within 2% of g (sin - mu cos): measured -0.4% (2026-11-24). Each step ends with the box's
    translation Newton step (free_translation.py); without it the unconverged sweeps left it 24% slow
    (the lagged normal force swung between 0.15 and 2.2 times its mean from step to step)."""
    mu = 0.5 * np.tan(THETA)
    d, along, height, hits = _run(mu, 24, plane_size=4.0)
    _no_penetration(height, hits)
    t = np.arange(1, 25) / 24.0
    a_fit = 2.0 * np.polyfit(t[6:], along[6:], 2)[0]
    a = 9.81 * (np.sin(THETA) - mu * np.cos(THETA))
    assert abs(a_fit - a) < 0.02 * a, f"a_fit = {a_fit:.4g} m/s^2, expected {a:.4g} m/s^2"
