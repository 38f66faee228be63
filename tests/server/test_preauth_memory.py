"""Issue 20 item 1: a peer without the secret cannot make the server hold a big frame.

ZeroMQ reads each frame's length first and, above the socket's MAXMSGSIZE (the server's
``--max-message-mb``, never more than it), drops the connection before storing a byte of the
frame. Measured on a real server process over real loopback sockets, plain and CurveZMQ: the
server's peak resident memory (``VmHWM`` in /proc, which no sampling can miss) grows by far less
than the frame offered. What remains (documented in docs/reliability.md): ZeroMQ does not bound
the number of frames of one message, each of at most the limit, held until the message is whole.
"""
import numpy as np
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from protocol import Client, Error, keys
from protocol.messages import decode_message

MB = 1024 * 1024
SECRET = "preauth memory test secret"


def _vm(pid: int, key: str) -> int:
    """``VmRSS`` or ``VmHWM`` (peak resident memory) of a process, bytes (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def _peer(address: str, server_key: bytes = None):
    """A DEALER that never says Hello, with a monitor of its disconnects: (context, socket, monitor)."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    if server_key is not None:
        s.curve_publickey, s.curve_secretkey = zmq.curve_keypair()
        s.curve_serverkey = server_key
    mon = s.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    s.connect(address)
    return ctx, s, mon


def _close(ctx, s, mon):
    s.disable_monitor()
    mon.close(0)
    s.close(0)
    ctx.term()


def _offer_and_expect_drop(address: str, frames: list, server_key: bytes = None) -> None:
    ctx, s, mon = _peer(address, server_key)
    try:
        s.send_multipart(frames, copy=False)
        assert mon.poll(60000), "the server kept the connection of a frame over its limit"
        assert recv_monitor_message(mon)["event"] == zmq.EVENT_DISCONNECTED
        assert not s.poll(200)          # no reply: the frame was never handed to the server
    finally:
        _close(ctx, s, mon)


@pytest.fixture
def curve_keys(tmp_path):
    public, secret = keys.generate(str(tmp_path / "keys"))
    return public, secret


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "curve"])
def test_a_frame_over_the_limit_before_hello_is_dropped_unstored(server_factory, tmp_path, curve_keys, encrypted):
    extra, server_key = (), None
    if encrypted:
        extra = ("--key-file", curve_keys[1])
        server_key = keys.read_public_key(curve_keys[0])
    srv = server_factory("--max-message-mb", "8", *extra,
                         env={"CLEARANCE_SECRET": SECRET, "CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    peak0 = _vm(srv.proc.pid, "VmHWM")
    big = memoryview(np.zeros(256 * MB, np.uint8))      # calloc'ed: costs this test no memory either
    for _ in range(3):                                  # 768 MiB offered against 8 MiB
        _offer_and_expect_drop(srv.address, [big], server_key)
    grown = _vm(srv.proc.pid, "VmHWM") - peak0
    assert grown < 48 * MB, f"the server's peak memory grew by {grown / MB:.0f} MiB"
    assert srv.proc.poll() is None


def test_the_default_limit_drops_a_1_gib_frame_before_hello(server_factory, tmp_path):
    """The issue's attack against a server with default limits: 1 GiB in one frame, before Hello."""
    srv = server_factory(env={"CLEARANCE_SECRET": SECRET, "CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    peak0 = _vm(srv.proc.pid, "VmHWM")
    _offer_and_expect_drop(srv.address, [memoryview(np.zeros(1024 * MB, np.uint8))])
    grown = _vm(srv.proc.pid, "VmHWM") - peak0
    assert grown < 48 * MB, f"the server's peak memory grew by {grown / MB:.0f} MiB"


def test_frames_under_the_limit_are_refused_whole_after_the_message(server_factory, tmp_path):
    """The residual: frames each under the limit reach the server as one message, which the
    pre-Hello rule then refuses (code auth) without decoding it; the right client is served."""
    srv = server_factory("--max-message-mb", "8",
                         env={"CLEARANCE_SECRET": SECRET, "CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    ctx, s, mon = _peer(srv.address)
    try:
        part = memoryview(np.zeros(4 * MB, np.uint8))
        s.send_multipart([b"\x80"] + [part] * 4, copy=False)     # 16 MiB in 4 frames of 4 MiB
        assert s.poll(60000), "no reply"
        err = decode_message(s.recv_multipart())[0]
        assert isinstance(err, Error) and err.code == "auth" and "send Hello first" in err.message
    finally:
        _close(ctx, s, mon)
    with Client(srv.address, secret=SECRET, timeout=30.0) as c:
        c.connect()
        c.ping()
