"""The C2 log barrier of IPC (Li et al. 2020), applied to the unsigned contact distance.

b(s) = -(s - dhat)^2 ln(s / dhat) for 0 < s < dhat, 0 for s >= dhat, +inf for s <= 0.

s is the *contact distance* in metres (unsigned distance minus the contact offsets of the two
primitives), dhat the activation distance in metres; b has units of m^2 and the caller's
stiffness kappa (J/m^2) turns it into energy. This form is C2 at s = dhat (b, b', b'' all vanish),
unlike the C1 barrier (kappa/2)(s/dhat - 1) ln(s/dhat) of the book's "Distance Barrier" chapter,
so Newton sees no Hessian jump when a pair enters the active set. docs/contact.md explains why we
apply it to s (not s^2): offsets for cloth/rod thickness make s = d - o the natural variable.
"""
import math

from numba import njit


@njit(cache=True, fastmath=False)
def barrier(s: float, dhat: float) -> float:
    if s >= dhat:
        return 0.0
    if s <= 0.0:
        return math.inf
    t = s - dhat
    return -t * t * math.log(s / dhat)


@njit(cache=True, fastmath=False)
def barrier_first_derivative(s: float, dhat: float) -> float:
    if s >= dhat:
        return 0.0
    t = s - dhat
    return -2.0 * t * math.log(s / dhat) - t * t / s


@njit(cache=True, fastmath=False)
def barrier_second_derivative(s: float, dhat: float) -> float:
    if s >= dhat:
        return 0.0
    t = s - dhat
    return -2.0 * math.log(s / dhat) - 4.0 * t / s + t * t / (s * s)
