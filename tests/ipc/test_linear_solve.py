"""The Newton system's direct solve: CHOLMOD (when installed) agrees with SuperLU, reuses its symbolic
analysis while the sparsity pattern is unchanged and re-analyses when it changes; SuperLU is the
fallback."""
import numpy as np
import pytest
import scipy.sparse as sp

from solver_server.solvers.newton import linear_solve as ls


def _spd(n=240, density=0.03, seed=0, shift=3.0):
    A = sp.random(n, n, density=density, random_state=seed)
    return (A @ A.T + shift * sp.identity(n)).tocsr()


def test_direct_solve_matches_superlu():
    H = _spd()
    b = np.random.default_rng(1).standard_normal(H.shape[0])
    p = ls.LinearSolver("direct").solve(H, b)
    q = ls.solve_superlu(H, b)
    assert np.abs(H @ p - b).max() < 1e-10
    assert np.abs(p - q).max() < 1e-10 * max(1.0, np.abs(q).max())


@pytest.mark.skipif(not ls.HAVE_CHOLMOD, reason="scikit-sparse (CHOLMOD) not installed: SuperLU is used")
def test_cholmod_reuses_symbolic_analysis_only_for_the_same_pattern():
    s = ls.LinearSolver("direct")
    H = _spd()
    b = np.ones(H.shape[0])
    for scale in (1.0, 2.0, 5.0):  # same pattern, new values: numeric factorisation only
        p = s.solve(H * scale, b)
        assert np.abs(scale * (H @ p) - b).max() < 1e-10
    assert (s.cholesky.analyses, s.cholesky.factorisations) == (1, 3)
    H2 = _spd(seed=7)  # another pattern (new contact pairs): analysed again
    p = s.solve(H2, b)
    assert np.abs(H2 @ p - b).max() < 1e-10
    assert s.cholesky.analyses == 2


def test_not_positive_definite_falls_back_to_superlu():
    H = _spd()
    H = (H - 1e3 * sp.identity(H.shape[0])).tocsr()  # indefinite but nonsingular
    b = np.ones(H.shape[0])
    p = ls.LinearSolver("direct").solve(H, b)
    assert np.abs(H @ p - b).max() < 1e-8 * np.abs(H).max()


@pytest.mark.skipif(not ls.HAVE_CHOLMOD, reason="scikit-sparse (CHOLMOD) not installed: SuperLU is used")
def test_serial_openmp_gives_the_same_bytes_and_restores_the_runtime(monkeypatch):
    """CHOLMOD's OpenMP copy loops on the calling thread (linear_solve._SerialOpenMP): the same solution, bit for
    bit, as with the runtime's default team (a supernodal factor large enough for those loops to run), and the
    runtime's dynamic / max-threads settings as they were afterwards."""
    A = sp.random(3000, 3000, density=0.004, random_state=5)
    H = (A @ A.T + 3.0 * sp.identity(3000)).tocsr()
    b = np.random.default_rng(2).standard_normal(3000)
    omp = ls._SerialOpenMP()
    before = [(lib.omp_get_dynamic(), lib.omp_get_max_threads()) for lib in omp.libs]
    monkeypatch.setattr(ls, "SERIAL_OPENMP", False)
    p0 = ls.LinearSolver("direct").solve(H, b)
    monkeypatch.setattr(ls, "SERIAL_OPENMP", True)
    s = ls.LinearSolver("direct")
    p1 = s.solve(H, b)
    p2 = s.solve(2.0 * H, b)
    assert p0.tobytes() == p1.tobytes()
    assert np.abs(2.0 * (H @ p2) - b).max() < 1e-9
    assert [(lib.omp_get_dynamic(), lib.omp_get_max_threads()) for lib in omp.libs] == before
    with omp:
        assert all(lib.omp_get_dynamic() == 1 and lib.omp_get_max_threads() == 1 for lib in omp.libs)
    assert [(lib.omp_get_dynamic(), lib.omp_get_max_threads()) for lib in omp.libs] == before
