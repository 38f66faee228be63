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


@njit(cache=True, fastmath=False)
def tridiagonal_ql_eigh(A, n, V, d, e):
    """Same contract as jacobi_eigh (eigenvalues on the diagonal of A, eigenvectors in the columns
    of V), by Householder reduction to tridiagonal form followed by the implicit QL method with
    Wilkinson-type shifts: about 5x fewer flops than Jacobi at n = 9. d, e: scratch (>= n,).
    Returns the total number of QL iterations."""
    for i in range(n):
        for j in range(n):
            V[i, j] = 1.0 if i == j else 0.0
    # Householder: A <- P A P column by column, V <- V P
    for k in range(n - 2):
        tail = 0.0
        for i in range(k + 2, n):
            tail += A[i, k] * A[i, k]
        if tail == 0.0:
            continue
        x0 = A[k + 1, k]
        alpha = -math.copysign(math.sqrt(tail + x0 * x0), x0)
        # v stored in d[k+1:n]
        for i in range(k + 1, n):
            d[i] = A[i, k]
        d[k + 1] -= alpha
        vv = 0.0
        for i in range(k + 1, n):
            vv += d[i] * d[i]
        beta = 2.0 / vv
        # p = beta A v (in e), K = beta/2 v.p, w = p - K v
        vp = 0.0
        for i in range(k + 1, n):
            s = 0.0
            for j in range(k + 1, n):
                s += A[i, j] * d[j]
            e[i] = beta * s
            vp += d[i] * e[i]
        K = 0.5 * beta * vp
        for i in range(k + 1, n):
            e[i] -= K * d[i]
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                A[i, j] -= d[i] * e[j] + e[i] * d[j]
        A[k + 1, k] = alpha
        A[k, k + 1] = alpha
        for i in range(k + 2, n):
            A[i, k] = 0.0
            A[k, i] = 0.0
        for r in range(n):
            s = 0.0
            for j in range(k + 1, n):
                s += V[r, j] * d[j]
            s *= beta
            for j in range(k + 1, n):
                V[r, j] -= s * d[j]
    for i in range(n):
        d[i] = A[i, i]
        e[i] = A[i + 1, i] if i < n - 1 else 0.0
    # implicit QL on the tridiagonal (d, e), e[i] couples i and i + 1
    total = 0
    for l in range(n):
        it = 0
        while True:
            m = l
            while m < n - 1:
                dd = abs(d[m]) + abs(d[m + 1])
                if abs(e[m]) + dd == dd:
                    break
                m += 1
            if m == l or it >= 60:
                break
            it += 1
            total += 1
            g = (d[l + 1] - d[l]) / (2.0 * e[l])
            r = math.hypot(g, 1.0)
            g = d[m] - d[l] + e[l] / (g + math.copysign(r, g))
            s = 1.0
            c = 1.0
            p = 0.0
            i = m - 1
            deflated = False
            while i >= l:
                f = s * e[i]
                b = c * e[i]
                r = math.hypot(f, g)
                e[i + 1] = r
                if r == 0.0:
                    d[i + 1] -= p
                    e[m] = 0.0
                    deflated = True
                    break
                s = f / r
                c = g / r
                g = d[i + 1] - p
                r = (d[i] - g) * s + 2.0 * c * b
                p = s * r
                d[i + 1] = g + p
                g = c * r - b
                for k in range(n):
                    f = V[k, i + 1]
                    V[k, i + 1] = s * V[k, i] + c * f
                    V[k, i] = c * V[k, i] - s * f
                i -= 1
            if deflated:
                continue
            d[l] -= p
            e[l] = g
            e[m] = 0.0
    for i in range(n):
        for j in range(n):
            A[i, j] = d[i] if i == j else 0.0
    return total
