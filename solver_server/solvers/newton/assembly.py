"""Assembly of the Newton matrix over the free DOFs from COO triplets (rows, cols in global 3N-DOF
numbering, values in N/m).

The elastic terms have a fixed sparsity pattern (their element lists never change), so the map from
each elastic COO entry to its slot in the free-DOF CSR matrix is computed once per set of free DOFs
(``FreePattern``); every Newton iteration then sums the element values into the CSR data with one
``np.bincount`` (C speed, duplicates summed) instead of concatenating and sorting millions of
triplets. Contact and friction triplets change with the active set: they are converted to CSR on
their own (already few, sorted and duplicate-free for the barrier) and added.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit


class FreePattern:
    """CSR pattern over the free DOFs of a fixed COO pattern (rows, cols) plus the diagonal."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray, dof_map: np.ndarray, n_free: int):
        fr = dof_map[rows]
        fc = dof_map[cols]
        keep = np.nonzero((fr >= 0) & (fc >= 0))[0]
        nf = int(n_free)
        key = np.concatenate([fr[keep] * nf + fc[keep], np.arange(nf, dtype=np.int64) * (nf + 1)])
        uniq, inv = np.unique(key, return_inverse=True)
        self.n = nf
        self.keep = keep                              # COO entries that land in the free block
        self.slot = inv[:keep.size].astype(np.int64)  # their CSR data slots
        self.diag_slot = inv[keep.size:].astype(np.int64)
        self.all_kept = keep.size == rows.size         # keep is 0, 1, 2, ... (no fixed vertex in an element)
        self.slot32 = self.slot.astype(np.int32) if uniq.size < 2 ** 31 else None   # matrix_parts' (less memory traffic)
        self.nnz = int(uniq.size)
        r = uniq // nf
        self.indices = (uniq % nf).astype(np.int32)
        self.indptr = np.searchsorted(r, np.arange(nf + 1)).astype(np.int32)

    def matrix(self, vals: np.ndarray, diag: np.ndarray) -> sp.csr_matrix:
        """CSR matrix with the pattern's values vals (one per original COO entry) and diag added."""
        data = np.bincount(self.slot, weights=vals[self.keep], minlength=self.nnz)
        if data.dtype != np.float64:  # no elastic element at all (e.g. only affine bodies): bincount gives int64
            data = data.astype(np.float64)
        data[self.diag_slot] += diag
        return sp.csr_matrix((data, self.indices.copy(), self.indptr.copy()), shape=(self.n, self.n))

    def matrix_parts(self, parts: list, scale: float, diag: np.ndarray) -> sp.csr_matrix:
        """matrix(scale * np.concatenate(parts), diag), the same bytes: each kept entry's scale * value is added
        to its slot in the order of the entries (np.bincount's order), straight from the parts (the element
        groups' value arrays, ElasticTerms.hessian_parts), without the scaled, concatenated and gathered copies
        of the ~4.6 M values of the 64^2 drape."""
        data = np.zeros(self.nnz)
        off = 0
        for v in parts:
            v = np.ascontiguousarray(v, np.float64).reshape(-1)
            if self.all_kept and self.slot32 is not None:
                if v.size:
                    _scatter_scaled_all(data, self.slot32, off, v, float(scale))
            else:
                lo = int(np.searchsorted(self.keep, off))
                hi = int(np.searchsorted(self.keep, off + v.size))
                if hi > lo:
                    _scatter_scaled(data, self.slot, self.keep, lo, hi, v, off, float(scale))
            off += v.size
        data[self.diag_slot] += diag
        return sp.csr_matrix((data, self.indices.copy(), self.indptr.copy()), shape=(self.n, self.n))


@njit(cache=True, fastmath=False)
def _scatter_scaled(data, slot, keep, lo, hi, vals, off, scale):
    """data[slot[i]] += scale * vals[keep[i] - off] for i in lo..hi-1, in that order (np.bincount's)."""
    for i in range(lo, hi):
        data[slot[i]] += scale * vals[keep[i] - off]


@njit(cache=True, fastmath=False)
def _scatter_scaled_all(data, slot, off, vals, scale):
    """data[slot[off + i]] += scale * vals[i] for every i, in order (_scatter_scaled when every entry is kept)."""
    for i in range(vals.shape[0]):
        data[slot[off + i]] += scale * vals[i]


