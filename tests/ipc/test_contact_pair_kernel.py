"""The fast per-pair barrier kernel (barrier_pair.pair_terms), the small eigen-solver and the
block assembly against their straightforward references: potential.pair_barrier (itself
FD-checked in test_contact_barrier.py), np.linalg.eigh / full 12x12 PSD projection, and
scipy's duplicate summation."""
import numpy as np
import pytest
import scipy.sparse as sp

from solver_server.contact import (find_candidates, barrier_energy, barrier_gradient,
                                       barrier_hessian, barrier_derivatives)
from solver_server.contact.barrier import barrier_first_derivative, barrier_second_derivative
from solver_server.contact.barrier_pair import (new_scratch, pair_gauss_newton, pair_terms, pair_stencil_local,
                                                cross_norm2_value)
from solver_server.contact.block_assembly import sum_blocks
from solver_server.contact.distance import KIND_PP, KIND_PE, KIND_PT, KIND_EE
from solver_server.contact.eigen_small import jacobi_eigh, tridiagonal_ql_eigh
from solver_server.contact.potential import pair_barrier
from solver_server.contact.psd import project_psd

from .test_contact_barrier import _two_sheets


def _random_pairs(n, seed):
    """Random point-triangle / edge-edge configurations within dhat, a fifth of the edge-edge ones
    nearly parallel (mollified), some with contact offsets."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        t = len(out)
        is_ee = t % 2
        X = rng.normal(size=12) * 0.01
        if is_ee and t % 5 == 1:
            X[9:12] = X[6:9] + 0.8 * (X[3:6] - X[0:3]) + rng.normal(size=3) * 1e-5
        off = 0.001 if t % 3 == 0 else 0.0
        dhat = 0.02
        epsx = 1e-3 * np.sum((X[3:6] - X[:3]) ** 2) * np.sum((X[9:12] - X[6:9]) ** 2) if is_ee else 0.0
        s = np.sqrt(pair_stencil_local(X, is_ee)[5]) - off
        if 0.0 < s < dhat:
            out.append((X, is_ee, off, epsx, dhat))
    return out


def _expand(sc, ns):
    H = np.zeros((12, 12))
    sl = sc.slots[:ns]
    for u in range(ns):
        for v in range(ns):
            H[3 * sl[u]:3 * sl[u] + 3, 3 * sl[v]:3 * sl[v] + 3] = sc.hess[3 * u:3 * u + 3, 3 * v:3 * v + 3]
    return H


def test_fast_pair_kernel_equals_reference_and_exact_projection():
    sc = new_scratch()
    kinds = set()
    n_moll = 0
    for X, is_ee, off, epsx, dhat in _random_pairs(3000, 4):
        st = pair_stencil_local(X, is_ee)
        kinds.add((is_ee, st[0]))
        g = np.zeros(12)
        H = np.zeros((12, 12))
        e = pair_barrier(X, st, is_ee, off, epsx, dhat, g, H, True, True)
        scale = np.abs(H).max()
        e2, ns = pair_terms(X, is_ee, off, epsx, dhat, True, False, sc)
        assert abs(e2 - e) <= 1e-13 * abs(e)
        assert np.abs(sc.grad - g).max() <= 1e-9 * np.abs(g).max()
        assert np.abs(_expand(sc, ns) - H).max() <= 1e-10 * scale
        e3, ns = pair_terms(X, is_ee, off, epsx, dhat, True, True, sc)
        P = _expand(sc, ns)
        assert np.abs(P - project_psd(H)).max() <= 1e-10 * scale
        n_moll += bool(is_ee and cross_norm2_value(X) < epsx)
    assert {(0, KIND_PP), (0, KIND_PE), (0, KIND_PT), (1, KIND_PP), (1, KIND_PE), (1, KIND_EE)} <= kinds
    assert n_moll > 100   # the mollified (full 9-D) path ran


def test_gauss_newton_pair_equals_the_reference_first_term_and_nears_the_exact_hessian_close_in():
    """pair_gauss_newton: the exact gradient (the reference pair_barrier's) and the Hessian's first term
    b''(s) grad s grad s^T (grad s = the reference gradient / b'(s)); mollified pairs are handed back (ns -1).
    The dropped term b'(s) hess s is of relative size ~s / L: with the pair pushed to s = 1e-4 of its size, the
    Gauss-Newton Hessian is within 1e-3 of the exact one (the approximation is for contact closer than the mesh
    size, as between affine bodies' surfaces)."""
    sc = new_scratch()
    n_gn = n_moll = 0
    for X, is_ee, off, epsx, dhat in _random_pairs(2000, 5):
        st = pair_stencil_local(X, is_ee)
        g = np.zeros(12)
        H = np.zeros((12, 12))
        e = pair_barrier(X, st, is_ee, off, epsx, dhat, g, H, True, True)
        e2, wg, w, ns = pair_gauss_newton(X, is_ee, off, epsx, dhat, sc)
        if is_ee and cross_norm2_value(X) < epsx:
            assert ns == -1
            n_moll += 1
            continue
        n_gn += 1
        assert ns == {KIND_PP: 2, KIND_PE: 3}.get(st[0], 4)
        assert abs(e2 - e) <= 1e-13 * abs(e)
        assert np.abs(sc.grad - g).max() <= 1e-9 * np.abs(g).max()
        s = np.sqrt(st[5]) - off
        gs = g / barrier_first_derivative(s, dhat)
        y = np.outer(sc.coef, sc.diff).ravel()
        Hgn = w * np.outer(y, y)
        ref = barrier_second_derivative(s, dhat) * np.outer(gs, gs)
        assert np.abs(Hgn - ref).max() <= 1e-9 * np.abs(ref).max()
        assert set(np.nonzero(np.abs(y) > 0)[0] // 3) <= set(sc.slots[:ns])
    assert n_gn > 1000 and n_moll > 50
    # close in: a point at s = q L above a triangle of size L, the relative gap between the two Hessians is O(q)
    rng = np.random.default_rng(3)
    for _ in range(50):
        T = rng.normal(size=(3, 3)) * 0.01
        nrm = np.cross(T[1] - T[0], T[2] - T[0])
        nrm /= np.linalg.norm(nrm)
        L = max(np.linalg.norm(T[1] - T[0]), np.linalg.norm(T[2] - T[0]), np.linalg.norm(T[2] - T[1]))
        gap = []
        for q in (1e-4, 1e-5):
            X = np.concatenate([T.mean(0) + q * L * nrm, T.ravel()])
            dhat = 10.0 * q * L
            st = pair_stencil_local(X, 0)
            g = np.zeros(12)
            H = np.zeros((12, 12))
            pair_barrier(X, st, 0, 0.0, 0.0, dhat, g, H, True, True)
            _, _, w, ns = pair_gauss_newton(X, 0, 0.0, 0.0, dhat, sc)
            y = np.outer(sc.coef, sc.diff).ravel()
            gap.append(np.abs(w * np.outer(y, y) - H).max() / np.abs(H).max())
        assert gap[0] <= 100.0 * 1e-4 and gap[1] <= 0.15 * gap[0]


@pytest.mark.parametrize("solver", ["jacobi", "ql"])
def test_small_eigh_matches_lapack(solver):
    rng = np.random.default_rng(7)
    A = np.zeros((9, 9))
    V = np.zeros((9, 9))
    d = np.zeros(9)
    e = np.zeros(9)
    for n in (1, 2, 3, 5, 9):
        for trial in range(50):
            M = rng.normal(size=(n, n))
            M = M + M.T
            if trial % 5 == 0:   # repeated and zero eigenvalues
                Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
                M = Q @ np.diag(np.round(rng.normal(size=n)) * (rng.random(n) < 0.6)) @ Q.T
            A[:n, :n] = M
            if solver == "jacobi":
                jacobi_eigh(A, n, V)
            else:
                tridiagonal_ql_eigh(A, n, V, d, e)
            w = np.diag(A)[:n]
            ref = np.linalg.eigvalsh(M)
            scale = max(1.0, np.abs(ref).max())
            assert np.abs(np.sort(w) - ref).max() <= 1e-13 * scale
            Vn = V[:n, :n]
            assert np.abs(Vn.T @ Vn - np.eye(n)).max() <= 1e-13
            assert np.abs(Vn @ np.diag(w) @ Vn.T - M).max() <= 1e-13 * scale


def test_sum_blocks_equals_scipy_duplicate_sum_and_is_canonical():
    rng = np.random.default_rng(3)
    n = 40
    bi = rng.integers(0, n, 3000).astype(np.int32)
    bj = rng.integers(0, n, 3000).astype(np.int32)
    bval = rng.normal(size=(3000, 3, 3))
    r, c, v = sum_blocks(bi, bj, bval, n)
    R = (3 * bi[:, None, None] + np.arange(3)[None, :, None] + 0 * bval).ravel()
    C = (3 * bj[:, None, None] + np.arange(3)[None, None, :] + 0 * bval).ravel()
    ref = sp.coo_matrix((bval.ravel(), (R, C)), shape=(3 * n, 3 * n)).toarray()
    ours = sp.coo_matrix((v, (r, c)), shape=(3 * n, 3 * n))
    assert np.abs(ours.toarray() - ref).max() <= 1e-12
    key = r.astype(np.int64) * 3 * n + c
    assert np.all(np.diff(key) > 0)   # unique and row-major sorted


def test_fused_derivatives_equal_separate_calls():
    x, mesh = _two_sheets()
    cands = find_candidates(x, mesh, 0.1)
    e, g, (r, c, v) = barrier_derivatives(x, cands, mesh, 0.1, 3.0)
    assert e == barrier_energy(x, cands, mesh, 0.1, 3.0) > 0
    assert np.array_equal(g, barrier_gradient(x, cands, mesh, 0.1, 3.0))
    r2, c2, v2 = barrier_hessian(x, cands, mesh, 0.1, 3.0)
    assert np.array_equal(r, r2) and np.array_equal(c, c2) and np.array_equal(v, v2)
