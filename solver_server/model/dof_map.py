"""The map from the solver's degrees of freedom z to the vertex positions x that contact, friction
and CCD see: x = W z, applied per coordinate (J = W (x) I_3).

z is an (n_z, 3) array whose first N rows are the vertex array itself; extra rows (4 per affine
body: its translation p and the three rows of L A^T, see solver_server/bodies/affine.py) are appended.
A vertex row is either its own DOF (weight 1 on itself: FEM nodes, cloth, rods, colliders) or
*slaved*: x_i = sum_r w_ir z_r over a few extra rows (an affine body's surface vertex:
w = (1, X_i / L)). Slaved rows of z are never free; ``sync`` keeps them equal to W z so that
z[:N] is always the vertex array (output, elastic terms and tests read it directly).

Chain rule: the gradient of a term written in x is W^T g_x (slaved rows' entries moved onto the
rows they depend on), its Hessian W^T H W (each COO entry (r, c) spread over the rows of r and c;
``pull_coo``). A linear path z + t p maps to the linear path x + t W p, so CCD on x is exact for
steps in z. With no slaved vertex the map is the identity and every method returns its input.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, fastmath=False)
def _apply(z, slaved, ptr, rows, w, out):
    """out[i] = sum_r w z[r] for slaved vertices i (other rows untouched)."""
    for s in range(slaved.size):
        i = slaved[s]
        for c in range(3):
            out[i, c] = 0.0
        for k in range(ptr[s], ptr[s + 1]):
            r = rows[k]
            for c in range(3):
                out[i, c] += w[k] * z[r, c]


@njit(cache=True, fastmath=False)
def _apply4(z, slaved, row0, w4, out):
    """_apply for slaved vertices that each depend on 4 consecutive rows row0[s] .. row0[s] + 3 of z with the
    weights w4[s] (an affine body's vertices): the same sums in the same order (the same bytes), without reading a
    row index per weight."""
    for s in range(slaved.size):
        i = slaved[s]
        r = row0[s]
        for c in range(3):
            acc = 0.0
            for j in range(4):
                acc += w4[s, j] * z[r + j, c]
            out[i, c] = acc


@njit(cache=True, fastmath=False)
def _same(a, b):
    """True when the int64 arrays a and b (same size, flattened; float64 arrays viewed as int64) are equal element
    for element: the same bytes (-0.0 is not +0.0 here). Compared from the end, where z keeps the bodies' rows: a
    Newton step moves those and leaves the (slaved) vertex rows before them alone, so a different z is told apart
    at once, not after its ~300k vertex coordinates."""
    fa = a.ravel()
    fb = b.ravel()
    for k in range(fa.size - 1, -1, -1):
        if fa[k] != fb[k]:
            return False
    return True


@njit(cache=True, fastmath=False)
def _pull_gradient(g, slaved, ptr, rows, w):
    """In place on g (n_z, 3): add W^T g over slaved vertices, then zero their rows."""
    for s in range(slaved.size):
        i = slaved[s]
        for k in range(ptr[s], ptr[s + 1]):
            r = rows[k]
            for c in range(3):
                g[r, c] += w[k] * g[i, c]
        for c in range(3):
            g[i, c] = 0.0


@njit(cache=True, fastmath=False)
def _pull_coo(r_in, c_in, v_in, vptr, vrows, vw):
    """W^T H W of COO triplets over scalar DOFs (3 i + c). vptr/vrows/vw: per vertex (all n_z rows)
    the rows it depends on (itself with weight 1 unless slaved)."""
    n = r_in.size
    cnt = 0
    for e in range(n):
        a = r_in[e] // 3
        b = c_in[e] // 3
        cnt += (vptr[a + 1] - vptr[a]) * (vptr[b + 1] - vptr[b])
    ro = np.empty(cnt, np.int64)
    co = np.empty(cnt, np.int64)
    vo = np.empty(cnt)
    k = 0
    for e in range(n):
        a = r_in[e] // 3
        ca = r_in[e] % 3
        b = c_in[e] // 3
        cb = c_in[e] % 3
        for i in range(vptr[a], vptr[a + 1]):
            for j in range(vptr[b], vptr[b + 1]):
                ro[k] = 3 * vrows[i] + ca
                co[k] = 3 * vrows[j] + cb
                vo[k] = vw[i] * vw[j] * v_in[e]
                k += 1
    return ro, co, vo


@njit(cache=True, fastmath=False)
def _pull_coo_grouped(r_in, c_in, v_in, vptr, vrows, vw, vgroup, gsize, table):
    """W^T H W like _pull_coo, with every entry between two slaved vertices summed straight into the dense
    block of their two groups (an affine body's 4 rows x 3 coordinates: a 12 x 12 block per body pair) instead
    of being spread into 16 COO triplets each: the output holds one 144-entry block per touched body pair plus
    the spread entries of pairs involving a free vertex. ``table`` (G, G) int64 all -1 on entry and on return
    (scratch: block index of a group pair). gsize: rows per group (4)."""
    n = r_in.size
    nblk = 0
    cnt = 0
    ga = np.empty(n, np.int64)
    gb = np.empty(n, np.int64)
    for e in range(n):
        a = r_in[e] // 3
        b = c_in[e] // 3
        A = vgroup[a]
        B = vgroup[b]
        if A >= 0 and B >= 0:
            if table[A, B] < 0:
                table[A, B] = nblk
                ga[nblk] = A
                gb[nblk] = B
                nblk += 1
        else:
            cnt += (vptr[a + 1] - vptr[a]) * (vptr[b + 1] - vptr[b])
    k3 = 3 * gsize
    blk = np.zeros((nblk, k3, k3))
    ro = np.empty(cnt + nblk * k3 * k3, np.int64)
    co = np.empty(cnt + nblk * k3 * k3, np.int64)
    vo = np.empty(cnt + nblk * k3 * k3)
    k = 0
    for e in range(n):
        a = r_in[e] // 3
        ca = r_in[e] % 3
        b = c_in[e] // 3
        cb = c_in[e] % 3
        A = vgroup[a]
        B = vgroup[b]
        if A >= 0 and B >= 0:
            q = table[A, B]
            for i in range(gsize):
                wi = vw[vptr[a] + i] * v_in[e]
                for j in range(gsize):
                    blk[q, 3 * i + ca, 3 * j + cb] += wi * vw[vptr[b] + j]
        else:
            for i in range(vptr[a], vptr[a + 1]):
                for j in range(vptr[b], vptr[b + 1]):
                    ro[k] = 3 * vrows[i] + ca
                    co[k] = 3 * vrows[j] + cb
                    vo[k] = vw[i] * vw[j] * v_in[e]
                    k += 1
    for q in range(nblk):
        table[ga[q], gb[q]] = -1
    return ro, co, vo, blk, ga[:nblk].copy(), gb[:nblk].copy(), k


@njit(cache=True, fastmath=False)
def _emit_blocks(ro, co, vo, k, blk, ga, gb, grow0, gsize):
    """Write the dense group-pair blocks as COO triplets after the first k entries of ro/co/vo."""
    k3 = 3 * gsize
    for q in range(blk.shape[0]):
        ra = grow0[ga[q]]
        rb = grow0[gb[q]]
        for i in range(k3):
            for j in range(k3):
                ro[k] = 3 * ra + i
                co[k] = 3 * rb + j
                vo[k] = blk[q, i, j]
                k += 1
    return k


class DofMap:
    """x = W z (see module doc). n_x vertices, n_z rows of z (>= n_x)."""

    GROUPED = True
    """pull_coo sums the entries between two affine bodies into one dense 12 x 12 block per body pair (False:
    every entry spread into 16 triplets for the CSR sum, the path before; kept for the before/after benchmark)."""

    def __init__(self, n_x: int, n_z: int, slaved: np.ndarray = None, ptr: np.ndarray = None,
                 rows: np.ndarray = None, weights: np.ndarray = None):
        self.n_x = int(n_x)
        self.n_z = int(n_z)
        self.slaved = np.zeros(0, np.int64) if slaved is None else np.ascontiguousarray(slaved, np.int64)
        self.ptr = np.zeros(1, np.int64) if ptr is None else np.ascontiguousarray(ptr, np.int64)
        self.rows = np.zeros(0, np.int64) if rows is None else np.ascontiguousarray(rows, np.int64)
        self.w = np.zeros(0) if weights is None else np.ascontiguousarray(weights, np.float64)
        self.identity = self.slaved.size == 0 and self.n_z == self.n_x
        # per-row dependency lists over all n_z rows (for pull_coo)
        cnt = np.ones(self.n_z, np.int64)
        cnt[self.slaved] = np.diff(self.ptr)
        self.vptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
        vrows = np.arange(self.n_z, dtype=np.int64).repeat(cnt)
        vw = np.ones(int(cnt.sum()))
        if self.slaved.size:
            # entry k of slaved vertex s (ptr[s] <= k < ptr[s+1]) goes to vptr[slaved[s]] + k - ptr[s]
            k = np.arange(int(self.ptr[-1]), dtype=np.int64)
            dst = np.repeat(self.vptr[self.slaved] - self.ptr[:-1], np.diff(self.ptr)) + k
            vrows[dst] = self.rows
            vw[dst] = self.w
        self.vrows, self.vw = vrows, vw
        self.is_slaved = np.zeros(self.n_z, bool)
        self.is_slaved[self.slaved] = True
        # groups: slaved vertices that depend on the same rows (one affine body), for pull_coo's dense blocks
        self.vgroup = -np.ones(self.n_z, np.int64)
        self.group_row0 = np.zeros(0, np.int64)
        self.group_size = 0
        if self.slaved.size:
            sizes = np.diff(self.ptr)
            first = self.rows[self.ptr[:-1]]
            self.group_row0, gid = np.unique(first, return_inverse=True)
            # dense blocks need every member to depend on the same consecutive rows row0 .. row0 + k - 1
            k = int(sizes[0])
            cons = bool((sizes == k).all()) and all(
                np.array_equal(self.rows[self.ptr[:-1] + j], first + j) for j in range(k))
            if cons and len(self.group_row0) <= 4096:
                self.vgroup[self.slaved] = gid
                self.group_size = k
            if cons and k == 4:
                # to_x's kernel for 4 consecutive rows a vertex (_apply4); rows of x not slaved are copied from z
                self._row0 = np.ascontiguousarray(first, np.int64)
                self._w4 = np.ascontiguousarray(self.w.reshape(-1, 4))
                self._own = np.nonzero(~self.is_slaved[:self.n_x])[0]
        self._table = None
        self._recent = []   # positions(): the last POSITIONS_KEPT (copy of z, W z) pairs, newest last

    def body_arrays(self):
        """(body (n_x,) int64 of each slaved vertex, -1 otherwise; its weights (n_x, 4) over the body's rows;
        number of bodies) for the contact kernels that assemble straight into body blocks
        (contact/body_blocks.py), or None when the map has no such groups."""
        if self.group_size != 4:
            return None
        if getattr(self, "_body_arrays", None) is None:
            grp = np.ascontiguousarray(self.vgroup[:self.n_x])
            wts = np.zeros((self.n_x, 4))
            s = np.nonzero(grp >= 0)[0]
            for j in range(4):
                wts[s, j] = self.vw[self.vptr[s] + j]
            self._body_arrays = (grp, wts, len(self.group_row0))
        return self._body_arrays

    def emit_group_blocks(self, blk: np.ndarray, ga: np.ndarray, gb: np.ndarray) -> tuple:
        """COO triplets (scalar DOF indices of z) of dense 12 x 12 blocks between bodies ga[q] and gb[q] (row
        3 i + a: the body's row i, coordinate a)."""
        m = blk.shape[0] * 9 * self.group_size ** 2
        ro = np.empty(m, np.int64)
        co = np.empty(m, np.int64)
        vo = np.empty(m)
        _emit_blocks(ro, co, vo, 0, np.ascontiguousarray(blk), np.ascontiguousarray(ga, np.int64),
                     np.ascontiguousarray(gb, np.int64), self.group_row0, self.group_size)
        return ro, co, vo

    @classmethod
    def identity_map(cls, n: int) -> "DofMap":
        return cls(n, n)

    POSITIONS_KEPT = 3
    """positions() keeps this many last results: a Newton iteration maps its iterate, its trial point and the step
    (the CCD, the line search, the energies, the gradient and Hessian of the accepted point) ~10 times."""

    def to_x(self, z: np.ndarray) -> np.ndarray:
        """Vertex positions (n_x, 3) (or a displacement: the map is linear) of z (n_z, 3), a new array."""
        if self.identity:
            return z
        if getattr(self, "_w4", None) is not None and z.dtype == np.float64 and z.shape == (self.n_z, 3):
            x = np.empty((self.n_x, 3))
            if self._own.size:
                x[self._own] = z[self._own]
            _apply4(np.ascontiguousarray(z), self.slaved, self._row0, self._w4, x)
            return x
        x = np.array(z[:self.n_x])
        _apply(z, self.slaved, self.ptr, self.rows, self.w, x)
        return x

    def positions(self, z: np.ndarray) -> np.ndarray:
        """to_x(z) for a caller that does not modify the result: the last POSITIONS_KEPT results are kept, keyed by
        a copy of z, and one of them is returned again (the same array object) for a z of the same values. Newton's
        objective maps the same iterate, trial point and step several times an iteration (integrator.py); each
        mapping of the 100-cube Mesh pile's 101,600 vertices costs ~0.6 ms, a comparison ~0.1 ms. Keys are compared
        byte for byte, so a hit returns exactly what to_x(z) would."""
        if self.identity:
            return z
        z = np.asarray(z)
        for k in range(len(self._recent) - 1, -1, -1):
            kz, kx = self._recent[k]
            if kz.shape == z.shape and z.dtype == np.float64 and _same(kz.view(np.int64),
                                                                        np.ascontiguousarray(z).view(np.int64)):
                return kx
        x = self.to_x(z)
        self._recent = (self._recent + [(np.array(z, np.float64), x)])[-self.POSITIONS_KEPT:]
        return x

    def sync(self, z: np.ndarray) -> np.ndarray:
        """z with its slaved rows set to W z (in place; returned)."""
        if not self.identity:
            _apply(z, self.slaved, self.ptr, self.rows, self.w, z)
        return z

    def pull_gradient(self, g_x: np.ndarray) -> np.ndarray:
        """W^T g: g_x (3 n_x,) -> (3 n_z,)."""
        if self.identity:
            return g_x
        g = np.zeros((self.n_z, 3))
        g[:self.n_x] = np.asarray(g_x).reshape(-1, 3)
        _pull_gradient(g, self.slaved, self.ptr, self.rows, self.w)
        return g.ravel()

    def pull_coo(self, rows, cols, vals) -> tuple:
        """W^T H W of COO triplets (scalar DOF indices 3 i + c); duplicates are left for the CSR sum. Entries
        between two affine bodies' vertices are summed into one dense 12 x 12 block per body pair first
        (J^T H J per pair of bodies, ``_pull_coo_grouped``)."""
        if self.identity or len(rows) == 0:
            return rows, cols, vals
        r = np.asarray(rows, np.int64)
        c = np.asarray(cols, np.int64)
        v = np.asarray(vals, np.float64)
        if self.group_size == 0 or not self.GROUPED:
            return _pull_coo(r, c, v, self.vptr, self.vrows, self.vw)
        G = len(self.group_row0)
        if self._table is None:
            self._table = -np.ones((G, G), np.int64)
        ro, co, vo, blk, ga, gb, k = _pull_coo_grouped(r, c, v, self.vptr, self.vrows, self.vw, self.vgroup,
                                                       self.group_size, self._table)
        k = _emit_blocks(ro, co, vo, k, blk, ga, gb, self.group_row0, self.group_size)
        return ro[:k], co[:k], vo[:k]
