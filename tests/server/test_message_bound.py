"""The per-message memory bound (issue 8 item 5): a message whose declared arrays exceed the
server's ``--max-message-mb`` is refused from its header, with an error naming the limit, and
the connection goes on; a frame bigger than the limit is refused by ZeroMQ before it is
stored (the server's memory does not grow). A real server process on tcp loopback."""
import os
import uuid

import msgpack
import numpy as np
import pytest
import zmq

from protocol import Error, Hello, Ping, Pong, Welcome, encode
from protocol.messages import decode_message, encode_message

MB = 1024 * 1024


def _rss(pid: int) -> int:
    """Resident memory of a process, bytes (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@pytest.fixture
def bounded(server_factory, tmp_path):
    """A server that takes at most 1 MiB per message (and per array)."""
    return server_factory("--max-message-mb", "1", "--max-array-mb", "1",
                          env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})


@pytest.fixture
def peer(bounded):
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(bounded.address)
    s.send_multipart(encode_message(Hello("bound test", "0")))
    assert isinstance(_reply(s), Welcome)
    yield s
    s.close(0)
    ctx.term()


def _reply(sock, timeout=10.0):
    assert sock.poll(int(timeout * 1000)), "no reply"
    return decode_message(sock.recv_multipart())[0]


def _ping_survives(sock):
    ping = Ping()
    sock.send_multipart(encode_message(ping))
    pong = _reply(sock)
    assert isinstance(pong, Pong) and pong.parent == ping.id   # same connection, same session


def test_arrays_over_the_message_limit_are_refused_and_the_connection_goes_on(peer):
    mid = uuid.uuid4().hex
    parts = {f"a{i}": np.zeros(400 * 1024 // 8, np.float64) for i in range(3)}   # 3 x 400 KiB: each fits
    peer.send_multipart(encode("status", {"job_id": "j", **parts}, msg_id=mid))
    err = _reply(peer)
    assert isinstance(err, Error) and err.code == "protocol" and err.field == "arrays" and err.parent == mid
    assert f"limit of {MB} bytes per message" in err.message and "declares 12" in err.message
    _ping_survives(peer)


def test_a_header_declaring_more_than_the_limit_is_refused_whatever_its_frames_hold(peer):
    mid = uuid.uuid4().hex
    head = msgpack.packb({"id": mid, "type": "status", "version": [1, 0], "parent": None, "timestamp": 0.0,
                          "body": {"job_id": "j", "a": msgpack.ExtType(1, b"\0\0\0\0"),
                                   "b": msgpack.ExtType(1, b"\1\0\0\0")},
                          "arrays": [{"dtype": "<f8", "shape": [100_000]}, {"dtype": "<f8", "shape": [40_000, 3]}]},
                         use_bin_type=True)
    peer.send_multipart([head, b"", b""])          # 1.76 MB declared (each array fits), nothing sent
    err = _reply(peer)
    assert err.code == "protocol" and err.field == "arrays" and "declares 1760" in err.message
    _ping_survives(peer)


def test_frames_over_the_limit_never_reach_the_servers_memory(bounded, peer):
    """ZeroMQ reads a frame's length first: the server drops the sender's connection (seen by the
    sender as a disconnect, with no reply) without storing the frame, and its memory stays flat."""
    from zmq.utils.monitor import recv_monitor_message
    big = np.ones(8 * MB, np.uint8)                    # 8 MiB frames against a 1 MiB limit
    before = _rss(bounded.proc.pid)
    ctx = zmq.Context()
    try:
        for _ in range(20):                            # 160 MiB offered in all
            s = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            mon = s.get_monitor_socket(zmq.EVENT_DISCONNECTED)
            s.connect(bounded.address)
            s.send_multipart(encode_message(Hello("big", "0")))
            assert isinstance(_reply(s), Welcome)
            s.send_multipart(encode("status", {"job_id": "j", "x": big}))
            assert mon.poll(10000), "the server kept the connection of a frame over its limit"
            assert recv_monitor_message(mon)["event"] == zmq.EVENT_DISCONNECTED
            assert not s.poll(200)                     # no reply: the message was never handed to the server
            s.disable_monitor()
            mon.close(0)
            s.close(0)
    finally:
        ctx.term()
    _ping_survives(peer)                               # a good client is still served ...
    grown = _rss(bounded.proc.pid) - before
    assert grown < 40 * MB, f"server memory grew by {grown / MB:.0f} MiB"   # ... and nothing was stored


def test_limits_must_be_positive(server_factory):
    with pytest.raises(RuntimeError, match="must be positive"):
        server_factory("--max-message-mb", "0")


def test_a_client_is_told_when_the_server_drops_its_oversized_frame(bounded, tmp_path):
    from protocol import Client, ServerUnreachable
    from scenes import make_scene
    scene = make_scene(n_frames=2, n_vertices=200_000)        # 4.8 MB vertex arrays against 1 MiB
    with Client(bounded.address, timeout=10.0) as c:
        c.connect()
        with pytest.raises(ServerUnreachable, match="lost the connection.*--max-message-mb"):
            c.submit(scene, str(tmp_path / "cache"))
        c.connect()                                            # the same client reconnects and is served
        c.ping()
