"""Central finite differences shared by the contact tests."""
import numpy as np


def fd_gradient(f, x, h=1e-6):
    x = np.asarray(x, dtype=np.float64).ravel()
    g = np.zeros_like(x)
    for i in range(x.size):
        xp = x.copy()
        xm = x.copy()
        xp[i] += h
        xm[i] -= h
        g[i] = (f(xp) - f(xm)) / (2 * h)
    return g


def fd_jacobian(gfun, x, h=1e-6):
    x = np.asarray(x, dtype=np.float64).ravel()
    cols = []
    for i in range(x.size):
        xp = x.copy()
        xm = x.copy()
        xp[i] += h
        xm[i] -= h
        cols.append((gfun(xp) - gfun(xm)) / (2 * h))
    return np.array(cols).T


def assert_close(a, b, rel=1e-6, abs_=1e-9):
    a = np.asarray(a)
    b = np.asarray(b)
    err = np.linalg.norm(a - b)
    scale = max(np.linalg.norm(a), np.linalg.norm(b))
    assert err <= rel * scale + abs_, f"FD mismatch: |diff|={err:.3e}, scale={scale:.3e}"
