"""Envelope and array framing: round trips over real sockets and every kind of malformed input."""
import uuid

import msgpack
import numpy as np
import pytest
import zmq

from protocol import (Accepted, Cancel, Done, Error, Frame, Hello, Limits, Ping, Pong, Progress, ProtocolError, Status,
                      StatusReply, Submit, Welcome, decode, decode_message, encode, encode_message)
from protocol.messages import MESSAGE_TYPES
from protocol.version import PROTOCOL_VERSION
from scenes import assert_deep_equal, make_scene


def every_message():
    rng = np.random.default_rng(3)
    pos = [rng.normal(size=(5, 3)).astype(np.float32), np.zeros((0, 3), np.float32)]
    return [
        Hello("pytest", "0.0.1", (1, 0), "secret"),
        Hello("pytest", "0.0.1"),
        Welcome("srv", "0.1", (1, 0), ("frames", "cancel"), ("none", "ipc")),
        Submit(make_scene(), "/tmp/cache", True),
        Accepted("job1"),
        Frame("job1", 12, ("a", "b"), pos, {"newton_iterations": 3, "seconds": 0.25, "note": "x", "ok": True}),
        Progress("job1", "compiling", 4, 0.5, "compiling kernels"),
        Done("job1", "failed", 3, "boom"),
        Error("scene", "bad vertex", "vertices", "Cube", "job1", parent=uuid.uuid4().hex),
        Error("protocol", "bad"),
        Cancel("job1"),
        Status("job1"),
        StatusReply("job1", "running", 5, 3),
        Ping(),
        Pong(parent="abc"),
    ]


def test_every_message_type_is_covered():
    assert {type(m) for m in every_message()} == set(MESSAGE_TYPES.values())


@pytest.fixture(params=["inproc", "tcp"])
def socket_pair(request):
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.DEALER), ctx.socket(zmq.ROUTER)
    if request.param == "inproc":
        addr = f"inproc://codec-{uuid.uuid4().hex}"
        b.bind(addr)
    else:
        port = b.bind_to_random_port("tcp://127.0.0.1")
        addr = f"tcp://127.0.0.1:{port}"
    a.connect(addr)
    yield a, b
    a.close(0)
    b.close(0)
    ctx.term()


@pytest.mark.parametrize("index", range(len(every_message())))
def test_round_trip_over_sockets(socket_pair, index):
    dealer, router = socket_pair
    msg = every_message()[index]
    dealer.send_multipart(encode_message(msg), copy=False)
    assert router.poll(5000)
    frames = router.recv_multipart(copy=False)
    back, version = decode_message(frames[1:])
    assert version == PROTOCOL_VERSION
    assert_deep_equal(back, msg)
    # and back the other way through the ROUTER
    router.send_multipart([frames[0].bytes, *encode_message(back)], copy=False)
    assert dealer.poll(5000)
    again, _ = decode_message(dealer.recv_multipart(copy=False))
    assert_deep_equal(again, msg)


def test_scene_round_trip_keeps_every_field_and_array():
    scene = make_scene()
    back, _ = decode_message(encode_message(Submit(scene, "/c")))
    assert_deep_equal(back.scene, scene)
    assert back.scene.bodies[1].pin_targets.dtype == np.float32
    assert back.scene.bodies[0].triangles.dtype == np.int32
    back.scene.validate()


def test_send_is_zero_copy_and_receive_wraps_the_frame():
    a = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    frames = encode("frame", {"x": a})
    assert isinstance(frames[1], memoryview)
    assert np.shares_memory(np.frombuffer(frames[1], np.float32), a)
    env, body = decode(frames)
    assert np.shares_memory(body["x"], a)  # np.frombuffer on the received buffer, no copy
    assert env.type == "frame" and body["x"].shape == (1000, 3)


def test_encode_refuses_object_and_unsupported_dtypes():
    with pytest.raises(ProtocolError):
        encode("x", {"a": np.array([object()], dtype=object)})
    with pytest.raises(ProtocolError):
        encode("x", {"a": np.zeros(3, np.complex128)})
    env, body = decode(encode("x", {"a": np.zeros(3, ">f8")}))  # big-endian is converted
    assert body["a"].dtype.str == "<f8"


def _header(frames):
    return msgpack.unpackb(frames[0], raw=False, ext_hook=lambda c, d: msgpack.ExtType(c, d))


