"""Exact orientation predicates on double-precision coordinates, in numba (no Python per pair).

A determinant of coordinate differences is a polynomial in the input doubles; it is evaluated as a
floating-point *expansion* (Shewchuk 1997, "Adaptive Precision Floating-Point Arithmetic and Fast
Robust Geometric Predicates"): a sum of doubles whose exact value is the determinant. Every
difference a - b is split exactly into x + y with TwoDiff, every product of doubles into x + y with
Dekker's TwoProduct (Veltkamp splitting), and every term is added with Grow-Expansion (TwoSum per
component), which keeps the expansion nonoverlapping and sorted by magnitude, so its sign is the
sign of its largest (last) nonzero component. Zero components are dropped as they appear, so
configurations with exact differences (meshes on a grid, flat faces of artist meshes) stay short.

Exact as long as no intermediate product overflows or underflows: callers check the coordinate
range first (``in_range``: nonzero differences with magnitude in [RANGE_LO, RANGE_HI]) and fall back
to rational arithmetic outside it. The orient3d expansion has at most 6 x 8 x 4 = 192 components,
orient2d at most 16. Scratch sizes: orient3d EXP3_CAP + 18, orient2d EXP2_CAP.
"""
from __future__ import annotations

import numpy as np
from numba import njit

SPLITTER = 134217729.0   # 2^27 + 1 (Veltkamp split of a 53-bit double)
RANGE_LO = 1.0e-80       # |difference| below this (and nonzero): products of three could underflow
RANGE_HI = 1.0e80        # above this: could overflow
CCW_BOUND = (3.0 + 16.0 * 2.0 ** -53) * 2.0 ** -53   # Shewchuk's ccwerrboundA
EXP3_CAP = 200
EXP2_CAP = 20


@njit(cache=True, fastmath=False, inline="always")
def _two_sum(a, b):
    x = a + b
    bv = x - a
    av = x - bv
    return x, (a - av) + (b - bv)


@njit(cache=True, fastmath=False, inline="always")
def _two_diff(a, b):
    x = a - b
    bv = a - x
    av = x + bv
    return x, (a - av) + (bv - b)


@njit(cache=True, fastmath=False, inline="always")
def _split(a):
    c = SPLITTER * a
    big = c - a
    hi = c - big
    return hi, a - hi


@njit(cache=True, fastmath=False, inline="always")
def _two_product(a, b):
    x = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    err1 = x - ah * bh
    err2 = err1 - al * bh
    err3 = err2 - ah * bl
    return x, al * bl - err3


@njit(cache=True, fastmath=False, inline="always")
def _grow(e, n, b):
    """Add the double b to the nonoverlapping expansion e[:n] (in place, zeros dropped); new length."""
    if b == 0.0:
        return n
    q = b
    m = 0
    for i in range(n):
        q, h = _two_sum(q, e[i])
        if h != 0.0:
            e[m] = h
            m += 1
    if q != 0.0:
        e[m] = q
        m += 1
    return m


@njit(cache=True, fastmath=False, inline="always")
def _sign(e, n):
    if n == 0:
        return 0
    return 1 if e[n - 1] > 0.0 else -1


@njit(cache=True, fastmath=False, inline="always")
def _ok(d):
    a = abs(d)
    return d == 0.0 or (RANGE_LO <= a <= RANGE_HI)


@njit(cache=True, fastmath=False)
def in_range(p, q):
    """True if every coordinate difference p - q (3,) is zero or within [RANGE_LO, RANGE_HI]."""
    return _ok(p[0] - q[0]) and _ok(p[1] - q[1]) and _ok(p[2] - q[2])


@njit(cache=True, fastmath=False)
def orient3d_exact(x, a, b, c, d, e):
    """Exact sign of det[a - d, b - d, c - d] for rows a..d of x (n, 3); e: scratch (EXP3_CAP + 18,),
    its tail holds the differences."""
    D = e[EXP3_CAP:EXP3_CAP + 18].reshape(3, 3, 2)   # D[k, i] = (hi, lo) of (row k of {a, b, c}) - d, coord. i
    rows = (int(a), int(b), int(c))
    for k in range(3):
        for i in range(3):
            hi, lo = _two_diff(x[rows[k], i], x[d, i])
            D[k, i, 0] = hi
            D[k, i, 1] = lo
    n = 0
    # det = sum over permutations (i, j, l) of (0, 1, 2) of sign * A_i B_j C_l
    for pm in range(6):
        if pm == 0:
            i, j, l, s = 0, 1, 2, 1.0
        elif pm == 1:
            i, j, l, s = 1, 2, 0, 1.0
        elif pm == 2:
            i, j, l, s = 2, 0, 1, 1.0
        elif pm == 3:
            i, j, l, s = 0, 2, 1, -1.0
        elif pm == 4:
            i, j, l, s = 1, 0, 2, -1.0
        else:
            i, j, l, s = 2, 1, 0, -1.0
        for u in range(2):
            fa = D[0, i, u]
            if fa == 0.0:
                continue
            for v in range(2):
                fb = D[1, j, v]
                if fb == 0.0:
                    continue
                p1, p2 = _two_product(fa, fb)
                for w in range(2):
                    fc = D[2, l, w]
                    if fc == 0.0:
                        continue
                    r1, r2 = _two_product(p1, fc)
                    n = _grow(e, n, s * r2)
                    n = _grow(e, n, s * r1)
                    if p2 != 0.0:
                        r3, r4 = _two_product(p2, fc)
                        n = _grow(e, n, s * r4)
                        n = _grow(e, n, s * r3)
    return _sign(e, n)


@njit(cache=True, fastmath=False)
def orient2d_exact(px, py, qx, qy, rx, ry, e):
    """Exact sign of (q - p) x (r - p) = (qx - px)(ry - py) - (qy - py)(rx - px); e: scratch (EXP2_CAP,).
    Shewchuk's static filter first (|det| > (3 + 16 eps) eps (|left| + |right|) certifies the float sign),
    the expansion only when it cannot."""
    left = (qx - px) * (ry - py)
    right = (qy - py) * (rx - px)
    det = left - right
    if abs(det) > CCW_BOUND * (abs(left) + abs(right)):
        return 1 if det > 0.0 else -1
    ax, axl = _two_diff(qx, px)
    by, byl = _two_diff(ry, py)
    ay, ayl = _two_diff(qy, py)
    bx, bxl = _two_diff(rx, px)
    n = 0
    for s, f, fl, g, gl in ((1.0, ax, axl, by, byl), (-1.0, ay, ayl, bx, bxl)):
        for u in range(2):
            fu = f if u == 0 else fl
            if fu == 0.0:
                continue
            for v in range(2):
                gv = g if v == 0 else gl
                if gv == 0.0:
                    continue
                r1, r2 = _two_product(fu, gv)
                n = _grow(e, n, s * r2)
                n = _grow(e, n, s * r1)
    return _sign(e, n)
