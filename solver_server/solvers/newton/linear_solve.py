"""Linear solves of the Newton system H p = -g (H sparse SPD over the free DOFs, N/m; p in metres).

``"direct"`` (the default) is a sparse Cholesky factorisation:

* **CHOLMOD** (SuiteSparse, through the optional ``scikit-sparse`` package; scripts/setup.sh installs it
  with Debian's libsuitesparse-dev): supernodal, AMD ordering. The symbolic analysis (ordering,
  elimination tree, supernodes) depends only on the sparsity pattern, so it is kept and reused while the
  pattern of H is unchanged (same elastic elements, same contact / friction pairs); only the numeric
  factorisation runs then. On the 64^2 drape's 12,675-DOF systems: analysis 13-23 ms, numeric
  factorisation + solve 120-160 ms, against 280-380 ms for SuperLU (docs/solver.md, "Linear solver").
* **SuperLU** (scipy) when scikit-sparse is not importable, when CHOLMOD would run on the reference
  (netlib) BLAS (slower than SuperLU then), when ``CLEARANCE_LINEAR_SOLVER=superlu`` is set, or when
  CHOLMOD reports H not positive definite (one line on stderr says which): ``splu`` with
  ``SymmetricMode``, the MMD_AT_PLUS_A ordering and diagonal pivots (H is SPD, no row interchanges).
  ``spsolve`` (partial pivoting, which destroys the symmetric ordering's fill bound) took 49 s on the
  64^2 drape's 12,675-DOF system where this takes 0.2-0.4 s.

A matrix that is positive definite mathematically (H = M + PSD terms) can still fail the factorisation in
floating point: a contact pair squeezed to ~1e-10 m puts a barrier curvature of ~1e17 N/m into a body's block
beside a 0.01 kg mass (a 200-prop bin at a tenth of the default barrier stiffness: eigenvalues of -43 against
1.7e17 in one 12 x 12 block, round-off), and SuperLU without pivoting then returns a meaningless step or stops
with "Factor is exactly singular" (the bake died there). So a failed Cholesky is first retried on
H + delta diag(H) for delta in SHIFTS (the same pattern, the same analysis): a shift far above the round-off of
the large rows and negligible on the small ones, which gives an SPD matrix and so a descent direction. Such a
solve is not the Newton step of H: ``last_shift`` says so, and Newton does not test convergence on it
(newton.py). SuperLU runs only when every shift fails (H indefinite beyond round-off), and a singular SuperLU
factor is retried with the same shifts.

``"cg"`` (3x3 block-Jacobi PCG, warm started from the previous direction) is kept for comparison in
benchmarks/ipc.py; it needs ~700 iterations on the drape and is no faster.
"""
from __future__ import annotations

import ctypes
import os
import sys

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

METHODS = ("direct", "cg")

_fallback_logged = False


def _log_fallback(reason: str) -> None:
    """One line on stderr, once per process, when the Cholesky path is not used."""
    global _fallback_logged
    if not _fallback_logged:
        _fallback_logged = True
        print(f"clearance: linear solver falls back to SuperLU ({reason})", file=sys.stderr, flush=True)


def _reference_blas_loaded() -> bool:
    """True if the process maps Debian's reference (netlib) libblas, which CHOLMOD then uses: its
    supernodal factorisation is then slower than SuperLU (0.33-0.60 s vs 0.28-0.38 s on the 64^2
    drape's system, against 0.12-0.20 s with OpenBLAS). Linux only; False where /proc is absent."""
    try:
        with open("/proc/self/maps") as fh:
            return any("/blas/libblas.so" in line for line in fh)
    except OSError:
        return False


_NO_CHOLMOD_REASON = ""
_forced = os.environ.get("CLEARANCE_LINEAR_SOLVER", "").strip().lower()  # "superlu" forces SuperLU
try:  # optional: SuiteSparse CHOLMOD (pip scikit-sparse, needs libsuitesparse-dev to build)
    from sksparse.cholmod import CholmodError as _CholmodError
    from sksparse.cholmod import analyze as _cholmod_analyze
    HAVE_CHOLMOD = True
    if _forced == "superlu":
        HAVE_CHOLMOD, _NO_CHOLMOD_REASON = False, "CLEARANCE_LINEAR_SOLVER=superlu"
    elif _forced != "cholmod" and _reference_blas_loaded():
        HAVE_CHOLMOD, _NO_CHOLMOD_REASON = False, ("CHOLMOD is linked to the reference BLAS, slower than SuperLU; "
                                                   "apt-get install libopenblas0-serial")
except ImportError:  # pragma: no cover - depends on the machine
    HAVE_CHOLMOD = False
    _NO_CHOLMOD_REASON = "scikit-sparse is not installed; scripts/setup.sh installs it"
    _CholmodError = Exception
    _cholmod_analyze = None


_OPENMP_RUNTIMES = ("libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so")


