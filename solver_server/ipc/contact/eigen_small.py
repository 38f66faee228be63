"""Allocation-free symmetric eigen-decomposition of small matrices (n <= 12) for per-pair kernels.

The PSD projection of a contact pair's Hessian (book: "3D Frictional Self-Contact", Hessian
projection) needs the eigen-system of a 3x3 to 9x9 symmetric matrix per pair, tens of thousands
of times per Newton iteration. np.linalg.eigh allocates and copies on every call (about 8 us per
9x9 call here), so this module implements the cyclic Jacobi method in place on caller-owned
scratch arrays. Jacobi is backward stable and gives eigenvalues to high relative accuracy, and
for n <= 5 (the usual reduced pair Hessian) it converges in a handful of sweeps.
"""
import math

from numba import njit

MAX_SWEEPS = 60


@njit(cache=True, fastmath=False)
def jacobi_eigh(A, n, V):
    """Diagonalise the leading n x n block of symmetric A in place: on return A[i, i] are the
    eigenvalues and the columns of V[:n, :n] the orthonormal eigenvectors (A_in = V diag V^T).
    The strictly off-diagonal part of A is destroyed. Returns the number of sweeps used."""
    for i in range(n):
        for j in range(n):
            V[i, j] = 1.0 if i == j else 0.0
    for sweep in range(MAX_SWEEPS):
        off = 0.0
        total = 0.0
        for i in range(n):
            total += A[i, i] * A[i, i]
            for j in range(i + 1, n):
                off += A[i, j] * A[i, j]
        total += 2.0 * off
        # stop when the off-diagonal mass is at rounding level of the whole matrix
        if off <= 1.0e-34 * total:
            return sweep
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                app = A[p, p]
                aqq = A[q, q]
                theta = (aqq - app) / (2.0 * apq)
                if abs(theta) > 1.0e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                s = t * c
                tau = s / (1.0 + c)
                A[p, p] = app - t * apq
                A[q, q] = aqq + t * apq
                A[p, q] = 0.0
                A[q, p] = 0.0
                for r in range(n):
                    if r != p and r != q:
                        arp = A[r, p]
                        arq = A[r, q]
                        nrp = arp - s * (arq + tau * arp)
                        nrq = arq + s * (arp - tau * arq)
                        A[r, p] = nrp
                        A[p, r] = nrp
                        A[r, q] = nrq
                        A[q, r] = nrq
                for r in range(n):
                    vrp = V[r, p]
                    vrq = V[r, q]
                    V[r, p] = vrp - s * (vrq + tau * vrp)
                    V[r, q] = vrq + s * (vrp - tau * vrq)
    return MAX_SWEEPS
