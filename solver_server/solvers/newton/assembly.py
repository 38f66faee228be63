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


def free_block(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, dof_map: np.ndarray,
               n_free: int) -> sp.csr_matrix:
    """CSR of the COO triplets restricted to the free DOFs (duplicates summed)."""
    if len(rows) == 0:
        return sp.csr_matrix((n_free, n_free))
    fr = dof_map[np.asarray(rows, np.int64)]
    fc = dof_map[np.asarray(cols, np.int64)]
    keep = (fr >= 0) & (fc >= 0)
    return sp.csr_matrix((np.asarray(vals)[keep], (fr[keep], fc[keep])), shape=(n_free, n_free))


class RegionPattern:
    """The Newton matrix's block over a set of whole vertices (local numbering 0..nv-1, DOF 3 v + axis) from
    the global COO pattern (rows, cols) of some elements, as 3x3 blocks: the block of a vertex pair is found
    in a dense nv x nv table instead of sorting every entry (Newton's local refinement builds one per region).
    vloc (n_z,): local vertex index of each DOF-array row, -1 outside the region."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray, vloc: np.ndarray, nv: int):
        vr = vloc[rows // 3]
        vc = vloc[cols // 3]
        keep = np.nonzero((vr >= 0) & (vc >= 0))[0]
        pair = vr[keep] * nv + vc[keep]
        diag = np.arange(nv, dtype=np.int64) * (nv + 1)
        # block number of each vertex pair, row-major: sort the (few) keys instead of marking a dense
        # nv x nv table (16 ms at nv = 3,000, rebuilt for every region)
        bidx, inv = np.unique(np.concatenate([pair, diag]), return_inverse=True)
        blk = inv.astype(np.int64).ravel()
        self.nv = nv
        self.nb = int(bidx.size)
        self.keep = keep
        self.slot = blk[:keep.size] * 9 + (rows[keep] % 3) * 3 + cols[keep] % 3
        self.diag_slot = (blk[keep.size:][:, None] * 9 + np.array([0, 4, 8])).ravel()
        self.indices = (bidx % nv).astype(np.int32)
        self.indptr = np.searchsorted(bidx // nv, np.arange(nv + 1)).astype(np.int32)

    def matrix(self, vals: np.ndarray, diag: np.ndarray) -> sp.csr_matrix:
        """CSR (3 nv x 3 nv) with the pattern's values vals (one per original COO entry, N/m) and diag added."""
        data = np.bincount(self.slot, weights=vals[self.keep], minlength=9 * self.nb).astype(np.float64)
        data[self.diag_slot] += diag
        return sp.bsr_matrix((data.reshape(-1, 3, 3), self.indices, self.indptr),
                             shape=(3 * self.nv, 3 * self.nv)).tocsr()
