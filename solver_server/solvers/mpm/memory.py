"""Memory estimate made *before* allocating, so that an oversized bake is refused with numbers
instead of dying in the allocator.

Bytes per particle: x, v (2 x 24), C, F, tau (3 x 72), plastic state, mass, rest volume (3 x 8),
material index (4), binning key and order (2 x 8). Bytes per grid node: mass and momentum (32),
plus, with colliders, the collider field and its scratch (125). The limit is
``CLEARANCE_MPM_MEMORY_LIMIT`` (bytes, environment) or 8 GiB.
"""
from __future__ import annotations

import os

BYTES_PER_PARTICLE = 2 * 24 + 3 * 72 + 3 * 8 + 4 + 2 * 8
BYTES_PER_NODE = 32
BYTES_PER_COLLIDER_NODE = 125
DEFAULT_LIMIT = 8 * 1024 ** 3


def memory_limit() -> int:
    """The byte limit in force."""
    return int(float(os.environ.get("CLEARANCE_MPM_MEMORY_LIMIT", DEFAULT_LIMIT)))


def estimate_bytes(n_particles: int, n_nodes: int, with_colliders: bool) -> int:
    """Bytes the solver will hold for n particles on a grid of n nodes."""
    per_node = BYTES_PER_NODE + (BYTES_PER_COLLIDER_NODE if with_colliders else 0)
    return n_particles * BYTES_PER_PARTICLE + n_nodes * per_node


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
