"""protocol.rigid: object transforms recovered from the frames of a stiff (affine) body."""
import numpy as np

from protocol.rigid import affine_fit, polar_rotation, rigid_world_matrix


def _rot(rng):
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def test_affine_fit_exact_and_polar():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    A = _rot(rng) @ (np.eye(3) + 1e-3 * np.diag([1.0, -0.5, 0.2]))
    p = np.array([1.0, -2.0, 0.5])
    Af, c, pf = affine_fit(X, (X - X.mean(0)) @ A.T + p)
    assert np.abs(Af - A).max() < 1e-12 and np.abs(pf - p).max() < 1e-12
    R = polar_rotation(A)
    assert np.abs(R @ R.T - np.eye(3)).max() < 1e-12 and np.linalg.det(R) > 0
    P = R.T @ A
    assert np.abs(P - P.T).max() < 1e-12 and np.linalg.eigvalsh(0.5 * (P + P.T)).min() > 0


def test_world_matrix_reproduces_rigid_motion_of_a_scaled_object():
    """An object with world matrix M0 (rotation, non-uniform scale, translation) moved rigidly by
    (R, t): M_f applied to its local vertices gives the moved world positions, float32 frames
    included, and M_f keeps the object's scale."""
    rng = np.random.default_rng(1)
    local = rng.uniform(-1, 1, (12, 3))
    M0 = np.eye(4)
    M0[:3, :3] = _rot(rng) @ np.diag([1.0, 2.0, 0.5])
    M0[:3, 3] = [3.0, -1.0, 2.0]
    world0 = local @ M0[:3, :3].T + M0[:3, 3]
    R, t = _rot(rng), np.array([0.2, 0.3, -0.4])
    moved = (world0 @ R.T + t).astype(np.float32)
    M = rigid_world_matrix(world0, moved, M0)
    back = local @ M[:3, :3].T + M[:3, 3]
    assert np.abs(back - moved).max() < 1e-5
    assert np.allclose(np.linalg.norm(M[:3, :3], axis=0), [1.0, 2.0, 0.5], atol=1e-6)
