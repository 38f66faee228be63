"""Object transforms from the frames of stiff (affine) bodies.

The solver moves a stiff body as x_i = A X_i + p (affine body dynamics, A within ~1e-3 of a rotation),
so every frame it returns for such a body is an affine image of the body's start positions. A client
that wants the motion as object animation instead of a vertex cache (Blender's "Object Transform"
output, exported as plain transforms to Alembic / USD / FBX) recovers A and p by least squares and
takes the rotation R of the polar decomposition A = R P; the object's world matrix at that frame is

    M_f = T(p) R T(-c) M_0          (c: centroid of the start positions, M_0: world matrix at the start)

which keeps the object's own scale and its local vertex coordinates untouched. Pure numpy; units of
the positions (metres in Clearance).
"""
from __future__ import annotations

import numpy as np


def affine_fit(rest: np.ndarray, positions: np.ndarray) -> tuple:
    """(A (3, 3), c (3,), p (3,)) minimising sum_i |A (rest_i - c) + p - positions_i|^2 with c the
    centroid of ``rest``; exact for positions that are an affine image of rest (float32 frames:
    ~1e-7 relative). rest needs 4 points not in a plane."""
    X = np.asarray(rest, np.float64)
    Y = np.asarray(positions, np.float64)
    c = X.mean(axis=0)
    W = np.concatenate([np.ones((len(X), 1)), X - c], axis=1)
    sol, *_ = np.linalg.lstsq(W, Y, rcond=None)
    return sol[1:].T.copy(), c, sol[0].copy()


def polar_rotation(A: np.ndarray) -> np.ndarray:
    """The rotation R (det +1) of the polar decomposition A = R P, P symmetric positive definite."""
    U, _, Vt = np.linalg.svd(np.asarray(A, np.float64))
    if np.linalg.det(U @ Vt) < 0:
        U = U.copy()
        U[:, 2] *= -1.0
    return U @ Vt


def rigid_world_matrix(rest: np.ndarray, positions: np.ndarray, start_matrix: np.ndarray) -> np.ndarray:
    """World matrix (4, 4) of a frame of a stiff body: M_f = T(p) R T(-c) M_0 (see module doc)."""
    A, c, p = affine_fit(rest, positions)
    R = polar_rotation(A)
    M = np.eye(4)
    M[:3, :3] = R
    M[:3, 3] = p - R @ c
    return M @ np.asarray(start_matrix, np.float64)