def _frames(header, arrays):
    return [msgpack.packb(header, use_bin_type=True), *arrays]


def _ping_like(**changes):
    frames = encode_message(Frame("j", 1, ("a",), [np.ones((4, 3), np.float32)]))
    h = _header(frames)
    arrays = [bytes(f) for f in frames[1:]]
    for k, v in changes.items():
        if k == "arrays_bytes":
            arrays = v
        elif k.startswith("body."):
            key = k[5:]
            if v is KeyError:
                del h["body"][key]
            else:
                h["body"][key] = v
        else:
            if v is KeyError:
                del h[k]
            else:
                h[k] = v
    return _frames(h, arrays)


@pytest.mark.parametrize("changes, field", [
    ({"type": "launch_missiles"}, "type"),
    ({"body.frame": KeyError}, "frame"),
    ({"body.colour": "red"}, "colour"),
    ({"body.frame": "twelve"}, "frame"),
    ({"body.names": [1]}, "names"),
    ({"id": KeyError}, "id"),
    ({"extra": 1}, "extra"),
    ({"version": "1.0"}, "version"),
    ({"arrays_bytes": []}, "arrays"),
    ({"arrays_bytes": [b"\0" * 47]}, "arrays[0]"),
    ({"arrays": [{"dtype": "|O", "shape": [4, 3]}]}, "arrays[0].dtype"),
    ({"arrays": [{"dtype": "<f8", "shape": [4, 3]}]}, "arrays[0]"),
    ({"arrays": [{"dtype": "<f4", "shape": [4, -3]}]}, "arrays[0].shape"),
    ({"arrays": [{"dtype": "<f4", "shape": [2 ** 40, 3]}]}, "arrays[0].shape"),
])
def test_malformed_messages_name_the_field(changes, field):
    frames = _ping_like(**changes)
    with pytest.raises(ProtocolError) as e:
        decode_message(frames)
    assert e.value.field == field, e.value


def test_wrong_dtype_of_a_typed_field_is_refused():
    frames = encode_message(Frame("j", 1, ("a",), [np.ones((4, 3), np.float32)]))
    h = _header(frames)
    h["arrays"][0]["dtype"] = "<i4"
    with pytest.raises(ProtocolError) as e:
        decode_message(_frames(h, [bytes(frames[1])]))
    assert e.value.field == "positions[0]"
    bad_scene = encode_message(Submit(make_scene(), "/c"))
    h = _header(bad_scene)
    i = h["body"]["scene"]["bodies"][0]["vertices"]  # an ExtType reference
    idx = int.from_bytes(i.data, "little")
    h["arrays"][idx]["dtype"] = "<f4"
    arrays = [bytes(f) for f in bad_scene[1:]]
    arrays[idx] = arrays[idx][: len(arrays[idx]) // 2]
    with pytest.raises(ProtocolError) as e:
        decode_message(_frames(h, arrays))
    assert e.value.field == "scene.bodies[0].vertices"


def test_limits_are_enforced_before_reading_data():
    a = np.zeros((1000, 3), np.float32)
    frames = encode("x", {"a": a})
    with pytest.raises(ProtocolError) as e:
        decode(frames, Limits(max_array_bytes=1000))
    assert e.value.field == "arrays[0].shape"
    with pytest.raises(ProtocolError):
        decode(encode("x", {"a": a, "b": a}), Limits(max_message_bytes=15000))
    with pytest.raises(ProtocolError) as e:
        decode([b"\x93\x01"])  # not a complete msgpack value
    assert e.value.field == "header"
    with pytest.raises(ProtocolError):
        decode([b""])
    with pytest.raises(ProtocolError) as e:
        decode([msgpack.packb([1, 2])])
    assert e.value.field == "header"


def test_constructing_an_invalid_message_raises():
    with pytest.raises(ProtocolError):
        Progress("j", "dancing", 1, 0.5)
    with pytest.raises(ProtocolError):
        Frame("j", 1, ("a", "b"), [np.zeros((3, 3), np.float32)])
    with pytest.raises(ProtocolError):
        Frame("j", 1, ("a",), [np.zeros((3, 3), np.float64)])
    with pytest.raises(ProtocolError):
        Done("j", "finished", 1)
