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


def _stiff_blocks(seed, n=24, mass=1e-2, w=1e17, k=3):
    """M + sum of w y y^T per 12-row block (SPD mathematically): the body blocks of contact pairs squeezed to
    ~1e-10 m beside a 0.01 kg mass (linear_solve.py module doc). In floating point the Cholesky fails on it."""
    rng = np.random.default_rng(seed)
    H = mass * np.eye(n)
    for b0 in range(0, n, 12):
        for _ in range(k):
            y = np.zeros(n)
            y[b0:b0 + 12] = rng.standard_normal(12)
            H += w * np.outer(y, y)
    return sp.csr_matrix(H)


def test_numerically_singular_spd_matrix_gives_a_shifted_descent_step(monkeypatch):
    """Without the shifted retry, SuperLU (no pivoting) returns a step that is not a descent direction, or stops
    with a singular factor, on several of these systems; with it every step is finite and a descent direction
    (p . b > 0 for H p = b, H SPD), solves H + delta diag(H) exactly, and says it was shifted."""
    systems = [(_stiff_blocks(seed), np.random.default_rng(seed + 100).standard_normal(24)) for seed in range(20)]
    monkeypatch.setattr(ls, "SHIFTS", ())
    failed = 0
    for H, b in systems:
        try:
            p = ls.LinearSolver("direct").solve(H, b)
            failed += not (np.isfinite(p).all() and p @ b > 0)
        except RuntimeError:
            failed += 1
    assert failed > 0   # the defect the shifts remove
    monkeypatch.undo()
    for H, b in systems:
        s = ls.LinearSolver("direct")
        p = s.solve(H, b)
        assert s.last_shift in ls.SHIFTS and s.shifted_solves == 1
        assert np.isfinite(p).all() and p @ b > 0
        A = ls._shifted(H, s.last_shift)
        # backward stable for the shifted matrix (its condition is still ~1e12)
        assert np.abs(A @ p - b).max() < 1e-12 * np.abs(A).max() * np.abs(p).max() + 1e-12 * np.abs(b).max()
        assert np.allclose(A.diagonal(), H.diagonal() * (1.0 + s.last_shift), rtol=1e-15)
        s.solve(_spd(n=24), b)   # the next, well-conditioned system is solved as is
        assert s.last_shift == 0.0


class _Quadratic:
    """E(x) = 1/2 (x - x*)^T H (x - x*) over N vertices (free DOFs: all), for projected_newton."""

    local_refinement = False

    def __init__(self, H, x_star):
        self.H = H
        self.x_star = x_star
        self.free_dofs = np.arange(x_star.size)
        self.mass_dofs = np.full(x_star.size, 1e-2)

    def prepare(self, x):
        pass

    def accepted(self, x):
        pass

    def _e(self, x):
        d = (x - self.x_star).ravel()
        return 0.5 * float(d @ (self.H @ d))

    def gradient(self, x):
        return self.H @ (x - self.x_star).ravel()

    def hessian(self, x):
        return self.H

    def max_step(self, x, p):
        return 1.0

    def line_search_energy(self, x0, x1):
        return self._e

    def valid(self, x):
        return True


def test_newton_does_not_stop_on_a_shifted_step():
    """The stop test reads the Newton step of H; a step solved with a diagonal shift is not that step, so Newton
    never reports convergence from it (here: every iteration needs the shift, so the solve runs to its cap),
    while the same problem with a well-conditioned H converges at once."""
    from solver_server.solvers.newton.newton import projected_newton
    x_star = np.random.default_rng(3).standard_normal((8, 3))
    x0 = x_star + 1e-3
    r = projected_newton(_Quadratic(_stiff_blocks(0), x_star), x0, 1 / 24, 1e-2, 6)
    assert not r.converged and r.iterations == 6
    r = projected_newton(_Quadratic(_spd(n=24), x_star), x0, 1 / 24, 1e-2, 6)
    assert r.converged and r.iterations <= 2
