"""Quadratic B-spline interpolation kernel for MPM (book §27.2, "Quadratic B-Spline Interpolation").

N(x) = 3/4 - x^2 for |x| < 1/2, 1/2 (3/2 - |x|)^2 for 1/2 <= |x| < 3/2, else 0; it is C^1 and touches
3 nodes per axis (27 in 3D). For a particle at grid coordinate g = (x - origin) / dx (in cells),
``base = floor(g - 0.5)`` is the first node of its stencil and ``fx = g - base`` lies in [0.5, 1.5).
With the APIC/MLS inertia tensor D = dx^2 / 4 (constant for this kernel, book §27.3) the affine
matrix is C = (4 / dx^2) sum_i w_ip v_i (x_i - x_p)^T.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

APIC_D_INV_FACTOR = 4.0
"""D^-1 = 4 / dx^2 for the quadratic B-spline."""


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def stencil_base(g: float) -> int:
    """First node index of the 3-node stencil for grid coordinate g (cells)."""
    return int(math.floor(g - 0.5))


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def weights_1d(fx: float):
    """Weights (w0, w1, w2) of the three stencil nodes for fx = g - base in [0.5, 1.5)."""
    return (0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def dweights_1d(fx: float):
    """Derivatives dN/dg of the three stencil weights (multiply by 1/dx for d/dx)."""
    return (fx - 1.5, 2.0 * (1.0 - fx), fx - 0.5)


@njit(cache=True, fastmath=False, error_model="numpy")
def bspline(x: float) -> float:
    """The 1D quadratic B-spline N(x), x in cells (used by tests and docs)."""
    a = abs(x)
    if a < 0.5:
        return 0.75 - a * a
    if a < 1.5:
        return 0.5 * (1.5 - a) ** 2
    return 0.0
