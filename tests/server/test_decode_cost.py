"""Issue 20 item 2: what decoding a header costs is bounded by the limits, not by its size.

A header of millions of one-byte objects (empty maps, small integers in lists) used to be
built whole and then walked, building a path string per element, before an unknown field was
refused: 30-46 s of a frozen server and gigabytes. Now msgpack refuses any one list or map over
``Limits.max_items`` from its length prefix, hooks count the entries of every finished list and
map and stop the decoder past ``max_items`` in all, and unknown fields are refused before the
body is walked. Real server process, real sockets; memory from /proc (peak), no timing.
"""
import msgpack
import pytest
import zmq

from protocol import Client, Error, Hello, Pong, Ping, Welcome
from protocol.codec import DEFAULT_LIMITS, decode
from protocol.errors import ProtocolError
from protocol.messages import decode_message, encode_message

MB = 1024 * 1024


def _vm(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


def _header(body: dict, msg_type: str = "status") -> bytes:
    return msgpack.packb({"id": "c" * 32, "type": msg_type, "version": [1, 0], "parent": None, "timestamp": 0.0,
                          "body": body, "arrays": []}, use_bin_type=True)


@pytest.fixture
def session(server):
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(server.address)
    s.send_multipart(encode_message(Hello("decode cost", "0")))
    assert s.poll(10000) and isinstance(decode_message(s.recv_multipart())[0], Welcome)
    yield s
    s.close(0)
    ctx.term()


def _reply(sock):
    assert sock.poll(120000), "no reply"
    return decode_message(sock.recv_multipart())[0]


@pytest.mark.parametrize("body, what", [
    ({"job_id": "j", "x": [{}] * (15 * MB)}, "15 MiB of empty maps"),
    ({"job_id": "j", "x": [[1] * 1000] * (15 * MB // 1000)}, "15 MiB of small integers"),
    ({"job_id": [[[{}] * 64] * 64] * 3000}, "a known field of 12 million nested maps"),
], ids=["empty-maps", "small-ints", "nested"])
def test_a_header_of_many_small_objects_is_refused_with_bounded_memory(server, session, body, what):
    head = _header(body)
    assert len(head) < DEFAULT_LIMITS.max_header_bytes
    peak0 = _vm(server.proc.pid, "VmHWM")
    session.send_multipart([head])
    err = _reply(session)
    assert isinstance(err, Error) and err.code == "protocol" and err.field == "header", err
    assert f"{DEFAULT_LIMITS.max_items} list and map entries" in err.message
    grown = _vm(server.proc.pid, "VmHWM") - peak0
    # the header itself (15 MiB, received and copied once) plus at most ~2 million small objects
    assert grown < 400 * MB, f"{what}: the server's peak memory grew by {grown / MB:.0f} MiB"
    ping = Ping()
    session.send_multipart(encode_message(ping))
    assert isinstance(_reply(session), Pong)


def test_an_unknown_field_is_refused_before_the_body_is_walked(server, session):
    session.send_multipart([_header({"job_id": "j", "junk": [[0] * 100] * 5000})])
    err = _reply(session)
    assert err.code == "protocol" and err.field == "junk" and "unknown field" in err.message


def test_the_decoder_counts_entries_and_lengths():
    """In process: one list over the bound is refused from its length prefix, and many small
    lists add up; a real Submit stays far below both."""
    with pytest.raises(ProtocolError, match="over the receiver's limit") as e:
        decode([_header({"job_id": "j", "x": [0] * (DEFAULT_LIMITS.max_items + 1)})])
    assert e.value.field == "header"
    with pytest.raises(ProtocolError, match="list and map entries"):
        decode([_header({"job_id": "j", "x": [[0] * 1000] * 1100})])
    with pytest.raises(ProtocolError, match="bytes per string"):
        decode([_header({"job_id": "x" * (DEFAULT_LIMITS.max_str_bytes + 1)})])
    from scenes import make_scene
    from protocol.messages import Submit
    msg, _ = decode_message(encode_message(Submit(make_scene(), "/tmp/x")))
    assert isinstance(msg, Submit)


def test_a_client_is_served_after_a_refused_header(server, session):
    session.send_multipart([_header({"job_id": "j", "x": [{}] * (2 * MB)})])
    assert _reply(session).code == "protocol"
    with Client(server.address, timeout=30.0) as c:
        c.connect()
        c.ping()
