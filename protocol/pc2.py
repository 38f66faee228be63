"""PC2 point caches (the format Blender's Mesh Cache modifier reads), in pure numpy.

Layout, all little-endian: 12 bytes ``b"POINTCACHE2\\0"``, int32 version (1), int32 number of
points, float32 start frame, float32 sample rate (frames between samples), int32 number of
samples, then float32 x, y, z for every point of every sample (sample-major).
Both the server (bake CLI) and the Blender add-on write these; the appending writer lets
frames be written as they arrive and keeps the header's sample count current so a partial
file is always readable.
"""
from __future__ import annotations

import os
import struct

import numpy as np

MAGIC = b"POINTCACHE2\0"
HEADER = struct.Struct("<12siiffi")
HEADER_SIZE = HEADER.size  # 32 bytes
_COUNT_OFFSET = 28  # byte offset of numSamples


class PC2Writer:
    """Append frames to a .pc2 file one at a time.

    >>> w = PC2Writer(path, n_points, start_frame=1.0); w.append(xyz); w.close()

    The header's sample count is rewritten after every append, so a reader sees every
    complete frame even while the bake is running. Use as a context manager.
    """

    def __init__(self, path: str, n_points: int, start_frame: float, sample_rate: float = 1.0):
        if n_points < 0:
            raise ValueError(f"n_points must be >= 0, got {n_points}")
        self.path = os.fspath(path)
        self.n_points = int(n_points)
        self.start_frame = float(start_frame)
        self.sample_rate = float(sample_rate)
        self.n_samples = 0
        self._f = open(self.path, "wb")
        self._f.write(HEADER.pack(MAGIC, 1, self.n_points, self.start_frame, self.sample_rate, 0))
        self._f.flush()

    def append(self, positions: np.ndarray) -> None:
        """Write one sample: (n_points, 3) positions (converted to little-endian float32)."""
        a = np.ascontiguousarray(positions, dtype="<f4")
        if a.shape != (self.n_points, 3):
            raise ValueError(f"expected positions of shape ({self.n_points}, 3), got {a.shape}")
        self._f.seek(0, os.SEEK_END)
        self._f.write(memoryview(a).cast("B"))
        self.n_samples += 1
        self._f.seek(_COUNT_OFFSET)
        self._f.write(struct.pack("<i", self.n_samples))
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> "PC2Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_pc2(path: str, frames: np.ndarray, start_frame: float, sample_rate: float = 1.0) -> None:
    """Write a whole cache at once: ``frames`` is (F, n, 3) (stored as float32)."""
    a = np.ascontiguousarray(frames, dtype="<f4")
    if a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"frames must have shape (F, n, 3), got {a.shape}")
    with open(os.fspath(path), "wb") as f:
        f.write(HEADER.pack(MAGIC, 1, a.shape[1], float(start_frame), float(sample_rate), a.shape[0]))
        f.write(memoryview(a).cast("B"))


def read_pc2(path: str) -> tuple:
    """Read a cache: returns ``(frames (F, n, 3) float32, start_frame, sample_rate)``.

    Raises ValueError for a wrong magic/version or a file shorter than its header says.
    """
    with open(os.fspath(path), "rb") as f:
        head = f.read(HEADER_SIZE)
        if len(head) != HEADER_SIZE:
            raise ValueError(f"{path}: too short for a PC2 header")
        magic, version, n, start, rate, count = HEADER.unpack(head)
        if magic != MAGIC:
            raise ValueError(f"{path}: not a PC2 file (magic {magic!r})")
        if version != 1:
            raise ValueError(f"{path}: unsupported PC2 version {version}")
        if n < 0 or count < 0:
            raise ValueError(f"{path}: negative point or sample count")
        data = f.read(n * count * 12)
    if len(data) != n * count * 12:
        raise ValueError(f"{path}: truncated, header says {count} samples of {n} points")
    arr = np.frombuffer(data, dtype="<f4").reshape(count, n, 3).astype(np.float32, copy=True)
    return arr, float(start), float(rate)