def _loaded_openmp():
    """The OpenMP runtimes already mapped into this process (CHOLMOD's, e.g. Debian's libcholmod links libgomp),
    as ctypes libraries; none is loaded here (RTLD_NOLOAD). Empty where there is none or no dlopen flag."""
    libs = []
    flag = getattr(os, "RTLD_NOLOAD", None)
    if flag is None:
        return libs
    for name in _OPENMP_RUNTIMES:
        try:
            lib = ctypes.CDLL(name, mode=flag | getattr(os, "RTLD_LAZY", 1))
            for f in ("omp_get_dynamic", "omp_set_dynamic", "omp_get_max_threads", "omp_set_num_threads"):
                getattr(lib, f)
        except (OSError, AttributeError):
            continue
        libs.append(lib)
    return libs


class _SerialOpenMP:
    """CHOLMOD's OpenMP loops on the calling thread while in this context.

    Debian's CHOLMOD (SuiteSparse 5) runs its supernodal factorisation's copy loops (zeroing a supernode, copying
    A's columns into it, scattering an update into its parent) as ``#pragma omp parallel for
    num_threads(CHOLMOD_OMP_NUM_THREADS = 4) if (> 1024 entries)`` regions, one set per large supernode: on a
    2-core machine four threads, thousands of parallel regions per factorisation, their wake-ups and spin waits.
    With dynamic threads on and at most one thread requested, the runtime gives every such region one thread
    (libgomp bounds a num_threads clause by its dynamic maximum, itself at most the max-threads setting). Each
    loop writes distinct entries, so the factor is the same bytes on any number of threads; only the overhead
    goes: the 64^2 drape's 12,675-DOF system, analysis + factorisation + solve, 100 -> 46 ms CPU (sys 27 -> 3 ms).
    Both settings are the calling thread's own and are put back on exit (numba's kernels pass their own
    thread count to the same runtime)."""

    def __init__(self):
        self.libs = _loaded_openmp() if HAVE_CHOLMOD else []
        self._saved = []

    def __enter__(self):
        self._saved = [(lib, lib.omp_get_dynamic(), lib.omp_get_max_threads()) for lib in self.libs]
        for lib in self.libs:
            lib.omp_set_dynamic(1)
            lib.omp_set_num_threads(1)
        return self

    def __exit__(self, *exc):
        for lib, dyn, nth in self._saved:
            lib.omp_set_num_threads(nth)
            lib.omp_set_dynamic(dyn)
        self._saved = []
        return False


SERIAL_OPENMP = True
"""CHOLMOD's OpenMP copy loops on the calling thread (_SerialOpenMP); False: the runtime's default team of 4."""


def direct_backend() -> str:
    """Name of the factorisation "direct" uses on this machine: "cholmod" or "superlu"."""
    return "cholmod" if HAVE_CHOLMOD else "superlu"


