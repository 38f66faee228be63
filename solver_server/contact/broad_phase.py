"""Broad phase: candidate point-triangle and edge-edge pairs from a spatial hash (numba).

Book: "3D Frictional Self-Contact", spatial hashing. Every primitive gets an axis-aligned box
(inflated by its contact offset + dhat/2, metres); target primitives (faces, or edges) are
hashed into a uniform grid, query primitives (vertices, or edges) visit the cells their box
covers. A pair is reported only from the cell that holds the lower corner of the overlap of
the two boxes, so every overlapping pair is found exactly once without a deduplication pass (a
target whose own cells share a bucket sits in it more than once, in a row: the scan skips the repeat).
Primitives whose box spans more than MAX_CELLS cells (large collider triangles) are kept in a
separate list tested against every query, so huge ground planes do not blow up the table.
For continuous collision detection the boxes enclose the start and end positions (swept boxes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from .mesh import CollisionMesh
from solver_server.threads import threads_for

MAX_CELLS = 64
CELL_FACTOR = 2.0  # cell size / the larger mean box extent: a box then covers 1-2 cells per axis. On the
                   # 64^2 drape's Verlet list (boxes 2.5 edges wide) edge-edge queries took 29 ms at 2.0,
                   # 40 ms at 1.0, 35 ms at 3.0; at a 1 mm query distance 8.0 ms at 2.0, 9.9 ms at 1.0


@dataclass
class Candidates:
    """Candidate pairs: pt (k, 2) int32 rows (vertex, face); ee (m, 2) int32 rows (edge a, edge b), a < b."""
    pt: np.ndarray
    ee: np.ndarray

    def __len__(self) -> int:
        return int(self.pt.shape[0] + self.ee.shape[0])


@njit(cache=True, fastmath=False, parallel=True)
def element_boxes(x0, x1, elems, pad):
    """Boxes (m, 3) lo/hi of elements (m, k) over positions x0 and x1, inflated by pad (m,)."""
    m = elems.shape[0]
    k = elems.shape[1]
    lo = np.empty((m, 3))
    hi = np.empty((m, 3))
    for i in prange(m):
        for a in range(3):
            l = np.inf
            h = -np.inf
            for j in range(k):
                v = elems[i, j]
                l = min(l, x0[v, a], x1[v, a])
                h = max(h, x0[v, a], x1[v, a])
            lo[i, a] = l - pad[i]
            hi[i, a] = h + pad[i]
    return lo, hi


@njit(cache=True, fastmath=False, inline="always")
def _hash(ix, iy, iz, size):
    """Bucket of cell (ix, iy, iz) in a table of size buckets, a power of two (_table_size): a mask, not a division.
    Which cells share a bucket never changes the pairs found nor their order: a query reports a target only from
    the cell holding the lower corner of their overlap, scanning the cells in order and a bucket's entries in target
    order (a target's entries in one bucket are adjacent, and the repeat is skipped)."""
    h = (ix * 73856093) ^ (iy * 19349663) ^ (iz * 83492791)
    return h & (size - 1)


@njit(cache=True, fastmath=False)
def _table_size(nt):
    """Hash table size for nt targets: the least power of two >= max(1024, 2 nt)."""
    s = 1024
    while s < 2 * nt:
        s *= 2
    return s


@njit(cache=True, fastmath=False)
def _cell_range(lo, hi, origin, inv_cell):
    return (np.int64(np.floor((lo[0] - origin[0]) * inv_cell)), np.int64(np.floor((lo[1] - origin[1]) * inv_cell)),
            np.int64(np.floor((lo[2] - origin[2]) * inv_cell)), np.int64(np.floor((hi[0] - origin[0]) * inv_cell)),
            np.int64(np.floor((hi[1] - origin[1]) * inv_cell)), np.int64(np.floor((hi[2] - origin[2]) * inv_cell)))


@njit(cache=True, fastmath=False)
def _build_table(lo, hi, origin, inv_cell, size):
    """Counting-sort of target items into hash buckets. Returns (start (size+1,), items, their boxes
    (lo, hi) copied in bucket order (a query scans them sequentially), big items)."""
    m = lo.shape[0]
    counts = np.zeros(size + 1, dtype=np.int64)
    is_big = np.zeros(m, dtype=np.bool_)
    for i in range(m):
        x0, y0, z0, x1, y1, z1 = _cell_range(lo[i], hi[i], origin, inv_cell)
        ncell = (x1 - x0 + 1) * (y1 - y0 + 1) * (z1 - z0 + 1)
        if ncell > MAX_CELLS:
            is_big[i] = True
            continue
        for ix in range(x0, x1 + 1):
            for iy in range(y0, y1 + 1):
                for iz in range(z0, z1 + 1):
                    counts[_hash(ix, iy, iz, size) + 1] += 1
    for b in range(size):
        counts[b + 1] += counts[b]
    items = np.empty(counts[size], dtype=np.int32)
    boxes = np.empty((counts[size], 6))
    fill = counts[:size].copy()
    for i in range(m):
        if is_big[i]:
            continue
        x0, y0, z0, x1, y1, z1 = _cell_range(lo[i], hi[i], origin, inv_cell)
        for ix in range(x0, x1 + 1):
            for iy in range(y0, y1 + 1):
                for iz in range(z0, z1 + 1):
                    h = _hash(ix, iy, iz, size)
                    items[fill[h]] = i
                    for a in range(3):
                        boxes[fill[h], a] = lo[i, a]
                        boxes[fill[h], 3 + a] = hi[i, a]
                    fill[h] += 1
    big = np.nonzero(is_big)[0].astype(np.int32)
    return counts, items, boxes, big


@njit(cache=True, fastmath=False, inline="always")
def _overlap(qlo, qhi, tlo, thi, q, t):
    return (qlo[q, 0] <= thi[t, 0] and tlo[t, 0] <= qhi[q, 0] and qlo[q, 1] <= thi[t, 1] and tlo[t, 1] <= qhi[q, 1]
            and qlo[q, 2] <= thi[t, 2] and tlo[t, 2] <= qhi[q, 2])


@njit(cache=True, fastmath=False, inline="always")
def _accept(mode, q, t, faces, edges, vbody, self_contact, static):
    """Topological and body filters. mode 0: (vertex q, face t); mode 1: (edge q, edge t), q < t;
    mode 2: (edge q, face t) for intersection checks (topology only, no body filter)."""
    if mode == 0:
        f0, f1, f2 = faces[t, 0], faces[t, 1], faces[t, 2]
        if q == f0 or q == f1 or q == f2:
            return False
        bq = vbody[q]
        bt = vbody[f0]
    elif mode == 2:
        a0, a1 = edges[q, 0], edges[q, 1]
        for j in range(3):
            if faces[t, j] == a0 or faces[t, j] == a1:
                return False
        return True
    else:
        if q >= t:
            return False
        a0, a1, b0, b1 = edges[q, 0], edges[q, 1], edges[t, 0], edges[t, 1]
        if a0 == b0 or a0 == b1 or a1 == b0 or a1 == b1:
            return False
        bq = vbody[a0]
        bt = vbody[b0]
    if bq == bt and self_contact[bq] == 0:
        return False
    if static[bq] != 0 and static[bt] != 0:
        return False
    return True


@njit(cache=True, fastmath=False, _nrt=False)
def _query_targets(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces, edges,
                   vbody, self_contact, static, buf, qidx, tidx):
    """Accepted targets of query q written to buf while it has room. Returns their number; the
    caller grows buf and asks again when it exceeds buf.shape[0] (buf of size 0: count only).
    A pair is reported only from the cell holding the lower corner of the two boxes' overlap.
    q and the hashed targets index the box arrays; qidx / tidx (int64) map them to the element ids
    (vertex, face or edge) that the filters read and buf receives (identity when nothing is culled;
    both increasing, so the edge-edge order q < t is the elements' order)."""
    return _scan_targets(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces, edges,
                         vbody, self_contact, static, buf, qidx, tidx, items[:0], -1)


@njit(cache=True, fastmath=False, inline="always")
def _first_above(items, lo, hi, q):
    """First index s in [lo, hi) with items[s] > q (items increasing there), hi if none."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if items[mid] <= q:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, fastmath=False, _nrt=False)
def _scan_targets(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces, edges,
                  vbody, self_contact, static, buf, qidx, tidx, ebody, skip_body):
    """_query_targets, where the hashed entries' bodies ebody (one per entry of items; empty: not known) let
    the scan pass over the entries of body skip_body (the query's own, when it has no self contact; -1: none)
    before their box test: _accept rejects them anyway. Same targets in the same order."""
    n = 0
    oq = qidx[q]
    cap = buf.shape[0]
    x0, y0, z0, x1, y1, z1 = _cell_range(qlo[q], qhi[q], origin, inv_cell)
    ncell = (x1 - x0 + 1) * (y1 - y0 + 1) * (z1 - z0 + 1)
    if ncell > MAX_CELLS:
        for t in range(tlo.shape[0]):
            if _overlap(qlo, qhi, tlo, thi, q, t) and _accept(mode, oq, tidx[t], faces, edges, vbody, self_contact,
                                                              static):
                if n < cap:
                    buf[n] = tidx[t]
                n += 1
        return n
    qlo0, qlo1, qlo2 = qlo[q, 0], qlo[q, 1], qlo[q, 2]
    qhi0, qhi1, qhi2 = qhi[q, 0], qhi[q, 1], qhi[q, 2]
    by_body = ebody.shape[0] > 0 and skip_body >= 0
    for ix in range(x0, x1 + 1):
        for iy in range(y0, y1 + 1):
            for iz in range(z0, z1 + 1):
                h = _hash(ix, iy, iz, size)
                s0 = start[h]
                if mode == 1:
                    # edge-edge pairs are reported once, from the lower edge: the bucket's items increase
                    s0 = _first_above(items, s0, start[h + 1], q)
                for s in range(s0, start[h + 1]):
                    if by_body and ebody[s] == skip_body:
                        continue
                    t = items[s]
                    if s > start[h] and items[s - 1] == t:
                        continue   # two cells of t's own box hash to this bucket: t is in it twice, in a row
                    if not (qlo0 <= boxes[s, 3] and boxes[s, 0] <= qhi0 and qlo1 <= boxes[s, 4]
                            and boxes[s, 1] <= qhi1 and qlo2 <= boxes[s, 5] and boxes[s, 2] <= qhi2):
                        continue
                    cx = np.int64(np.floor((max(qlo0, boxes[s, 0]) - origin[0]) * inv_cell))
                    cy = np.int64(np.floor((max(qlo1, boxes[s, 1]) - origin[1]) * inv_cell))
                    cz = np.int64(np.floor((max(qlo2, boxes[s, 2]) - origin[2]) * inv_cell))
                    if cx != ix or cy != iy or cz != iz:
                        continue
                    if _accept(mode, oq, tidx[t], faces, edges, vbody, self_contact, static):
                        if n < cap:
                            buf[n] = tidx[t]
                        n += 1
    for bi in range(big.shape[0]):
        t = big[bi]
        if _overlap(qlo, qhi, tlo, thi, q, t) and _accept(mode, oq, tidx[t], faces, edges, vbody, self_contact, static):
            if n < cap:
                buf[n] = tidx[t]
            n += 1
    return n


@njit(cache=True, fastmath=False)
def _entry_bodies(items, tidx, mode, faces, edges, vbody):
    """Body of each hashed entry's target (items: box rows, tidx: their element ids; mode 0 faces, 1 edges)."""
    eb = np.empty(items.shape[0], dtype=np.int32)
    for s in range(items.shape[0]):
        t = tidx[items[s]]
        eb[s] = vbody[faces[t, 0]] if mode == 0 else vbody[edges[t, 0]]
    return eb


@njit(cache=True, fastmath=False, inline="always")
def _skip_body(mode, oq, faces, edges, vbody, self_contact):
    """The body whose targets query oq (an element id) cannot pair with: its own without self contact, else -1."""
    b = vbody[oq] if mode == 0 else vbody[edges[oq, 0]]
    return b if self_contact[b] == 0 else -1


@njit(cache=True, fastmath=False)
def query_grown(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces, edges,
                vbody, self_contact, static, buf, qidx, tidx):
    """_query_targets of query q into buf, replaced by one twice the count when it was too small:
    returns (count, buf). buf receives element ids (tidx of the hashed targets)."""
    n = _query_targets(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces, edges,
                       vbody, self_contact, static, buf, qidx, tidx)
    if n > buf.shape[0]:
        buf = np.empty(2 * n, dtype=np.int64)
        n = _query_targets(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces,
                           edges, vbody, self_contact, static, buf, qidx, tidx)
    return n, buf


@njit(cache=True, fastmath=False)
def hash_grid(qlo, qhi, tlo, thi):
    """Uniform hash grid over the target boxes: (origin (3,), 1 / cell size, table size, bucket
    starts, items, big targets). Cell size = CELL_FACTOR times the larger mean box extent of queries
    and targets."""
    nq = qlo.shape[0]
    nt = tlo.shape[0]
    origin = np.empty(3)
    ext = 0.0
    for a in range(3):
        origin[a] = min(qlo[:, a].min(), tlo[:, a].min())
    for i in range(nt):
        ext += max(thi[i, 0] - tlo[i, 0], thi[i, 1] - tlo[i, 1], thi[i, 2] - tlo[i, 2])
    qext = 0.0
    for i in range(nq):
        qext += max(qhi[i, 0] - qlo[i, 0], qhi[i, 1] - qlo[i, 1], qhi[i, 2] - qlo[i, 2])
    cell = CELL_FACTOR * max(ext / nt, qext / nq)
    if not cell > 0.0:
        cell = 1.0
    inv_cell = 1.0 / cell
    size = _table_size(nt)
    start, items, boxes, big = _build_table(tlo, thi, origin, inv_cell, size)
    return origin, inv_cell, size, start, items, boxes, big


@njit(cache=True, fastmath=False, inline="always")
def _query_pairs(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces, edges, vbody,
                 self_contact, static, buf, qidx, tidx, ebody):
    """(n, buf): query q's accepted targets into buf[:n], buf grown (and the scan repeated) when they do not fit."""
    sb = _skip_body(mode, qidx[q], faces, edges, vbody, self_contact) if mode != 2 else -1
    n = _scan_targets(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces, edges,
                      vbody, self_contact, static, buf, qidx, tidx, ebody, sb)
    if n > buf.shape[0]:
        buf = np.empty(2 * n, dtype=np.int64)
        n = _scan_targets(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces,
                          edges, vbody, self_contact, static, buf, qidx, tidx, ebody, sb)
    return n, buf


CHUNK_SLAB = 8   # pairs a query a chunk's slab holds in _box_pairs_kernel's threaded pass before it rescans


@njit(cache=True, fastmath=False, inline="always")
def _chunk_count(n):
    return max(1, min(n, 64))


@njit(cache=True, fastmath=False, parallel=True)
def _box_pairs_kernel(qlo, qhi, tlo, thi, mode, faces, edges, vbody, self_contact, static, single, qidx, tidx,
                      grid_origin, grid_inv_cell, grid_size, slab_per_query):
    """All accepted (query, target) pairs with overlapping boxes, (k, 2) int32 element ids (qidx / tidx of
    the box rows), in query order (several threads: count, then write). grid_size > 0: the hash grid's origin
    (3,) (m), 1 / cell size (1/m) and table size are these (else hash_grid's, from the boxes)."""
    nq = qlo.shape[0]
    nt = tlo.shape[0]
    if nq == 0 or nt == 0:
        return np.zeros((0, 2), dtype=np.int32)
    if grid_size > 0:
        origin, inv_cell, size = grid_origin, grid_inv_cell, grid_size
        start, items, boxes, big = _build_table(tlo, thi, origin, inv_cell, size)
    else:
        origin, inv_cell, size, start, items, boxes, big = hash_grid(qlo, qhi, tlo, thi)
    ebody = _entry_bodies(items, tidx, mode, faces, edges, vbody) if mode != 2 else np.empty(0, dtype=np.int32)
    if single:
        # one thread: a single pass appending to a growing output
        out = np.empty((max(64, 4 * nq), 2), dtype=np.int32)
        buf = np.empty(64, dtype=np.int64)
        m = 0
        for q in range(nq):
            n, buf = _query_pairs(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces,
                                  edges, vbody, self_contact, static, buf, qidx, tidx, ebody)
            if m + n > out.shape[0]:
                grown = np.empty((2 * (m + n), 2), dtype=np.int32)
                grown[:m] = out[:m]
                out = grown
            for j in range(n):
                out[m + j, 0] = qidx[q]
                out[m + j, 1] = buf[j]
            m += n
        return out[:m].copy()
    # several threads: each chunk of queries scans once into its own slab (slab_per_query pairs a query, the
    # slab's capacity); a chunk that outgrows its slab keeps counting and is scanned again into an exact slab. The
    # chunks are then copied out in query order: the same pairs in the same order as the one-thread pass.
    nch = _chunk_count(nq)
    per = (nq + nch - 1) // nch
    cap = slab_per_query * (per + 8)
    slab = np.empty((nch, cap, 2), dtype=np.int32)
    got = np.zeros(nch, dtype=np.int64)
    for ch in prange(nch):
        buf = np.empty(64, dtype=np.int64)
        m = 0
        for q in range(ch * nq // nch, (ch + 1) * nq // nch):
            n, buf = _query_pairs(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces,
                                  edges, vbody, self_contact, static, buf, qidx, tidx, ebody)
            if m + n <= cap:
                for j in range(n):
                    slab[ch, m + j, 0] = qidx[q]
                    slab[ch, m + j, 1] = buf[j]
            m += n
        got[ch] = m
    offs = np.zeros(nch + 1, dtype=np.int64)
    for ch in range(nch):
        offs[ch + 1] = offs[ch] + got[ch]
    out = np.empty((offs[nch], 2), dtype=np.int32)
    for ch in prange(nch):
        if got[ch] <= cap:
            for j in range(got[ch]):
                out[offs[ch] + j, 0] = slab[ch, j, 0]
                out[offs[ch] + j, 1] = slab[ch, j, 1]
            continue
        buf = np.empty(64, dtype=np.int64)   # outgrew its slab: scan again straight into place
        m = offs[ch]
        for q in range(ch * nq // nch, (ch + 1) * nq // nch):
            n, buf = _query_pairs(q, qlo, qhi, tlo, thi, start, items, boxes, big, origin, inv_cell, size, mode, faces,
                                  edges, vbody, self_contact, static, buf, qidx, tidx, ebody)
            for j in range(n):
                out[m + j, 0] = qidx[q]
                out[m + j, 1] = buf[j]
            m += n
    return out


def overlapping_box_pairs(qlo, qhi, tlo, thi, mode, faces, edges, vbody, self_contact, static, qidx=None,
                          tidx=None, grid=None, slab_per_query: int = CHUNK_SLAB):
    """All accepted (query, target) pairs with overlapping boxes, (k, 2) int32; one pass when numba
    runs on one thread. qidx / tidx: the element ids of the box rows (default: row i is element i).
    grid: (origin (3,) m, 1 / cell size 1/m, table size) of the hash grid, or None (hash_grid's); the pairs
    are the same either way, their order within a query's run follows the grid's cells. slab_per_query: the
    threaded pass's room per query before a chunk rescans (the same pairs either way; tests use 0)."""
    if qidx is None:
        qidx = np.arange(qlo.shape[0], dtype=np.int64)
    if tidx is None:
        tidx = np.arange(tlo.shape[0], dtype=np.int64)
    origin, inv_cell, size = (np.zeros(3), 1.0, 0) if grid is None else grid
    return _box_pairs_kernel(qlo, qhi, tlo, thi, mode, faces, edges, vbody, self_contact, static,
                             numba.get_num_threads() == 1, qidx, tidx, np.ascontiguousarray(origin, np.float64),
                             float(inv_cell), int(size), int(slab_per_query))


# --- body-level culling (issue 19) ------------------------------------------------------------------
# A pair (vertex or edge of body a, face or edge of body b) can only be reported when its two boxes
# overlap; each lies inside its body's box (the union of that body's element boxes), so the element of
# a meets the box of b. An element whose box meets no box of a body it may pair with (another body, not
# both static; its own body only with self contact) has no candidate pair at all and is left out of the
# hash grid, the queries and CCD: the pairs found are exactly the unculled ones.

@njit(cache=True, fastmath=False)
def _body_boxes(vlo, vhi, flo, fhi, elo, ehi, faces, edges, vbody, nb):
    """(nb, 3) lo / hi: per body the union of its vertex, face and edge boxes (m); empty bodies +-inf."""
    blo = np.full((nb, 3), np.inf)
    bhi = np.full((nb, 3), -np.inf)
    for i in range(vlo.shape[0]):
        b = vbody[i]
        for a in range(3):
            blo[b, a] = min(blo[b, a], vlo[i, a])
            bhi[b, a] = max(bhi[b, a], vhi[i, a])
    for i in range(flo.shape[0]):
        b = vbody[faces[i, 0]]
        for a in range(3):
            blo[b, a] = min(blo[b, a], flo[i, a])
            bhi[b, a] = max(bhi[b, a], fhi[i, a])
    for i in range(elo.shape[0]):
        b = vbody[edges[i, 0]]
        for a in range(3):
            blo[b, a] = min(blo[b, a], elo[i, a])
            bhi[b, a] = max(bhi[b, a], ehi[i, a])
    return blo, bhi


@njit(cache=True, fastmath=False)
def _body_neighbours(blo, bhi, self_contact, static):
    """CSR (start (nb+1,), list) of the bodies whose boxes overlap body b's and that b may pair with:
    another body unless both are static (sort and sweep on x, O(nb log nb + overlaps))."""
    nb = blo.shape[0]
    order = np.argsort(blo[:, 0])
    cnt = np.zeros(nb + 1, dtype=np.int64)
    pa = np.empty(max(16, 4 * nb), dtype=np.int64)
    pb = np.empty(max(16, 4 * nb), dtype=np.int64)
    m = 0
    for ii in range(nb):
        i = order[ii]
        if not blo[i, 0] <= bhi[i, 0]:
            continue           # no element
        for jj in range(ii + 1, nb):
            j = order[jj]
            if blo[j, 0] > bhi[i, 0]:
                break
            if not (blo[i, 1] <= bhi[j, 1] and blo[j, 1] <= bhi[i, 1] and blo[i, 2] <= bhi[j, 2]
                    and blo[j, 2] <= bhi[i, 2] and blo[j, 0] <= bhi[j, 0]):
                continue
            if static[i] != 0 and static[j] != 0:
                continue
            if m + 1 > pa.shape[0]:
                pa2 = np.empty(2 * pa.shape[0], dtype=np.int64)
                pb2 = np.empty(2 * pa.shape[0], dtype=np.int64)
                pa2[:m] = pa[:m]
                pb2[:m] = pb[:m]
                pa = pa2
                pb = pb2
            pa[m] = i
            pb[m] = j
            m += 1
            cnt[i + 1] += 1
            cnt[j + 1] += 1
    for b in range(nb):
        cnt[b + 1] += cnt[b]
    lst = np.empty(cnt[nb], dtype=np.int64)
    fill = cnt[:nb].copy()
    for k in range(m):
        lst[fill[pa[k]]] = pb[k]
        fill[pa[k]] += 1
        lst[fill[pb[k]]] = pa[k]
        fill[pb[k]] += 1
    return cnt, lst


def _kept(lo, hi, body, blo, bhi, nstart, nlist, self_contact):
    """Indices (int64, increasing) of the elements (boxes lo / hi, body ids) whose box meets the box of
    a body they may pair with (see above); every element of a self-contacting body is kept."""
    return np.nonzero(_kept_mask(lo, hi, body, blo, bhi, nstart, nlist, self_contact))[0].astype(np.int64)


@njit(cache=True, fastmath=False, parallel=True)
def _kept_mask(lo, hi, body, blo, bhi, nstart, nlist, self_contact):
    """_kept as a mask (m,) bool."""
    m = lo.shape[0]
    keep = np.zeros(m, dtype=np.bool_)
    for i in prange(m):
        b = body[i]
        if self_contact[b] != 0:
            keep[i] = True
            continue
        for k in range(nstart[b], nstart[b + 1]):
            c = nlist[k]
            if (lo[i, 0] <= bhi[c, 0] and blo[c, 0] <= hi[i, 0] and lo[i, 1] <= bhi[c, 1] and blo[c, 1] <= hi[i, 1]
                    and lo[i, 2] <= bhi[c, 2] and blo[c, 2] <= hi[i, 2]):
                keep[i] = True
                break
    return keep


def cull_elements(vlo, vhi, flo, fhi, elo, ehi, mesh: CollisionMesh):
    """Element ids (vertices, faces, edges; int64, increasing) that can be in a candidate pair of boxes
    vlo/vhi, flo/fhi, elo/ehi (m): those whose box meets the box of a body they may pair with. None when
    culling cannot remove anything (one body, or every body self-contacting)."""
    vb = mesh.vertex_body
    nb = int(mesh.body_friction.shape[0])
    _, _, fb, eb, no_cull = mesh.element_topology()
    if no_cull:
        return None
    blo, bhi = _body_boxes(vlo, vhi, flo, fhi, elo, ehi, mesh.faces, mesh.edges, vb, nb)
    nstart, nlist = _body_neighbours(blo, bhi, mesh.self_contact, mesh.body_static)
    return (_kept(vlo, vhi, vb, blo, bhi, nstart, nlist, mesh.self_contact),
            _kept(flo, fhi, np.ascontiguousarray(fb), blo, bhi, nstart, nlist, mesh.self_contact),
            _kept(elo, ehi, np.ascontiguousarray(eb), blo, bhi, nstart, nlist, mesh.self_contact))


# --- the partner-region cut of the Verlet list's rebuilds (issue 19) ------------------------------------
# After the body-box cut, an element of body a kept because its box meets the box of a neighbour b can still lie
# far from b: a turned cube's world-axis box holds much empty space, and the pile's neighbours' boxes overlap
# over whole cube faces. An element of a is only in a pair with an element of b of the partner kind (a face for a
# vertex, a vertex for a face, an edge for an edge) whose box meets its own; those boxes are among b's that
# survive the body-box cut (a box meeting one of a's meets a's body box). So the element is left out unless, for
# some body b it may pair with, its box meets b's *partner region*: the bounding box of b's surviving partner
# boxes, cut by the slab between their least and greatest projections on each of three directions of b, the
# normals of three of b's faces at the present positions (axis_faces: chosen once, at rest). On a rigid or affine
# body those stay across its faces, and a box-shaped body's region is its oriented box grown by the pads, not the
# larger world-axis box. The cut holds for any directions (the region holds every partner box either way); the
# projections are compared with a round-off margin. The pairs found are exactly those of the body-box cut, and
# the hash grid is laid over the body-box survivors (its origin, cell and table: cull_grid), so they come out
# in the same order too.

REGION_TOL = 1.0e-12   # round-off margin of the projections: this times the largest coordinate (m) of the boxes


@njit(cache=True, fastmath=False)
def _body_dirs(x, faces, axf):
    """(nb, 3, 3) unit normals at x (n, 3) of the faces axf (nb, 3) (axis_faces); zero rows for -1 or a
    degenerate face (a zero direction cuts nothing)."""
    nb = axf.shape[0]
    d = np.zeros((nb, 3, 3))
    for b in range(nb):
        for k in range(3):
            f = axf[b, k]
            if f < 0:
                continue
            a, p, c = faces[f, 0], faces[f, 1], faces[f, 2]
            u0, u1, u2 = x[p, 0] - x[a, 0], x[p, 1] - x[a, 1], x[p, 2] - x[a, 2]
            v0, v1, v2 = x[c, 0] - x[a, 0], x[c, 1] - x[a, 1], x[c, 2] - x[a, 2]
            n0, n1, n2 = u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0
            r = np.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
            if r > 0.0:
                d[b, k, 0], d[b, k, 1], d[b, k, 2] = n0 / r, n1 / r, n2 / r
    return d


@njit(cache=True, fastmath=False, inline="always")
def _project(lo, hi, i, d, b, k):
    """(least, greatest) projection of box i (lo, hi (m, 3)) on direction d[b, k] (m)."""
    pl = 0.0
    ph = 0.0
    for a in range(3):
        n = d[b, k, a]
        if n >= 0.0:
            pl += n * lo[i, a]
            ph += n * hi[i, a]
        else:
            pl += n * hi[i, a]
            ph += n * lo[i, a]
    return pl, ph


@njit(cache=True, fastmath=False)
def _regions(lo, hi, rows, body, dirs):
    """Per body the region of its boxes lo / hi (m, 3) of the rows (int64): bounding box (nb, 3) rlo / rhi and the
    extent (nb, 3) slo / shi of their projections on its directions dirs (nb, 3, 3) (m; empty: +-inf)."""
    nb = dirs.shape[0]
    rlo = np.full((nb, 3), np.inf)
    rhi = np.full((nb, 3), -np.inf)
    slo = np.full((nb, 3), np.inf)
    shi = np.full((nb, 3), -np.inf)
    for r in range(rows.shape[0]):
        i = rows[r]
        b = body[i]
        for a in range(3):
            rlo[b, a] = min(rlo[b, a], lo[i, a])
            rhi[b, a] = max(rhi[b, a], hi[i, a])
        for k in range(3):
            pl, ph = _project(lo, hi, i, dirs, b, k)
            slo[b, k] = min(slo[b, k], pl)
            shi[b, k] = max(shi[b, k], ph)
    return rlo, rhi, slo, shi


@njit(cache=True, fastmath=False, parallel=True)
def _region_kept(lo, hi, rows, body, nstart, nlist, self_contact, rlo, rhi, slo, shi, dirs, tol):
    """The rows (int64, increasing) of the elements (boxes lo / hi, body ids) whose box meets the partner region
    (rlo, rhi, slo, shi along dirs: _regions) of a body they may pair with (nstart / nlist: _body_neighbours), and
    those of self-contacting bodies (int64, increasing). tol (m): the projections' round-off margin."""
    m = rows.shape[0]
    out = np.zeros(m, dtype=np.bool_)
    for r in prange(m):
        i = rows[r]
        b = body[i]
        if self_contact[b] != 0:
            out[r] = True
            continue
        for j in range(nstart[b], nstart[b + 1]):
            c = nlist[j]
            if not (lo[i, 0] <= rhi[c, 0] and rlo[c, 0] <= hi[i, 0] and lo[i, 1] <= rhi[c, 1]
                    and rlo[c, 1] <= hi[i, 1] and lo[i, 2] <= rhi[c, 2] and rlo[c, 2] <= hi[i, 2]):
                continue
            meets = True
            for k in range(3):
                pl, ph = _project(lo, hi, i, dirs, c, k)
                if pl > shi[c, k] + tol or ph < slo[c, k] - tol:
                    meets = False
                    break
            if meets:
                out[r] = True
                break
    return rows[out]


@njit(cache=True, fastmath=False)
def cull_grid(qlo, qhi, qrows, tlo, thi, trows):
    """hash_grid's (origin (3,) m, 1 / cell size 1/m, table size) over the query and target boxes of the rows
    qrows / trows (int64, increasing): the same numbers as hash_grid of those rows (table size 0 when either
    set is empty)."""
    origin = np.full(3, np.inf)
    nq = qrows.shape[0]
    nt = trows.shape[0]
    ext = 0.0
    qext = 0.0
    for r in range(nt):
        i = trows[r]
        ext += max(thi[i, 0] - tlo[i, 0], thi[i, 1] - tlo[i, 1], thi[i, 2] - tlo[i, 2])
        for a in range(3):
            origin[a] = min(origin[a], tlo[i, a])
    for r in range(nq):
        i = qrows[r]
        qext += max(qhi[i, 0] - qlo[i, 0], qhi[i, 1] - qlo[i, 1], qhi[i, 2] - qlo[i, 2])
        for a in range(3):
            origin[a] = min(origin[a], qlo[i, a])
    if nq == 0 or nt == 0:
        return origin, 1.0, 0
    cell = CELL_FACTOR * max(ext / nt, qext / nq)
    if not cell > 0.0:
        cell = 1.0
    return origin, 1.0 / cell, _table_size(nt)


def region_culled_boxes(x0, x1, mesh: CollisionMesh, pad):
    """culled_boxes(x0, x1, mesh, pad) cut further to the elements whose box meets the partner region of a body
    they may pair with (see above): (rows as culled_boxes', pt grid, ee grid), the grids (origin, 1 / cell, table
    size) for overlapping_box_pairs (those of the body-box cut's rows: the same pairs in the same order), or None
    when there is no body-box cut (then the rows are every element)."""
    vp, fp, ep = pad if isinstance(pad, tuple) else (pad, pad, pad)
    verts = np.arange(mesh.n_verts, dtype=np.int32).reshape(-1, 1)
    vlo, vhi = element_boxes(x0, x1, verts, mesh.vertex_offset + vp)
    flo, fhi = element_boxes(x0, x1, mesh.faces, mesh.face_offset + fp)
    elo, ehi = element_boxes(x0, x1, mesh.edges, mesh.edge_offset + ep)
    vb = mesh.vertex_body
    nb = int(mesh.body_friction.shape[0])
    _, _, fb, eb, no_cull = mesh.element_topology()
    if no_cull:
        rows = ((vlo, vhi, np.arange(vlo.shape[0], dtype=np.int64)), (flo, fhi, np.arange(flo.shape[0], dtype=np.int64)),
                (elo, ehi, np.arange(elo.shape[0], dtype=np.int64)))
        return rows, None, None
    sc = mesh.self_contact
    blo, bhi = _body_boxes(vlo, vhi, flo, fhi, elo, ehi, mesh.faces, mesh.edges, vb, nb)
    nstart, nlist = _body_neighbours(blo, bhi, sc, mesh.body_static)
    mv = _kept(vlo, vhi, vb, blo, bhi, nstart, nlist, sc)
    mf = _kept(flo, fhi, fb, blo, bhi, nstart, nlist, sc)
    me = _kept(elo, ehi, eb, blo, bhi, nstart, nlist, sc)
    grid_pt = cull_grid(vlo, vhi, mv, flo, fhi, mf)
    grid_ee = cull_grid(elo, ehi, me, elo, ehi, me)
    dirs = _body_dirs(x0, mesh.faces, mesh.ensure_axis_faces(x0))
    fin = np.isfinite(blo).all(axis=1)
    tol = REGION_TOL * float(max(np.abs(blo[fin]).max(initial=0.0), np.abs(bhi[fin]).max(initial=0.0)))
    rv = _regions(vlo, vhi, mv, vb, dirs)
    rf = _regions(flo, fhi, mf, fb, dirs)
    re = _regions(elo, ehi, me, eb, dirs)
    kv = _region_kept(vlo, vhi, mv, vb, nstart, nlist, sc, *rf, dirs, tol)
    kf = _region_kept(flo, fhi, mf, fb, nstart, nlist, sc, *rv, dirs, tol)
    ke = _region_kept(elo, ehi, me, eb, nstart, nlist, sc, *re, dirs, tol)
    rows = (_take_boxes(vlo, vhi, kv) + (kv,), _take_boxes(flo, fhi, kf) + (kf,), _take_boxes(elo, ehi, ke) + (ke,))
    return rows, grid_pt, grid_ee


@njit(cache=True, fastmath=False)
def _take_boxes(lo, hi, rows):
    """(lo[rows], hi[rows]) as new contiguous (k, 3) arrays (rows int64): numpy's fancy indexing of the two
    (m, 3) arrays, without its per-call overhead (~4 ms a list rebuild of the 100-cube pile)."""
    k = rows.shape[0]
    olo = np.empty((k, 3))
    ohi = np.empty((k, 3))
    for r in range(k):
        i = rows[r]
        for a in range(3):
            olo[r, a] = lo[i, a]
            ohi[r, a] = hi[i, a]
    return olo, ohi


@njit(cache=True, fastmath=False, parallel=True)
def _near_rows(lo, hi, rlo, rhi):
    """Indices (int64, increasing) of the boxes (lo, hi) that overlap at least one box of (rlo, rhi) (m):
    the region's boxes hashed into a grid, every box queried against its cells."""
    m = lo.shape[0]
    keep = np.zeros(m, dtype=np.bool_)
    if m == 0 or rlo.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    origin, inv_cell, size, start, items, boxes, big = hash_grid(lo, hi, rlo, rhi)
    nch = _chunk_count(m)
    for ch in prange(nch):
        for q in range(ch * m // nch, (ch + 1) * m // nch):
            x0, y0, z0, x1, y1, z1 = _cell_range(lo[q], hi[q], origin, inv_cell)
            if (x1 - x0 + 1) * (y1 - y0 + 1) * (z1 - z0 + 1) > MAX_CELLS:
                for t in range(rlo.shape[0]):
                    if _overlap(lo, hi, rlo, rhi, q, t):
                        keep[q] = True
                        break
                continue
            found = False
            for ix in range(x0, x1 + 1):
                for iy in range(y0, y1 + 1):
                    for iz in range(z0, z1 + 1):
                        if found:
                            break
                        h = _hash(ix, iy, iz, size)
                        for s in range(start[h], start[h + 1]):
                            if (lo[q, 0] <= boxes[s, 3] and boxes[s, 0] <= hi[q, 0] and lo[q, 1] <= boxes[s, 4]
                                    and boxes[s, 1] <= hi[q, 1] and lo[q, 2] <= boxes[s, 5]
                                    and boxes[s, 2] <= hi[q, 2]):
                                found = True
                                break
            if not found:
                for bi in range(big.shape[0]):
                    if _overlap(lo, hi, rlo, rhi, q, big[bi]):
                        found = True
                        break
            keep[q] = found
    return np.nonzero(keep)[0].astype(np.int64)


def _near_filter(rows, near, mesh: CollisionMesh):
    """rows (the three (lo, hi, ids) triples of culled_boxes) cut to the elements that can pair with an element
    touching a vertex of the mask ``near`` (n,): those whose box meets the box of such an element (a region's
    vertices, faces and edges keep theirs). Every pair with a vertex in ``near`` whose boxes overlap survives."""
    (vlo, vhi, vi), (flo, fhi, fi), (elo, ehi, ei) = rows
    rv = near[vi]
    rf = near[mesh.faces[fi]].any(axis=1)
    re = near[mesh.edges[ei]].any(axis=1)
    rlo = np.ascontiguousarray(np.concatenate([vlo[rv], flo[rf], elo[re]]))
    rhi = np.ascontiguousarray(np.concatenate([vhi[rv], fhi[rf], ehi[re]]))
    out = []
    for lo, hi, ids in rows:
        k = _near_rows(lo, hi, rlo, rhi)
        out.append((np.ascontiguousarray(lo[k]), np.ascontiguousarray(hi[k]), ids[k]))
    return tuple(out)


def culled_boxes(x0, x1, mesh: CollisionMesh, pad, cull: bool = True, near=None):
    """Boxes of the elements that may be in a candidate pair, over positions x0 and x1, inflated by the
    elements' contact offsets + pad (m; a float, or a tuple of per-element pads (vertices, faces, edges)):
    ((vlo, vhi, vi), (flo, fhi, fi), (elo, ehi, ei)), rows of element ids vi / fi / ei (int64). cull=False
    keeps every element (the reference for the tests).
    near (n,) bool or None: only pairs with a vertex in this mask are wanted (Newton's local refinement,
    where every other vertex is held): elements whose box meets no box of an element touching the mask
    are left out too (_near_filter); pairs of two elements outside the mask may remain."""
    vp, fp, ep = pad if isinstance(pad, tuple) else (pad, pad, pad)
    verts = np.arange(mesh.n_verts, dtype=np.int32).reshape(-1, 1)
    vlo, vhi = element_boxes(x0, x1, verts, mesh.vertex_offset + vp)
    flo, fhi = element_boxes(x0, x1, mesh.faces, mesh.face_offset + fp)
    elo, ehi = element_boxes(x0, x1, mesh.edges, mesh.edge_offset + ep)
    kept = cull_elements(vlo, vhi, flo, fhi, elo, ehi, mesh) if cull else None
    if kept is None:
        rows = ((vlo, vhi, np.arange(vlo.shape[0], dtype=np.int64)), (flo, fhi, np.arange(flo.shape[0], dtype=np.int64)),
                (elo, ehi, np.arange(elo.shape[0], dtype=np.int64)))
    else:
        vi, fi, ei = kept
        rows = ((np.ascontiguousarray(vlo[vi]), np.ascontiguousarray(vhi[vi]), vi),
                (np.ascontiguousarray(flo[fi]), np.ascontiguousarray(fhi[fi]), fi),
                (np.ascontiguousarray(elo[ei]), np.ascontiguousarray(ehi[ei]), ei))
    return rows if near is None else _near_filter(rows, near, mesh)


def touching(c: Candidates, mesh: CollisionMesh, near: np.ndarray) -> Candidates:
    """The pairs of c with at least one vertex in the mask near (n,) bool."""
    pt = np.asarray(c.pt).reshape(-1, 2)
    ee = np.asarray(c.ee).reshape(-1, 2)
    kp = near[pt[:, 0]] | near[mesh.faces[pt[:, 1]]].any(axis=1)
    ke = near[mesh.edges[ee[:, 0]]].any(axis=1) | near[mesh.edges[ee[:, 1]]].any(axis=1)
    return Candidates(np.ascontiguousarray(pt[kp]), np.ascontiguousarray(ee[ke]))


CULL = True   # body-level culling in the broad phase and CCD (False: every element, for comparison)
REGION_CULL = True   # find_candidates_padded: the partner-region cut after the body-level one (the same pairs)


def _candidates(x0: np.ndarray, x1: np.ndarray, mesh: CollisionMesh, dhat: float, cull=None,
                near=None) -> Candidates:
    x0 = np.ascontiguousarray(x0, dtype=np.float64).reshape(-1, 3)
    x1 = np.ascontiguousarray(x1, dtype=np.float64).reshape(-1, 3)
    with threads_for(mesh.n_verts + mesh.edges.shape[0]):
        c = _candidates_impl(x0, x1, mesh, dhat, CULL if cull is None else cull, near)
    return c if near is None else touching(c, mesh, near)


def _candidates_impl(x0, x1, mesh, dhat, cull, near=None):
    (vlo, vhi, vi), (flo, fhi, fi), (elo, ehi, ei) = culled_boxes(x0, x1, mesh, 0.5 * float(dhat), cull, near)
    filt = (mesh.faces, mesh.edges, mesh.vertex_body, mesh.self_contact, mesh.body_static)
    pt = overlapping_box_pairs(vlo, vhi, flo, fhi, 0, *filt, vi, fi)
    ee = overlapping_box_pairs(elo, ehi, elo, ehi, 1, *filt, ei, ei)
    return Candidates(pt, ee)


def find_candidates(x: np.ndarray, mesh: CollisionMesh, dhat: float, cull=None, near=None) -> Candidates:
    """Point-triangle and edge-edge pairs whose boxes, inflated by dhat/2 + offsets (m), overlap.

    Superset of every pair whose contact distance is below dhat. cull: leave out elements whose box meets
    no other body's box (default ``CULL``; the same pairs either way). near (n,) bool: only the pairs with
    a vertex in the mask (all of them).
    """
    return _candidates(x, x, mesh, dhat, cull, near)


def find_candidates_padded(x: np.ndarray, mesh: CollisionMesh, vpad: np.ndarray, x1=None) -> Candidates:
    """Point-triangle and edge-edge pairs whose boxes at x, inflated by the offsets + vpad of the element's
    first vertex (m, per vertex: e.g. (dhat + a skin of the vertex's body) / 2) overlap. Superset of every
    pair (a, b) whose distance less the offsets is below vpad(a) + vpad(b). x1 (n, 3) or None: the boxes
    enclose the element at x and at x1 (swept boxes of the straight move x -> x1), so the pairs hold every
    pair closer than vpad(a) + vpad(b) at any point of the move."""
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1, 3)
    x1 = x if x1 is None else np.ascontiguousarray(x1, dtype=np.float64).reshape(-1, 3)
    vpad = np.ascontiguousarray(vpad, dtype=np.float64)
    ff, ef, _, _, _ = mesh.element_topology()
    pads = (vpad, vpad[ff] if ff.size else np.zeros(0), vpad[ef] if ef.size else np.zeros(0))
    with threads_for(mesh.n_verts + mesh.edges.shape[0]):
        filt = (mesh.faces, mesh.edges, mesh.vertex_body, mesh.self_contact, mesh.body_static)
        if CULL and REGION_CULL:
            ((vlo, vhi, vi), (flo, fhi, fi), (elo, ehi, ei)), gpt, gee = region_culled_boxes(x, x1, mesh, pads)
        else:
            (vlo, vhi, vi), (flo, fhi, fi), (elo, ehi, ei) = culled_boxes(x, x1, mesh, pads, CULL)
            gpt = gee = None
        pt = overlapping_box_pairs(vlo, vhi, flo, fhi, 0, *filt, vi, fi, grid=gpt)
        ee = overlapping_box_pairs(elo, ehi, elo, ehi, 1, *filt, ei, ei, grid=gee)
    return Candidates(pt, ee)


@njit(cache=True, fastmath=False)
def within_boxes(x, lo, hi, vertex_body, half):
    """True when every vertex v of x (n, 3) lies in its box [lo[v], hi[v]] (n, 3) grown by half[b] (m) on every
    side, b = vertex_body[v] (the Verlet list's validity test, contact/terms.py CandidateList)."""
    for v in range(x.shape[0]):
        h = half[vertex_body[v]]
        for a in range(3):
            if x[v, a] < lo[v, a] - h or x[v, a] > hi[v, a] + h:
                return False
    return True


@njit(cache=True, fastmath=False)
def exit_time(x, p, lo, hi, vertex_body, half):
    """Largest t in [0, 1] such that every vertex of x + t p (x, p (n, 3), m) stays in its box [lo, hi] grown by
    half[b] (m) (b its body; within_boxes); 0 when x is not in them."""
    t = 1.0
    for v in range(x.shape[0]):
        h = half[vertex_body[v]]
        for a in range(3):
            lo_ = lo[v, a] - h
            hi_ = hi[v, a] + h
            xv = x[v, a]
            if xv < lo_ or xv > hi_:
                return 0.0
            pv = p[v, a]
            if pv > 0.0:
                tv = (hi_ - xv) / pv
                if tv < t:
                    t = tv
            elif pv < 0.0:
                tv = (lo_ - xv) / pv
                if tv < t:
                    t = tv
    return t


@njit(cache=True, fastmath=False)
def body_displacements(x, xb, vertex_body, nb):
    """Largest distance (m) between x and xb over each body's vertices, (nb,)."""
    d = np.zeros(nb)
    for v in range(x.shape[0]):
        dx = x[v, 0] - xb[v, 0]
        dy = x[v, 1] - xb[v, 1]
        dz = x[v, 2] - xb[v, 2]
        r = dx * dx + dy * dy + dz * dz
        b = vertex_body[v]
        if r > d[b]:
            d[b] = r
    return np.sqrt(d)


def find_candidates_ccd(x0: np.ndarray, x1: np.ndarray, mesh: CollisionMesh, dhat: float = 0.0,
                        cull=None, near=None) -> Candidates:
    """Pairs whose swept boxes (enclosing positions x0 and x1, inflated by dhat/2 + offsets) overlap:
    a superset of every pair that can come into contact along the straight motion x0 -> x1 (near: only
    the pairs with a vertex in that (n,) bool mask)."""
    return _candidates(x0, x1, mesh, dhat, cull, near)
