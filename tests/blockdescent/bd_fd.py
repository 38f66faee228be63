"""Finite-difference helpers for the block-descent kernel tests (per-vertex derivatives)."""
import numpy as np


def fd_vertex_gradient(energy, x, v, eps=1e-7):
    """Central FD (3,) of energy(x) w.r.t. the three coordinates of vertex v."""
    g = np.zeros(3)
    for a in range(3):
        xp = x.copy()
        xm = x.copy()
        xp[v, a] += eps
        xm[v, a] -= eps
        g[a] = (energy(xp) - energy(xm)) / (2 * eps)
    return g


def fd_vertex_jacobian(grad, x, v, eps=1e-7):
    """Central FD (3, 3) of a per-vertex gradient grad(x) (3,) w.r.t. vertex v: column b = d g / d x_vb."""
    J = np.zeros((3, 3))
    for b in range(3):
        xp = x.copy()
        xm = x.copy()
        xp[v, b] += eps
        xm[v, b] -= eps
        J[:, b] = (grad(xp) - grad(xm)) / (2 * eps)
    return J


def rel(a, b):
    """Largest absolute difference relative to the larger of the two magnitudes."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    return float(np.abs(a - b).max() / max(np.abs(a).max(), np.abs(b).max(), 1e-300))


def assert_sym_psd(H, tol=1e-10):
    H = np.asarray(H, float)
    s = max(np.abs(H).max(), 1e-300)
    assert np.abs(H - H.T).max() <= 1e-12 * s, f"block not symmetric: {H}"
    w = np.linalg.eigvalsh(0.5 * (H + H.T))
    assert w.min() >= -tol * s, f"block not PSD: eigenvalues {w}"


def embed(X, n_total, ids):
    """Place the rows of X (k, 3) at rows ids of an (n_total, 3) array filled with far-away junk, so a
    kernel that reads the wrong rows gives visibly wrong numbers."""
    rng = np.random.default_rng(123)
    x = 50.0 + rng.standard_normal((n_total, 3))
    x[np.asarray(ids)] = X
    return x
