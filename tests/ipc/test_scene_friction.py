"""Coulomb friction on a 20 degree incline: sticks with mu = 1.1 tan(theta), slides at
g (sin theta - mu cos theta) with mu = 0.5 tan(theta) (book: "Friction", incline check)."""
import numpy as np
import pytest

from protocol.scene import Body, Material
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import box
from .test_scene_helpers import plane, scene

THETA = np.radians(20.0)


def _incline(mu, frames, plane_size=2.0):
    R = np.array([[np.cos(THETA), 0, -np.sin(THETA)], [0, 1, 0], [np.sin(THETA), 0, np.cos(THETA)]])
    V, T = box((0.1, 0.1, 0.1), center=(0, 0, 0.0505), divisions=1)
    cubeb = Body("cube", "solid", V @ R.T, T, material=Material(youngs_modulus=1e5, friction=mu))
    return scene(cubeb, plane(size=plane_size, friction=mu, tilt_deg=20.0), frame_end=frames + 1)


def _run(mu, frames, plane_size=2.0):
    sc = _incline(mu, frames, plane_size)
    b = MeshBackend(sc)
    n = len(sc.bodies[0].vertices)
    c0 = b.stepper.x[:n].mean(0)
    d = []
    for _ in range(frames):
        b.advance()
        assert b.stepper.x[n:n + 1].size  # collider present
        # no vertex of the cube below the incline plane (distance along the plane normal)
        nrm = np.array([-np.sin(THETA), 0.0, np.cos(THETA)])
        assert (b.stepper.x[:n] @ nrm).min() > 0.0
        d.append(np.linalg.norm(b.stepper.x[:n].mean(0) - c0))
    return np.array(d), b


def test_incline_sticks_with_mu_above_tan_theta():
    d, b = _run(1.1 * np.tan(THETA), 48)  # 2 s at 24 fps
    assert d[-1] < 1e-3


@pytest.mark.slow
def test_incline_slides_at_coulomb_acceleration():
    mu = 0.5 * np.tan(THETA)
    d, b = _run(mu, 24, plane_size=4.0)
    t = np.arange(1, 25) / 24.0
    a_fit = 2.0 * np.polyfit(t[6:], d[6:], 2)[0]
    a = 9.81 * (np.sin(THETA) - mu * np.cos(THETA))
    assert abs(a_fit - a) < 0.05 * a
