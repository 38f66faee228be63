"""Newton's full step bent towards each body's rotation (bodies/affine.py, ``rotation_following_step``).
References: the closed form (I + W + W^2/2)(I + W + W^2/2)^T = I + W^4/4 for a skew W (a straight step
(I + W) A stretches by W^2), and the converged implicit-Euler answer, which the bent step must not change:
a cube thrown with a fast spin about a non-principal axis reaches the same positions (tight tolerance) with
and without it, in fewer Newton iterations with it."""
import dataclasses

import numpy as np

from solver_server.bodies import AffineBodies
from solver_server.bodies.affine import rotation_following_step

from .abd_scenes import Run, scene, stiff_box


def _skew(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def test_bent_step_ends_on_the_rotation_to_fourth_order():
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    A = q * np.sign(np.linalg.det(q))
    L = 0.07
    z = np.zeros((4, 3))
    z[0] = [0.1, 0.2, 0.3]
    z[1:4] = L * A.T
    for w in (0.05, 0.1, 0.2):
        W = _skew(w * np.array([0.6, -0.48, 0.64]))
        dA = W @ A
        p = np.zeros((4, 3))
        p[1:4] = L * dA.T
        p[0] = [0.01, 0.0, 0.0]
        q2 = rotation_following_step(z, p, np.array([0]), np.array([L]))
        A2 = (z[1:4] + q2[1:4]).T / L
        A1 = (z[1:4] + p[1:4]).T / L
        np.testing.assert_allclose(A2 @ A2.T - np.eye(3), 0.25 * np.linalg.matrix_power(W, 4), atol=1e-13)
        assert np.linalg.norm(A1 @ A1.T - np.eye(3)) > 0.9 * w * w
        np.testing.assert_array_equal(q2[0], p[0])        # translation untouched


def test_bent_step_keeps_the_converged_answer_and_saves_iterations():
    out = {}
    for bent in (False, True):
        AffineBodies.ROTATION_STEP = bent
        try:
            b = stiff_box("spin", (0.1, 0.06, 0.03), (0.0, 0.0, 1.0))
            r = Run(scene(b, frame_start=1, frame_end=7, newton_tol=1e-6))
            ab = r.ab
            rr = int(ab.row0[0])
            # a spin of 8 rad/s about a tilted axis: the rows' velocity is (L A^T)' = L (W A)^T
            W = _skew(8.0 * np.array([0.3, 0.5, 0.81]) / np.linalg.norm([0.3, 0.5, 0.81]))
            A = ab.A(r.z, 0)
            r.b.stepper.v[rr + 1:rr + 4] = ab.L[0] * (W @ A).T
            its = 0
            for _ in range(6):
                res = r.b.advance()
                assert res.stats["converged"]
                its += res.stats["newton_iterations"]
            out[bent] = (r.b.system.body_positions(r.z)["spin"].astype(np.float64), its)
        finally:
            AffineBodies.ROTATION_STEP = True
    np.testing.assert_allclose(out[True][0], out[False][0], atol=2e-6)
    assert out[True][1] < out[False][1], out
