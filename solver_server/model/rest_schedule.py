"""Keyframed Shrink: a cloth's rest size followed in time (Body.shrink_samples / shrink_weights, protocol 1.6).

Vertex i of a cloth with keyed Shrink s(t) (sampled once per frame, linear between frames) wants the rest size
c_i(t) = 1 - w_i s(t) (w_i its Shrink Group weight, 1 without a group); a membrane triangle takes the mean of
its three vertices', c_t(t) = 1 - s(t) mean(w), and its rest shape is the modelled one scaled by c_t:
D_m^-1 -> D_m^-1 / c_t, rest area A -> c_t^2 A (as the fixed Shrink of model/system.py). The solver sets the
triangles' rest shape to the one of each step's end time before solving it (the membrane's element arrays
are updated in place; their sparsity never changes). Bending keeps its flat rest state; the mass stays that of
the mesh as modelled. Units: SI.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def sample(a: np.ndarray, f: float) -> float:
    """Linear interpolation of per-frame samples ``a`` (F,) at fractional frame index f (clamped)."""
    last = a.shape[0] - 1
    f = min(max(f, 0.0), float(last))
    i0 = int(np.floor(f))
    i1 = min(i0 + 1, last)
    t = f - i0
    return float((1.0 - t) * a[i0] + t * a[i1])


@dataclass
class ShrinkTrack:
    """One cloth's keyed Shrink: its triangles' rows in ElasticTerms.tris and their unshrunk rest shape."""

    rows: np.ndarray       # (T,) int64 rows of the body's triangles in the membrane arrays
    dm_inv: np.ndarray     # (T, 2, 2) 1/m rest shape inverse, other maps applied, no shrink
    area: np.ndarray       # (T,) m^2 rest area, no shrink
    weight: np.ndarray     # (T,) mean Shrink weight of each triangle's vertices
    samples: np.ndarray    # (F,) Shrink per frame


class RestSchedule:
    """The keyed-Shrink tracks of a System; :meth:`apply` sets the rest shape of a (fractional) frame index."""

    def __init__(self, tracks: list):
        self.tracks = list(tracks)

    def scales(self, frame_index: float) -> list:
        """(T,) rest-size scale c_t of each track's triangles at fractional frame index ``frame_index``."""
        return [1.0 - sample(t.samples, frame_index) * t.weight for t in self.tracks]

    def apply(self, elastic, frame_index: float) -> None:
        """Write the rest shape at ``frame_index`` (0 = frame_start) into ``elastic``'s membrane arrays."""
        for t, c in zip(self.tracks, self.scales(frame_index)):
            elastic.tri_Dm_inv[t.rows] = t.dm_inv / c[:, None, None]
            elastic.tri_area[t.rows] = t.area * c * c
