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
    "the box creeps 0.75 mm downhill in frame 1 and 0.40 mm in frame 2, then holds (1.32 mm after 48 "
    "frames, 0.02 mm per 6 frames late; this test allows 1 mm, the Newton solver creeps 0.54 mm) "
    "(measured 2026-11-24 with the held-cluster translation step of free_translation.py; 1.29 mm without "
    "it; one extra friction re-lag half-way through each step made it 1.52 mm). The first steps' lagged "
    "normal force is set up while the box is still settling into the barrier. No block-descent step "
    "converges within its budget (FAST_SUBSTEPS steps of FAST_SWEEPS sweeps per frame). Before d99d0de "
    "(steps started at the inertia target) it slid off the 2 m plane; with 200 sweeps per step the box "
    "held after creeping 1.86 mm (f1c5c58)."))
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
