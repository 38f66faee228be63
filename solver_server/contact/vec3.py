"""Tiny 3-vector helpers on tuples for numba kernels.

Kernels pass points as (x, y, z) float tuples so that no heap array is allocated per
contact pair; numba keeps tuples in registers. Units are whatever the caller uses (metres).
"""
from numba import njit


@njit(cache=True, fastmath=False, inline="always")
def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(cache=True, fastmath=False, inline="always")
def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@njit(cache=True, fastmath=False, inline="always")
def scale(a, s):
    return (a[0] * s, a[1] * s, a[2] * s)


@njit(cache=True, fastmath=False, inline="always")
def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True, fastmath=False, inline="always")
def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@njit(cache=True, fastmath=False, inline="always")
def row(x, i):
    """Row i of an (n, 3) array as a tuple."""
    return (x[i, 0], x[i, 1], x[i, 2])
