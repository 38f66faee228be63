"""Summing per-pair 3x3 Hessian blocks into unique COO triplets in canonical (row-major) order.

A contact pair touches 2-4 vertices, so its Hessian is 4-16 vertex blocks of 3x3. Tens of
thousands of pairs share vertices: emitting every block entry (144 per pair) leaves scipy to sum
millions of duplicate triplets, which costs more than computing them. Here blocks are bucketed by
row vertex (counting sort), merged by column vertex (stamp array) and emitted row by row with
sorted columns, i.e. without duplicates and in CSR order, so scipy.sparse's coo -> csr
conversion is a single linear pass. O(blocks + vertices) work, no hashing.
"""
import numpy as np
from numba import njit


@njit(cache=True, fastmath=False)
def sum_blocks(bi, bj, bval, n):
    """Blocks (bi[b], bj[b]) with values bval (B, 3, 3) over n vertices -> unique triplets
    (rows int32, cols int32, vals float64) in 3n-DOF numbering, sorted by row then column."""
    nb = bi.shape[0]
    rowstart = np.zeros(n + 1, dtype=np.int64)
    for b in range(nb):
        rowstart[bi[b] + 1] += 1
    for v in range(n):
        rowstart[v + 1] += rowstart[v]
    order = np.empty(nb, dtype=np.int64)
    fill = rowstart[:n].copy()
    for b in range(nb):
        v = bi[b]
        order[fill[v]] = b
        fill[v] += 1
    stamp = np.full(n, -1, dtype=np.int64)
    loc = np.empty(n, dtype=np.int64)
    ucols = np.empty(nb, dtype=np.int64)
    ustart = np.zeros(n + 1, dtype=np.int64)
    uidx = np.empty(nb, dtype=np.int64)
    total = 0
    for v in range(n):
        first = total
        for t in range(rowstart[v], rowstart[v + 1]):
            u = bj[order[t]]
            if stamp[u] != v:
                stamp[u] = v
                ucols[total] = u
                total += 1
        # insertion sort of this row's (few) unique columns
        for i in range(first + 1, total):
            key = ucols[i]
            j = i - 1
            while j >= first and ucols[j] > key:
                ucols[j + 1] = ucols[j]
                j -= 1
            ucols[j + 1] = key
        for i in range(first, total):
            loc[ucols[i]] = i
        for t in range(rowstart[v], rowstart[v + 1]):
            b = order[t]
            uidx[b] = loc[bj[b]]
        ustart[v + 1] = total
    uval = np.zeros((total, 3, 3))
    for b in range(nb):
        i = uidx[b]
        for a in range(3):
            for c in range(3):
                uval[i, a, c] += bval[b, a, c]
    rows = np.empty(9 * total, dtype=np.int32)
    cols = np.empty(9 * total, dtype=np.int32)
    vals = np.empty(9 * total)
    pos = 0
    for v in range(n):
        for a in range(3):
            for i in range(ustart[v], ustart[v + 1]):
                u = ucols[i]
                for c in range(3):
                    rows[pos] = 3 * v + a
                    cols[pos] = 3 * u + c
                    vals[pos] = uval[i, a, c]
                    pos += 1
    return rows, cols, vals
