"""The dense background grid over the scene's domain box and the particle binning that makes the
parallel P2G scatter race-free.

Node (i, j, k) sits at ``origin + (i, j, k) dx`` with ``origin = domain_min - (PAD - 1/2) dx``: the
nodes are staggered half a cell from the domain walls, so the wall nodes (the first ones outside the
box, at -dx/2) touch particles up to one cell above the wall; a resting body then sits about half
a cell above the ground instead of a full cell (book §29 "dx gap"). PAD = 2 keeps every quadratic
stencil inside the arrays while particles stay inside the domain box. Particles are binned by the *stencil base* node into blocks of BLOCK^3 nodes. A particle
of block b writes nodes [b BLOCK, b BLOCK + BLOCK + 1] per axis, so two blocks whose indices differ by
2 along some axis never touch the same node: blocks of one colour (parity of bx, by, bz; 8 colours)
are scattered in parallel, colours one after another. The binning is a counting sort of a particle
index array (particles themselves never move in memory, so their order stays the body's order).
Only node blocks touched by some particle are zeroed, updated and read ("active" node blocks).
In an open domain (Settings.mpm_domain "auto") particles outside the domain box are no longer on
the grid: they get the extra key ``nblocks`` and are left out of every block.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .kernels import stencil_base

PAD = 2
WALL_STAGGER = 0.5
BLOCK = 4


@dataclass(frozen=True)
class GridSpec:
    """Geometry of the background grid: origin (m), dx (m), shape (nodes per axis)."""

    origin: tuple
    dx: float
    shape: tuple
    domain_min: tuple
    domain_max: tuple

    @staticmethod
    def from_domain(domain_min, domain_max, dx: float) -> "GridSpec":
        lo = np.asarray(domain_min, float)
        hi = np.asarray(domain_max, float)
        cells = np.ceil((hi - lo) / dx - 1e-9).astype(int)
        shape = tuple(int(c) + 2 * PAD + 1 for c in cells)
        origin = tuple(float(v) for v in lo - (PAD - WALL_STAGGER) * dx)
        return GridSpec(origin, float(dx), shape, tuple(float(v) for v in lo), tuple(float(v) for v in hi))

    @property
    def n_nodes(self) -> int:
        return int(np.prod(self.shape))

    @property
    def block_shape(self) -> tuple:
        return tuple(int(math.ceil(n / BLOCK)) for n in self.shape)


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def outside(x, p, lo, hi):
    """True when particle p lies outside the domain box lo..hi (m): off the grid."""
    return (x[p, 0] < lo[0] or x[p, 0] > hi[0] or x[p, 1] < lo[1] or x[p, 1] > hi[1]
            or x[p, 2] < lo[2] or x[p, 2] > hi[2])


@njit(cache=True, fastmath=False, error_model="numpy")
def count_outside(x, lo, hi):
    """Number of particles outside the domain box lo..hi (m)."""
    n = 0
    for p in range(x.shape[0]):
        if outside(x, p, lo, hi):
            n += 1
    return n


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _block_of(x, p, origin, inv_dx, nb):
    bx = stencil_base((x[p, 0] - origin[0]) * inv_dx) // BLOCK
    by = stencil_base((x[p, 1] - origin[1]) * inv_dx) // BLOCK
    bz = stencil_base((x[p, 2] - origin[2]) * inv_dx) // BLOCK
    return (bx * nb[1] + by) * nb[2] + bz


@njit(cache=True, fastmath=False, error_model="numpy", parallel=True)
def particle_blocks(x, origin, inv_dx, nb, key, lo, hi):
    """key[p] = linear index of the block holding particle p's stencil base; nblocks for a particle
    outside the domain box lo..hi (only possible in an open domain)."""
    nblocks = nb[0] * nb[1] * nb[2]
    for p in prange(x.shape[0]):
        key[p] = nblocks if outside(x, p, lo, hi) else _block_of(x, p, origin, inv_dx, nb)


@njit(cache=True, fastmath=False, error_model="numpy")
def particle_blocks_serial(x, origin, inv_dx, nb, key, lo, hi):
    """Single-threaded particle_blocks."""
    nblocks = nb[0] * nb[1] * nb[2]
    for p in range(x.shape[0]):
        key[p] = nblocks if outside(x, p, lo, hi) else _block_of(x, p, origin, inv_dx, nb)


@njit(cache=True, fastmath=False, error_model="numpy")
def counting_sort(key, nblocks, order, start):
    """order: particle indices sorted by key; start (nblocks + 2,): range of each block in order
    (key nblocks, the particles off the grid, last)."""
    start[:] = 0
    for p in range(key.shape[0]):
        start[key[p] + 1] += 1
    for b in range(nblocks + 1):
        start[b + 1] += start[b]
    fill = start[:-1].copy()
    for p in range(key.shape[0]):
        k = key[p]
        order[fill[k]] = p
        fill[k] += 1


@njit(cache=True, fastmath=False, error_model="numpy")
def colour_lists(start, nb, colour_blocks, colour_start, node_active):
    """Group non-empty particle blocks by colour (colour_blocks, colour_start (9,)) and mark the node
    blocks they touch (each block and its +1 neighbours) in node_active (nblocks,) uint8.
    Returns the number of non-empty blocks."""
    node_active[:] = 0
    colour_start[:] = 0
    nbx, nby, nbz = nb[0], nb[1], nb[2]
    count = 0
    for c in range(8):
        colour_start[c] = count
        cx, cy, cz = (c >> 2) & 1, (c >> 1) & 1, c & 1
        for bx in range(cx, nbx, 2):
            for by in range(cy, nby, 2):
                for bz in range(cz, nbz, 2):
                    b = (bx * nby + by) * nbz + bz
                    if start[b + 1] > start[b]:
                        colour_blocks[count] = b
                        count += 1
                        for ox in range(2):
                            for oy in range(2):
                                for oz in range(2):
                                    ax, ay, az = bx + ox, by + oy, bz + oz
                                    if ax < nbx and ay < nby and az < nbz:
                                        node_active[(ax * nby + ay) * nbz + az] = 1
    colour_start[8] = count
    return count


class Binning:
    """Reusable buffers for binning n particles on a grid (see module docstring)."""

    def __init__(self, spec: GridSpec, n: int):
        self.nb = np.array(spec.block_shape, np.int64)
        self.nblocks = int(np.prod(self.nb))
        self.key = np.empty(n, np.int64)
        self.order = np.empty(n, np.int64)
        self.start = np.zeros(self.nblocks + 2, np.int64)
        self.colour_blocks = np.empty(self.nblocks, np.int64)
        self.colour_start = np.zeros(9, np.int64)
        self.node_active = np.zeros(self.nblocks, np.uint8)
        self.active_list = np.empty(0, np.int64)
        self.origin = np.array(spec.origin, float)
        self.inv_dx = 1.0 / spec.dx
        self.lo = np.array(spec.domain_min, float)
        self.hi = np.array(spec.domain_max, float)

    def update(self, x: np.ndarray, parallel: bool = True) -> None:
        """Bin particles x (n, 3) m; ``parallel`` picks the threaded key computation. Particles
        outside the domain box are left out of every block."""
        (particle_blocks if parallel else particle_blocks_serial)(x, self.origin, self.inv_dx, self.nb, self.key,
                                                                  self.lo, self.hi)
        counting_sort(self.key, self.nblocks, self.order, self.start)
        colour_lists(self.start, self.nb, self.colour_blocks, self.colour_start, self.node_active)
        self.active_list = np.flatnonzero(self.node_active).astype(np.int64)

    @property
    def nbytes(self) -> int:
        return self.key.nbytes + self.order.nbytes + 3 * self.start.nbytes
