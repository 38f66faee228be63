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
    sc = _incline(mu, frames, plane_size)
    sc = Scene(Settings(**{**sc.settings.__dict__, "solver_quality": "fast"}), sc.bodies)
    b = fast_backend(sc)
    n = len(sc.bodies[0].vertices)
    c0 = b.stepper.x[:n].mean(0)
    d, along = [], []
    for _ in range(frames):
        b.advance()
        x = b.stepper.x[:n]
        assert (x @ NORMAL).min() > 0.0                 # no vertex of the cube below the incline plane
        assert intersections(b) == 0
        d.append(np.linalg.norm(x.mean(0) - c0))
        along.append((x.mean(0) - c0) @ DOWNHILL)
    return np.array(d), np.array(along), b


def test_incline_sticks_with_mu_above_tan_theta():
    d, along, b = _run(1.1 * np.tan(THETA), 48)        # 2 s at 24 fps
    assert d[-1] < 1e-3                                 # measured 0.54 mm (mostly the normal settling)
    assert abs(along[-1]) < 1e-3


@pytest.mark.xfail(strict=True, reason=(
    "the box slides at a constant 3.8 cm/s instead of accelerating: centroid moves 1.59 mm every frame from "
    "frame 2 on, fitted a = 3e-5 m/s^2 vs g (sin - mu cos) = 1.678 m/s^2 (-100%); every step stops at the "
    "200-sweep budget unconverged (measured 2026-11-23). The displacement balls are isotropic, radius "
    "gamma s ~ 0.4 x 0.9 mm next to the plane, so a resting contact also caps the TANGENTIAL move per "
    "contact detection; the sweep budget then caps the sliding speed (artificial friction): 5 detections per "
    "step x 0.36 mm = 1.6 mm/frame; with mu = 0 it still creeps at 3.2 mm/frame (10 detections x 0.32 mm)."))
def test_incline_slides_at_coulomb_acceleration():
    mu = 0.5 * np.tan(THETA)
    d, along, b = _run(mu, 24, plane_size=4.0)
    t = np.arange(1, 25) / 24.0
    a_fit = 2.0 * np.polyfit(t[6:], along[6:], 2)[0]
    a = 9.81 * (np.sin(THETA) - mu * np.cos(THETA))
    assert abs(a_fit - a) < 0.02 * a, f"a_fit = {a_fit:.4g} m/s^2, expected {a:.4g} m/s^2"