def free_block(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, dof_map: np.ndarray,
               n_free: int) -> sp.csr_matrix:
    """CSR of the COO triplets restricted to the free DOFs (duplicates summed)."""
    if len(rows) == 0:
        return sp.csr_matrix((n_free, n_free))
    fr = dof_map[np.asarray(rows, np.int64)]
    fc = dof_map[np.asarray(cols, np.int64)]
    keep = (fr >= 0) & (fc >= 0)
    return sp.csr_matrix((np.asarray(vals)[keep], (fr[keep], fc[keep])), shape=(n_free, n_free))


@njit(cache=True, fastmath=False)
def _region_blocks(rows, cols, vloc, nv):
    """The 3x3 block pattern over the region's vertices (local numbers vloc[row // 3], -1 outside) of the COO
    entries (rows, cols) plus the diagonal, in O(entries) (counting sort by row vertex, columns merged with a
    stamp array; a region of 3,000 vertices has ~1.4 M entries, which np.unique took ~60 ms to sort).
    Returns (kept entries (increasing), their data slots 9 block + 3 (row % 3) + col % 3, the diagonal's slots
    (3 per vertex), block column indices int32, block row pointers int32), blocks in row-major order."""
    n = rows.shape[0]
    cnt = np.zeros(nv + 1, np.int64)
    nk = 0
    for e in range(n):
        vr = vloc[rows[e] // 3]
        if vr >= 0 and vloc[cols[e] // 3] >= 0:
            cnt[vr + 1] += 1
            nk += 1
    keep = np.empty(nk, np.int64)
    k = 0
    for e in range(n):
        if vloc[rows[e] // 3] >= 0 and vloc[cols[e] // 3] >= 0:
            keep[k] = e
            k += 1
    for v in range(nv):
        cnt[v + 1] += cnt[v]
    order = np.empty(nk, np.int64)        # kept-entry numbers grouped by row vertex
    fill = cnt[:nv].copy()
    for j in range(nk):
        vr = vloc[rows[keep[j]] // 3]
        order[fill[vr]] = j
        fill[vr] += 1
    stamp = np.full(nv, -1, np.int64)
    loc = np.empty(nv, np.int64)
    bcol = np.empty(nk + nv, np.int64)
    indptr = np.zeros(nv + 1, np.int32)
    blk = np.empty(nk, np.int64)
    diag = np.empty(nv, np.int64)
    nb = 0
    for v in range(nv):
        first = nb
        stamp[v] = v
        bcol[nb] = v
        nb += 1
        for t in range(cnt[v], cnt[v + 1]):
            c = vloc[cols[keep[order[t]]] // 3]
            if stamp[c] != v:
                stamp[c] = v
                bcol[nb] = c
                nb += 1
        for i in range(first + 1, nb):      # insertion sort of this row's (few) columns
            key = bcol[i]
            j = i - 1
            while j >= first and bcol[j] > key:
                bcol[j + 1] = bcol[j]
                j -= 1
            bcol[j + 1] = key
        for i in range(first, nb):
            loc[bcol[i]] = i
        for t in range(cnt[v], cnt[v + 1]):
            j = order[t]
            blk[j] = loc[vloc[cols[keep[j]] // 3]]
        diag[v] = loc[v]
        indptr[v + 1] = nb
    slot = np.empty(nk, np.int64)
    for j in range(nk):
        e = keep[j]
        slot[j] = 9 * blk[j] + 3 * (rows[e] % 3) + cols[e] % 3
    dslot = np.empty(3 * nv, np.int64)
    for v in range(nv):
        for a in range(3):
            dslot[3 * v + a] = 9 * diag[v] + 4 * a
    return keep, slot, dslot, bcol[:nb].astype(np.int32), indptr


class RegionPattern:
    """The Newton matrix's block over a set of whole vertices (local numbering 0..nv-1, DOF 3 v + axis) from
    the global COO pattern (rows, cols) of some elements, as 3x3 blocks: the block of a vertex pair is found
    in a dense nv x nv table instead of sorting every entry (Newton's local refinement builds one per region).
    vloc (n_z,): local vertex index of each DOF-array row, -1 outside the region."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray, vloc: np.ndarray, nv: int):
        self.nv = nv
        (self.keep, self.slot, self.diag_slot, self.indices,
         self.indptr) = _region_blocks(np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(cols, np.int64),
                                       np.ascontiguousarray(vloc, np.int64), int(nv))
        self.nb = int(self.indptr[-1])

    def matrix(self, vals: np.ndarray, diag: np.ndarray) -> sp.csr_matrix:
        """CSR (3 nv x 3 nv) with the pattern's values vals (one per original COO entry, N/m) and diag added."""
        data = np.bincount(self.slot, weights=vals[self.keep], minlength=9 * self.nb).astype(np.float64)
        data[self.diag_slot] += diag
        return sp.bsr_matrix((data.reshape(-1, 3, 3), self.indices, self.indptr),
                             shape=(3 * self.nv, 3 * self.nv)).tocsr()

    @classmethod
    def from_elements(cls, groups: list, vloc: np.ndarray, nv: int) -> "RegionPattern":
        """The pattern of the elements ``groups`` ((E, k) vertex arrays, nonempty, in ElasticTerms.patterns' order)
        from their vertex pairs alone (k^2 per element, a ninth of the COO entries): the same blocks in the same
        order as RegionPattern(*patterns, vloc, nv). Its ``matrix_parts`` sums the element groups' values."""
        self = cls.__new__(cls)
        self.nv = nv
        pr, pc = [], []
        for el in groups:
            r, c = _vertex_pairs(np.ascontiguousarray(el, np.int64))
            pr.append(r)
            pc.append(c)
        rows = np.concatenate(pr) if pr else np.zeros(0, np.int64)
        cols = np.concatenate(pc) if pc else np.zeros(0, np.int64)
        keep, slot, self.diag_slot, self.indices, self.indptr = _region_blocks(
            rows, cols, np.ascontiguousarray(vloc, np.int64), int(nv))
        self.nb = int(self.indptr[-1])
        self.pair_block = np.full(rows.size, -1, np.int64)   # block of each element vertex pair, -1 outside
        self.pair_block[keep] = slot // 9
        self.group_k = [int(el.shape[1]) for el in groups]
        self.keep = self.slot = None
        return self

    def matrix_parts(self, parts: list, scale: float, diag: np.ndarray) -> sp.csr_matrix:
        """matrix(scale * np.concatenate(parts), diag) of the pattern RegionPattern(*patterns, vloc, nv) for a
        from_elements pattern, the same bytes: each element's 3k x 3k values (row-major) are added block by block,
        an entry's scale * value to its slot in the order of the COO entries (np.bincount's)."""
        data = np.zeros(9 * self.nb)
        off = 0
        for k, v in zip(self.group_k, parts):
            v = np.ascontiguousarray(v, np.float64).reshape(-1)
            ne = v.size // (9 * k * k)
            assert ne * 9 * k * k == v.size
            _scatter_blocks(data, self.pair_block, off, k, v, float(scale))
            off += ne * k * k
        data[self.diag_slot] += diag
        return sp.bsr_matrix((data.reshape(-1, 3, 3), self.indices, self.indptr),
                             shape=(3 * self.nv, 3 * self.nv)).tocsr()


@njit(cache=True, fastmath=False)
def _vertex_pairs(elems):
    """(rows, cols) 3 x the vertex of each (a, b) vertex pair of every element (E, k), element by element, a then b:
    the DOF pattern of hessian_pattern restricted to the x-x entries (rows 3 v_a, cols 3 v_b)."""
    E, k = elems.shape
    rows = np.empty(E * k * k, np.int64)
    cols = np.empty(E * k * k, np.int64)
    q = 0
    for e in range(E):
        for a in range(k):
            for b in range(k):
                rows[q] = 3 * elems[e, a]
                cols[q] = 3 * elems[e, b]
                q += 1
    return rows, cols


@njit(cache=True, fastmath=False)
def _scatter_blocks(data, pair_block, off, k, vals, scale):
    """data[9 blk + 3 i + j] += scale * H_e[3 a + i, 3 b + j] for the blocks blk = pair_block[off + (e k + a) k + b]
    (>= 0) of every element e's (3k x 3k, row-major in vals) Hessian, element by element, a, b, i, j in order: for
    every slot the COO entries' order (element, then row, then column)."""
    m = 3 * k
    ne = vals.shape[0] // (m * m)
    for e in range(ne):
        base = e * m * m
        for a in range(k):
            for b in range(k):
                blk = pair_block[off + (e * k + a) * k + b]
                if blk < 0:
                    continue
                for i in range(3):
                    for j in range(3):
                        data[9 * blk + 3 * i + j] += scale * vals[base + (3 * a + i) * m + 3 * b + j]