def _block_jacobi_inverse(H: sp.csr_matrix) -> np.ndarray:
    """Inverses (n, 3, 3) of the 3x3 diagonal blocks of H (one block per vertex)."""
    C = H.tocoo()
    m = (C.row // 3) == (C.col // 3)
    B = np.zeros((H.shape[0] // 3, 3, 3))
    np.add.at(B, (C.row[m] // 3, C.row[m] % 3, C.col[m] % 3), C.data[m])
    return np.linalg.inv(B)


def _as_csc(H: sp.spmatrix) -> sp.csc_matrix:
    """H (symmetric) as CSC without a conversion pass: a symmetric CSR matrix read column-wise is its
    own transpose, i.e. the same matrix."""
    if sp.isspmatrix_csr(H) or isinstance(H, sp.csr_array):
        if not H.has_sorted_indices:
            H = H.sorted_indices()
        return sp.csc_matrix((H.data, H.indices, H.indptr), shape=H.shape)
    A = sp.csc_matrix(H)
    A.sort_indices()
    return A


class CholeskySolver:
    """Supernodal CHOLMOD with the symbolic analysis reused while the sparsity pattern is unchanged.

    ``analyses`` and ``factorisations`` count the symbolic and numeric phases (for benchmarks)."""

    def __init__(self, ordering: str = "amd"):
        self.ordering = ordering
        self._factor = None
        self._indptr = None
        self._indices = None
        self.analyses = 0
        self.factorisations = 0
        self._omp = _SerialOpenMP() if SERIAL_OPENMP else None

    def _same_pattern(self, A: sp.csc_matrix) -> bool:
        return (self._factor is not None and self._indptr.shape == A.indptr.shape
                and self._indices.shape == A.indices.shape
                and np.array_equal(self._indptr, A.indptr) and np.array_equal(self._indices, A.indices))

    def solve(self, H: sp.spmatrix, rhs: np.ndarray) -> np.ndarray:
        """p with H p = rhs (H SPD). Raises CholmodError if H is not positive definite."""
        A = _as_csc(H)
        if self._omp is None or not self._omp.libs:
            return self._solve(A, rhs)
        with self._omp:
            return self._solve(A, rhs)

    def _solve(self, A: sp.csc_matrix, rhs: np.ndarray) -> np.ndarray:
        if not self._same_pattern(A):
            self._factor = _cholmod_analyze(A, mode="supernodal", ordering_method=self.ordering)
            self._indptr = A.indptr.copy()
            self._indices = A.indices.copy()
            self.analyses += 1
        self._factor.cholesky_inplace(A)
        self.factorisations += 1
        return self._factor(rhs)


SHIFTS = (1e-12, 1e-10, 1e-8, 1e-6)
"""Relative diagonal shifts delta (H + delta diag(H)) tried, in order, when H fails its factorisation (module doc)."""

_shift_logged = False


def _log_shift(delta: float, reason: str) -> None:
    """One line on stderr, once per process, the first time a shifted solve is used."""
    global _shift_logged
    if not _shift_logged:
        _shift_logged = True
        print(f"clearance: a Newton matrix failed its factorisation ({reason}); solved with a diagonal shift of "
              f"{delta:g} x diag(H), that iteration is not tested for convergence", file=sys.stderr, flush=True)


def _shifted(H: sp.spmatrix, delta: float) -> sp.csr_matrix:
    """H + delta diag(H) with H's own sparsity pattern (the diagonal is stored: H = M + ...)."""
    A = sp.csr_matrix(H, copy=True)
    A.sort_indices()
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    on_diag = rows == A.indices
    A.data[on_diag] *= 1.0 + delta
    return A


class LinearSolver:
    """Solves H p = rhs for SPD H. Keeps the CHOLMOD symbolic analysis (direct) or the previous
    solution as the CG warm start (cg) across calls. ``last_shift``: the relative diagonal shift of the last
    solve (0: the system itself; module doc); ``shifted_solves`` counts the shifted ones."""

    def __init__(self, method: str = "direct", rtol: float = 1e-6):
        if method not in METHODS:
            raise ValueError(f"linear solver must be one of {METHODS}, got {method!r}")
        self.method = method
        self.rtol = float(rtol)
        self._prev = None
        self.cg_iterations = 0
        self.last_shift = 0.0
        self.shifted_solves = 0
        self.cholesky = CholeskySolver() if HAVE_CHOLMOD else None
        if not HAVE_CHOLMOD and method == "direct":
            _log_fallback(_NO_CHOLMOD_REASON)

    def solve(self, H: sp.csr_matrix, rhs: np.ndarray) -> np.ndarray:
        self.last_shift = 0.0
        if self.method == "cg" and H.shape[0] % 3 == 0:
            p = self._cg(H, rhs)
            if p is not None:
                return p
        if self.cholesky is not None:
            try:
                return self.cholesky.solve(H, rhs)
            except _CholmodError as exc:  # numerically not positive definite (H = M + PSD terms: round-off)
                for delta in SHIFTS:
                    try:
                        p = self.cholesky.solve(_shifted(H, delta), rhs)
                    except _CholmodError:
                        continue
                    return self._took_shift(delta, f"CHOLMOD: {exc}", p)
                _log_fallback(f"CHOLMOD: {exc}")
                self.cholesky._factor = None
        try:
            return solve_superlu(H, rhs)
        except RuntimeError as exc:   # "Factor is exactly singular"
            for delta in SHIFTS:
                try:
                    p = solve_superlu(_shifted(H, delta), rhs)
                except RuntimeError:
                    continue
                return self._took_shift(delta, f"SuperLU: {exc}", p)
            raise

    def _took_shift(self, delta: float, reason: str, p: np.ndarray) -> np.ndarray:
        self.last_shift = delta
        self.shifted_solves += 1
        _log_shift(delta, reason)
        return p

    def _cg(self, H, rhs):
        Binv = _block_jacobi_inverse(H)
        M = spla.LinearOperator(H.shape, matvec=lambda v: np.einsum("nij,nj->ni", Binv, v.reshape(-1, 3)).ravel())
        x0 = self._prev if (self._prev is not None and self._prev.shape == rhs.shape) else None
        count = [0]
        p, info = spla.cg(H, rhs, x0=x0, M=M, rtol=self.rtol, maxiter=5000,
                          callback=lambda _x: count.__setitem__(0, count[0] + 1))
        self.cg_iterations += count[0]
        if info != 0:
            return None
        self._prev = p
        return p


def solve_superlu(H: sp.spmatrix, rhs: np.ndarray) -> np.ndarray:
    """Sparse LU (SuperLU) in symmetric mode, MMD on A^T + A, diagonal pivots; H must be SPD."""
    lu = spla.splu(sp.csc_matrix(H), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                   options=dict(SymmetricMode=True))
    return lu.solve(rhs)


def solve_direct(H: sp.spmatrix, rhs: np.ndarray) -> np.ndarray:
    """One-off solve of H p = rhs (H SPD): CHOLMOD when installed, else SuperLU (no reuse across calls)."""
    return LinearSolver("direct").solve(H, rhs)
