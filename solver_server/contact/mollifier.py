"""Edge-edge mollifier for nearly parallel edges (IPC paper, Li et al. 2020, Sec. 4.3).

The edge-edge distance is only C0 where the edges become parallel (the book's "3D Frictional
Self-Contact" chapter). IPC multiplies the edge-edge barrier by m(c) with c = |ea x eb|^2 (m^4):
m(c) = (2 - c/eps_x) c/eps_x for c < eps_x, 1 otherwise, eps_x = 1e-3 |ea_rest|^2 |eb_rest|^2.
m is C1 and vanishes at parallel edges, which makes the mollified barrier C1 there.
"""
import numpy as np
from numba import njit

MOLLIFIER_SCALE = 1.0e-3


@njit(cache=True, fastmath=False)
def mollifier(c: float, eps_x: float):
    """Returns (m, dm/dc, d2m/dc2)."""
    if c >= eps_x:
        return 1.0, 0.0, 0.0
    r = c / eps_x
    return (2.0 - r) * r, (2.0 - 2.0 * r) / eps_x, -2.0 / (eps_x * eps_x)


@njit(cache=True, fastmath=False)
def cross_norm2_grad_hess(X, g, H, want_hess):
    """c = |ea x eb|^2 of X = [a0, a1, b0, b1] (12,). Writes gradient g (12,) and Hessian H (12, 12).

    c = |ea|^2 |eb|^2 - (ea . eb)^2, so dc/dea = 2 ea |eb|^2 - 2 (ea.eb) eb and symmetric in eb.
    """
    ea = np.empty(3)
    eb = np.empty(3)
    for a in range(3):
        ea[a] = X[3 + a] - X[a]
        eb[a] = X[9 + a] - X[6 + a]
    aa = ea @ ea
    bb = eb @ eb
    ab = ea @ eb
    n = np.array([ea[1] * eb[2] - ea[2] * eb[1], ea[2] * eb[0] - ea[0] * eb[2], ea[0] * eb[1] - ea[1] * eb[0]])
    c = n @ n  # the cross product, not aa bb - ab^2, which cancels for nearly parallel edges
    ga = 2.0 * ea * bb - 2.0 * ab * eb
    gb = 2.0 * eb * aa - 2.0 * ab * ea
    g[0:3] = -ga
    g[3:6] = ga
    g[6:9] = -gb
    g[9:12] = gb
    if want_hess:
        Haa = 2.0 * bb * np.eye(3) - 2.0 * np.outer(eb, eb)
        Hbb = 2.0 * aa * np.eye(3) - 2.0 * np.outer(ea, ea)
        Hab = 4.0 * np.outer(ea, eb) - 2.0 * np.outer(eb, ea) - 2.0 * ab * np.eye(3)
        # x -> (ea, eb): ea = x1 - x0, eb = x3 - x2; signs per slot
        sa = (-1.0, 1.0)
        for i in range(2):
            for k in range(2):
                H[3 * i:3 * i + 3, 3 * k:3 * k + 3] = sa[i] * sa[k] * Haa
                H[6 + 3 * i:9 + 3 * i, 6 + 3 * k:9 + 3 * k] = sa[i] * sa[k] * Hbb
                H[3 * i:3 * i + 3, 6 + 3 * k:9 + 3 * k] = sa[i] * sa[k] * Hab
                H[6 + 3 * k:9 + 3 * k, 3 * i:3 * i + 3] = sa[i] * sa[k] * Hab.T
    return c
