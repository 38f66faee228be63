"""Protocol throughput: 1,000,000-vertex float32 frames over tcp loopback through the real
codec (encode, send, receive, decode), against a plain in-process numpy copy of the same bytes.

    python -m benchmarks protocol [vertices=N] [frames=F]      (--quick: 10 frames instead of 30)

Target (docs/protocol.md): wire / memcpy ratio >= 0.3.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import zmq

from protocol.messages import Frame, decode_message, encode_message

from .report import Table

TITLE = "Protocol throughput: 1,000,000-vertex float32 frames over tcp loopback vs a memory copy"


def _wire(positions: np.ndarray, n_frames: int) -> float:
    """Seconds to stream ``n_frames`` Frame messages DEALER -> ROUTER over tcp loopback."""
    ctx = zmq.Context()
    rx = ctx.socket(zmq.ROUTER)
    rx.setsockopt(zmq.RCVHWM, 0)
    port = rx.bind_to_random_port("tcp://127.0.0.1")
    tx = ctx.socket(zmq.DEALER)
    tx.setsockopt(zmq.SNDHWM, 0)
    tx.connect(f"tcp://127.0.0.1:{port}")
    tx.send_multipart(encode_message(Frame("warm", 0, ("a",), [positions[:10]])))
    rx.recv_multipart()

    def send() -> None:
        for k in range(n_frames):
            tx.send_multipart(encode_message(Frame("bench", k, ("body",), [positions])), copy=False)

    checksum = 0.0
    t0 = time.perf_counter()
    th = threading.Thread(target=send)
    th.start()
    for k in range(n_frames):
        frames = rx.recv_multipart(copy=False)
        msg, _ = decode_message(frames[1:])
        assert msg.frame == k and msg.positions[0].shape == positions.shape
        checksum += float(msg.positions[0][-1, 2])
    elapsed = time.perf_counter() - t0
    th.join()
    assert checksum == float(positions[-1, 2]) * n_frames
    tx.close(0)
    rx.close(0)
    ctx.term()
    return elapsed


def _memcpy(positions: np.ndarray, n_frames: int) -> float:
    dst = np.empty_like(positions)
    np.copyto(dst, positions)
    t0 = time.perf_counter()
    for _ in range(n_frames):
        np.copyto(dst, positions)
    return time.perf_counter() - t0


def run(vertices: int = 1_000_000, frames: int = 30, repeats: int = 3) -> dict:
    """Measure and return GB/s of the wire path and of a memory copy, and their ratio (best of ``repeats``)."""
    positions = np.random.default_rng(0).normal(size=(vertices, 3)).astype(np.float32)
    nbytes = positions.nbytes * frames
    wire = min(_wire(positions, frames) for _ in range(repeats))
    copy = min(_memcpy(positions, frames) for _ in range(repeats))
    res = {"vertices": vertices, "frames": frames, "frame_mb": positions.nbytes / 1e6,
           "wire_gb_s": nbytes / wire / 1e9, "memcpy_gb_s": nbytes / copy / 1e9,
           "wire_ms_per_frame": 1e3 * wire / frames}
    res["ratio"] = res["wire_gb_s"] / res["memcpy_gb_s"]
    return res


def section(quick: bool = False, vertices: int = 1_000_000, frames: int = 30) -> list:
    res = run(vertices, 10 if quick else frames)
    t = Table(["path", "GB/s", "ms / frame"], numeric=[False, True, True])
    t.add(f"tcp loopback, codec encode+send+recv+decode ({res['vertices']:,} vertices, {res['frame_mb']:.1f} MB)",
          f"{res['wire_gb_s']:.2f}", f"{res['wire_ms_per_frame']:.2f}")
    t.add("numpy copy of the same bytes", f"{res['memcpy_gb_s']:.2f}",
          f"{1e3 * res['frame_mb'] / 1e3 / res['memcpy_gb_s']:.2f}")
    t.add("ratio (target >= 0.3)", f"{res['ratio']:.2f}", "")
    return [t]
