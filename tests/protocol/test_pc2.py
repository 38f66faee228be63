"""PC2 writer/reader against the byte layout of the format (header decoded by hand)."""
import struct

import numpy as np
import pytest

from protocol.pc2 import PC2Writer, read_pc2, write_pc2


def _header(path):
    with open(path, "rb") as f:
        raw = f.read()
    magic = raw[:12]
    version, n, start, rate, count = struct.unpack("<iiffi", raw[12:32])
    return raw, magic, version, n, start, rate, count


def test_write_read_round_trip_and_byte_layout(tmp_path):
    rng = np.random.default_rng(1)
    frames = rng.normal(size=(4, 9, 3)).astype(np.float32)
    p = tmp_path / "a.pc2"
    write_pc2(p, frames, start_frame=7, sample_rate=0.5)
    raw, magic, version, n, start, rate, count = _header(p)
    assert magic == b"POINTCACHE2\0"
    assert (version, n, start, rate, count) == (1, 9, 7.0, 0.5, 4)
    assert len(raw) == 32 + 4 * 9 * 3 * 4
    # sample-major, then point, then x y z, little-endian float32
    x = struct.unpack_from("<f", raw, 32 + (2 * 9 + 5) * 12 + 4)[0]
    assert x == frames[2, 5, 1]
    back, s, r = read_pc2(p)
    assert (s, r) == (7.0, 0.5)
    assert back.dtype == np.float32 and np.array_equal(back, frames)


def test_appending_writer_keeps_the_header_current(tmp_path):
    rng = np.random.default_rng(2)
    frames = rng.normal(size=(5, 6, 3))
    p = tmp_path / "b.pc2"
    with PC2Writer(p, 6, start_frame=-2) as w:
        for k in range(5):
            w.append(frames[k])
            back, start, rate = read_pc2(p)  # readable while being written
            assert back.shape == (k + 1, 6, 3) and start == -2.0 and rate == 1.0
            assert _header(p)[-1] == k + 1
    back, _, _ = read_pc2(p)
    assert np.array_equal(back, frames.astype(np.float32))


def test_writer_refuses_wrong_shape(tmp_path):
    with PC2Writer(tmp_path / "d.pc2", 4, 1) as w:
        with pytest.raises(ValueError):
            w.append(np.zeros((5, 3)))


def test_reader_refuses_truncated_and_foreign_files(tmp_path):
    p = tmp_path / "e.pc2"
    write_pc2(p, np.zeros((3, 4, 3), np.float32), 1)
    data = p.read_bytes()
    p.write_bytes(data[:-1])
    with pytest.raises(ValueError, match="truncated"):
        read_pc2(p)
    p.write_bytes(b"POINTCACHE3\0" + data[12:])
    with pytest.raises(ValueError, match="not a PC2"):
        read_pc2(p)
