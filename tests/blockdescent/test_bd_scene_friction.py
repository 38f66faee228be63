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
    "the box slides down the incline although mu = 1.1 tan(theta), accelerating: centroid 29 mm downhill "
    "after frame 6, 0.17 m after frame 18, 0.30 m after frame 24, 0.93 m after frame 42 (0.9 m/s), 1.02 m "
    "after frame 48, off the 2 m plane's edge (measured 2026-11-23 at 2e25e94). Every block-descent step "
    "stops at its 25-sweep budget unconverged (FAST_SUBSTEPS = 4 steps of FAST_SWEEPS = 25 sweeps per frame); "
    "the steps start at the inertia target y = x^n + h v^n + h^2 g, so presumably what the unconverged sweeps "
    "leave of the downhill pull stays in the velocity. With 200 sweeps per step the steps converge (~100 "
    "sweeps each) and the box holds after creeping 1.86 mm in the first 4 frames (at f1c5c58; still above "
    "this test's 1 mm, the Newton solver creeps 0.54 mm); with 200 sweeps per step starting at x^n, before "
    "e298b09, this test passed."))
def test_incline_sticks_with_mu_above_tan_theta():
    d, along, height, hits = _run(1.1 * np.tan(THETA), 48)        # 2 s at 24 fps
    assert d[-1] < 1e-3, f"centroid moved {d[-1]:.4g} m (downhill per 6 frames: {np.round(along[5::6], 4)})"
    assert abs(along[-1]) < 1e-3
    _no_penetration(height, hits)


@pytest.mark.xfail(strict=True, reason=(
    "the box slides faster than Coulomb friction allows: fitted a = 1.787 m/s^2 vs g (sin - mu cos) = "
    "1.678 m/s^2 (+6.5%) (measured 2026-11-23 at 2e25e94; 1.848 m/s^2 at f1c5c58; before e298b09 it was "
    "capped at a constant 3.8 cm/s by the isotropic displacement balls). Presumably the same cause as the "
    "sticking case: unconverged 25-sweep steps that start at the inertia target keep part of the downhill "
    "pull friction should cancel."))
def test_incline_slides_at_coulomb_acceleration():
    mu = 0.5 * np.tan(THETA)
    d, along, height, hits = _run(mu, 24, plane_size=4.0)
    _no_penetration(height, hits)
    t = np.arange(1, 25) / 24.0
    a_fit = 2.0 * np.polyfit(t[6:], along[6:], 2)[0]
    a = 9.81 * (np.sin(THETA) - mu * np.cos(THETA))
    assert abs(a_fit - a) < 0.02 * a, f"a_fit = {a_fit:.4g} m/s^2, expected {a:.4g} m/s^2"
