"""The server's handling of the protocol, in process over inproc and tcp: malformed messages
get an Error naming the field and the server keeps serving; versions; handshake; secret."""
import threading
import uuid

import msgpack
import numpy as np
import pytest
import zmq

from protocol import (Client, Error, Ping, Pong, RemoteError, ServerUnreachable, VersionMismatch,
                      decode_message, encode, encode_message)
from protocol.version import PROTOCOL_VERSION, PROTOCOL_VERSION_STR
from solver_server.runtime.security import check_bind, is_loopback
from solver_server.runtime.server import Server


@pytest.fixture
def ctx():
    c = zmq.Context()
    yield c
    c.term()


def start_server(ctx, transport, **kw):
    bind = f"inproc://srv-{uuid.uuid4().hex}" if transport == "inproc" else "tcp://127.0.0.1:0"
    srv = Server(bind, context=ctx, **kw)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    return srv, t


@pytest.fixture(params=["inproc", "tcp"])
def server(request, ctx):
    srv, t = start_server(ctx, request.param)
    yield srv
    srv.stop()
    t.join(5)


def _raw(ctx, srv):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(srv.address)
    return s


def _reply(sock):
    assert sock.poll(5000), "no reply"
    msg, _ = decode_message(sock.recv_multipart())
    return msg


def _handshake(sock):
    from protocol import Hello, Welcome
    sock.send_multipart(encode_message(Hello("raw", "0")))
    assert isinstance(_reply(sock), Welcome)


@pytest.mark.parametrize("frames, field", [
    ([b"\xc1garbage"], "header"),
    ([msgpack.packb({"id": "x"})], "type"),
    (encode("teleport", {}), "type"),
    (encode("ping", {"extra": 1}), "extra"),
    (encode("status", {}), "job_id"),
    (encode("status", {"job_id": 7}), "job_id"),
    (encode("cancel", {"job_id": "j"})[:1] + [b"x"], "arrays"),
    (encode("frame", {"job_id": "j", "frame": 1, "names": ["a"], "positions": [np.zeros((4, 3), np.float32)],
                      "stats": {}})[:1] + [b"\0" * 40], "arrays[0]"),
    (encode("frame", {"job_id": "j", "frame": 1, "names": ["a"], "positions": [np.zeros((4, 3), np.float64)],
                      "stats": {}}), "positions[0]"),
])
def test_malformed_message_gets_an_error_and_the_server_keeps_serving(ctx, server, frames, field):
    s = _raw(ctx, server)
    try:
        _handshake(s)
        s.send_multipart(frames)
        err = _reply(s)
        assert isinstance(err, Error) and err.code == "protocol" and err.field == field, err
        ping = Ping()
        s.send_multipart(encode_message(ping))
        pong = _reply(s)
        assert isinstance(pong, Pong) and pong.parent == ping.id
    finally:
        s.close(0)


def test_oversized_array_is_refused(ctx):
    from protocol import Limits
    srv, t = start_server(ctx, "tcp", limits=Limits(max_array_bytes=1024))
    s = _raw(ctx, srv)
    try:
        _handshake(s)
        s.send_multipart(encode("frame", {"job_id": "j", "frame": 1, "names": ["a"],
                                          "positions": [np.zeros((100, 3), np.float32)], "stats": {}}))
        err = _reply(s)
        assert err.code == "protocol" and err.field == "arrays[0].shape"
        s.send_multipart(encode_message(Ping()))
        assert isinstance(_reply(s), Pong)
    finally:
        s.close(0)
        srv.stop()
        t.join(5)


def test_hello_is_required_before_requests(ctx, server):
    s = _raw(ctx, server)
    try:
        s.send_multipart(encode("status", {"job_id": "j"}))
        err = _reply(s)
        assert err.code == "handshake"
        s.send_multipart(encode_message(Ping()))
        assert isinstance(_reply(s), Pong)  # ping is allowed on an open server
    finally:
        s.close(0)


def test_unknown_job_and_client_only_types(ctx, server):
    from protocol import Welcome
    with Client(server.address, context=ctx) as c:
        c.connect()
        with pytest.raises(RemoteError) as e:
            c.status("nope")
        assert e.value.code == "unknown_job" and e.value.field == "job_id"
    s = _raw(ctx, server)
    try:
        _handshake(s)
        s.send_multipart(encode_message(Welcome("me", "1")))  # a server message sent by a client
        err = _reply(s)
        assert err.code == "protocol" and err.field == "type"
    finally:
        s.close(0)


def test_server_refuses_a_client_of_another_major_version(ctx, server):
    with Client(server.address, context=ctx, protocol_version=(2, 0)) as c:
        with pytest.raises(VersionMismatch) as e:
            c.connect()
        assert PROTOCOL_VERSION_STR in str(e.value) and "2.0" in str(e.value)


def test_client_refuses_a_server_of_another_major_version(ctx):
    srv, t = start_server(ctx, "inproc", protocol_version=(2, 3))
    try:
        with Client(srv.address, context=ctx) as c:
            with pytest.raises(VersionMismatch) as e:
                c.connect()
            assert "2.3" in str(e.value) and PROTOCOL_VERSION_STR in str(e.value)
    finally:
        srv.stop()
        t.join(5)


def test_minor_versions_talk(ctx, server):
    with Client(server.address, context=ctx, protocol_version=(1, 7)) as c:
        assert c.connect().protocol_version == PROTOCOL_VERSION


@pytest.mark.parametrize("given", [None, "wrong"])
def test_secured_server_refuses_wrong_or_missing_secret(ctx, given):
    srv, t = start_server(ctx, "tcp", secret="correct horse")
    try:
        with Client(srv.address, context=ctx, secret=given) as c:
            with pytest.raises(RemoteError) as e:
                c.connect()
            assert e.value.code == "auth" and e.value.field == "secret"
            with pytest.raises(RemoteError) as e:
                c.ping()
            assert e.value.code == "auth"
        with Client(srv.address, context=ctx, secret="correct horse") as c:
            c.connect()
            c.ping()                      # answered once the right secret was given
    finally:
        srv.stop()
        t.join(5)


def test_bind_rules():
    assert is_loopback("tcp://127.0.0.1:5555") and is_loopback("tcp://localhost:1") and is_loopback("tcp://[::1]:1")
    assert is_loopback("ipc:///tmp/x") and is_loopback("inproc://x")
    assert not is_loopback("tcp://0.0.0.0:5555") and not is_loopback("tcp://*:5555")
    assert not is_loopback("tcp://192.168.1.4:5555")
    with pytest.raises(ValueError, match="secret"):
        check_bind("tcp://0.0.0.0:5555", None)
    with pytest.raises(ValueError, match="without encryption"):
        check_bind("tcp://0.0.0.0:5555", "s")
    check_bind("tcp://0.0.0.0:5555", "s", encrypted=True)
    check_bind("tcp://0.0.0.0:5555", "s", plaintext=True)
    check_bind("tcp://127.0.0.1:5555", None)


def test_client_never_hangs_without_a_server(ctx):
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]  # a port nobody listens on
    with Client(f"tcp://127.0.0.1:{port}", timeout=0.3, context=ctx) as c:
        with pytest.raises(ServerUnreachable):   # raised (after its timeout), never a hang
            c.connect()
        assert c.poll(0.0) == []


def test_events_raise_on_silence(ctx, server):
    with Client(server.address, context=ctx) as c:
        c.connect()
        with pytest.raises(ServerUnreachable):
            list(c.events("no-such-job", timeout=0.3))
