"""Pieces of the affine-body objective shared by the body pass (affine_block.py) and the coupled body
step (joint_bodies.py): a friction pair's tangential displacement, energy and Hessian in u, and the
scratch arrays of a body's gradient / Hessian and of its admissible-ray test.

A lagged friction pair k (ipc/contact/friction) has four slots with coefficients c_i, a tangent basis
T_k (3, 2) and mu lambda_k, all frozen at x_fr (the step's start): its tangential displacement is
u = T_k^T sum_i c_i (x_i - x_fr,i) (m) and its energy mu lambda_k f0(|u|) (J / s^2 in the sweep's
units, the step objective divided by h^2, as every block-descent term)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from solver_server.contact.barrier_pair import new_scratch
from solver_server.contact.friction import f0, f1_over_y


@njit(cache=True, fastmath=False, inline="always")
def slot_positions(ids, k, x, X):
    """X (12,) = positions (m) of the four slots of pair k (ids (K, 4)) read from x (n, 3)."""
    for i in range(4):
        for c in range(3):
            X[3 * i + c] = x[ids[k, i], c]


@njit(cache=True, fastmath=False, inline="always")
def friction_u(k, X, FR):
    """Tangential displacement (u0, u1) (m) of friction pair k of FR (vertex_contact.FrictionPack) with
    its four slots at X (12,)."""
    fids, fcoef, fT, x_fr = FR.ids, FR.coef, FR.T, FR.x_ref
    d0 = 0.0
    d1 = 0.0
    d2 = 0.0
    for i in range(4):
        u = fids[k, i]
        d0 += fcoef[k, i] * (X[3 * i] - x_fr[u, 0])
        d1 += fcoef[k, i] * (X[3 * i + 1] - x_fr[u, 1])
        d2 += fcoef[k, i] * (X[3 * i + 2] - x_fr[u, 2])
    u0 = fT[k, 0, 0] * d0 + fT[k, 1, 0] * d1 + fT[k, 2, 0] * d2
    u1 = fT[k, 0, 1] * d0 + fT[k, 1, 1] * d1 + fT[k, 2, 1] * d2
    return u0, u1


@njit(cache=True, fastmath=False, inline="always")
def friction_energy(k, X, FR):
    """mu lambda_k f0(|u|) of friction pair k with its slots at X (12,)."""
    u0, u1 = friction_u(k, X, FR)
    return FR.mu_lambda[k] * f0(math.sqrt(u0 * u0 + u1 * u1), FR.eps)


@njit(cache=True, fastmath=False, inline="always")
def friction_u_hessian(k, u0, u1, FR):
    """(f, h00, h01, h11) of friction pair k at displacement u: f = mu lambda f1(|u|) / |u| (the
    gradient in u is f u) and the exact Hessian in u, mu lambda (f1' uh uh^T + f1 / |u| (I - uh uh^T)),
    uh = u / |u| (PSD: f1' >= 0 below eps, 0 above; f I at u = 0)."""
    fml, eps_f = FR.mu_lambda, FR.eps
    yk = math.sqrt(u0 * u0 + u1 * u1)
    f = fml[k] * f1_over_y(yk, eps_f)
    h00 = f
    h01 = 0.0
    h11 = f
    if yk > 0.0:
        fp = fml[k] * (2.0 / eps_f - 2.0 * yk / (eps_f * eps_f) if yk < eps_f else 0.0)
        e0_ = u0 / yk
        e1_ = u1 / yk
        h00 = fp * e0_ * e0_ + f * (1.0 - e0_ * e0_)
        h01 = (fp - f) * e0_ * e1_
        h11 = fp * e1_ * e1_ + f * (1.0 - e1_ * e1_)
    return f, h00, h01, h11


@njit(cache=True, fastmath=False, inline="always")
def friction_block(fT, k, c, d, h00, h01, h11):
    """Entry (c, d) of T_k H_u T_k^T, the friction Hessian in x of one unit of slot weight."""
    return (fT[k, c, 0] * (h00 * fT[k, d, 0] + h01 * fT[k, d, 1])
            + fT[k, c, 1] * (h01 * fT[k, d, 0] + h11 * fT[k, d, 1]))


@njit(cache=True, fastmath=False)
def body_scratch():
    """Work arrays of body_kernels.body_grad_hess: (g (12,), H (12, 12), PairScratch, X (12,), pos (3,),
    a (9,), wi (4,), wj (4,))."""
    return (np.empty(12), np.empty((12, 12)), new_scratch(), np.empty(12), np.empty(3), np.empty(9),
            np.empty(4), np.empty(4))


@njit(cache=True, fastmath=False)
def ray_scratch():
    """Work arrays of affine_block._body_ray: (cur, dx, nb, nrm), (3,) each."""
    return np.empty(3), np.empty(3), np.empty(3), np.empty(3)
