"""Issue 8 items 1 and 10 at the protocol boundary: hostile nesting, impossible shapes and bad
cache folders are ProtocolErrors naming the field; every allowed dtype can be sent."""
import msgpack
import numpy as np
import pytest

from protocol import ProtocolError, Submit, decode, decode_message, encode
from protocol.codec import ALLOWED_DTYPES
from protocol.messages import MAX_PATH_PARTS, check_cache_dir
from protocol.scenewire import scene_to_wire
from scenes import make_scene


@pytest.mark.parametrize("dtype", ALLOWED_DTYPES)
def test_every_allowed_dtype_travels(dtype):
    a = (np.arange(12) % 7).astype(dtype).reshape(4, 3)
    env, body = decode(encode("x", {"a": a}))
    assert body["a"].dtype == np.dtype(dtype) and np.array_equal(body["a"], a)


def test_uint8_and_bool_arrays_are_sent_as_u1():
    frames = encode("x", {"u": np.array([0, 7, 255], np.uint8), "b": np.array([True, False])})
    descs = msgpack.unpackb(frames[0], raw=False, ext_hook=lambda c, d: None)["arrays"]
    assert [d["dtype"] for d in descs] == ["<u1", "<u1"]
    _, body = decode(frames)
    assert body["u"].tolist() == [0, 7, 255] and body["b"].tolist() == [1, 0]


def _nested(depth, leaf=1):
    x = leaf
    for _ in range(depth):
        x = [x]
    return x


@pytest.mark.parametrize("depth", [40, 1000])
def test_deep_nesting_is_a_protocol_error(depth):
    for body in ({"a": _nested(depth)}, {"scene": {"bodies": _nested(depth)}}):
        with pytest.raises(ProtocolError) as e:
            decode(encode("submit", body))
        assert "nested too deeply" in e.value.message
        assert e.value.field.startswith(next(iter(body)))


def test_nesting_of_real_messages_is_far_below_the_limit():
    env, body = decode(encode("x", {"a": _nested(30)}))
    assert body["a"] == _nested(30)
    msg, _ = decode_message(encode("submit", {"scene": scene_to_wire(make_scene()), "cache_dir": "/tmp/c"}))
    assert msg.cache_dir == "/tmp/c"


@pytest.mark.parametrize("shape", [[0, 2 ** 63], [2 ** 63, 0], [0, 2 ** 64 - 1], [0, 0, 2 ** 62 + 1]])
def test_impossible_extents_are_refused_even_for_empty_arrays(shape):
    frames = encode("x", {"a": np.zeros((0, 3), np.float32)})
    h = msgpack.unpackb(frames[0], raw=False, ext_hook=lambda c, d: msgpack.ExtType(c, d))
    h["arrays"][0]["shape"] = shape
    with pytest.raises(ProtocolError) as e:
        decode([msgpack.packb(h, use_bin_type=True), b""])
    assert e.value.field == "arrays[0].shape"


@pytest.mark.parametrize("cache_dir, why", [
    ("/tmp/x\0y", "NUL"),
    ("/tmp" + "/a" * 1000, "folder levels"),
    ("/", "root"),
    ("//", "root"),
    ("/tmp/../..", "root"),
    ("/./.", "root"),
    ("C:\\", "root"),
    ("C:/..", "root"),
    ("", "empty"),
    ("/" + "x" * 5000, "characters"),
])
def test_bad_cache_dirs_are_refused_at_the_protocol_boundary(cache_dir, why):
    with pytest.raises(ProtocolError) as e:
        Submit(make_scene(), cache_dir)
    assert e.value.field == "cache_dir"
    frames = encode("submit", {"scene": scene_to_wire(make_scene()), "cache_dir": cache_dir})
    with pytest.raises(ProtocolError) as e:
        decode_message(frames)
    assert e.value.field == "cache_dir"
    assert why in e.value.message


@pytest.mark.parametrize("cache_dir", ["/tmp/c", "/home/u/shots/../cache/server", "C:\\Users\\u\\cache",
                                       "/" + "/".join(["d"] * MAX_PATH_PARTS), "relative/is/the/server's/call"])
def test_good_cache_dirs_pass(cache_dir):
    check_cache_dir(cache_dir)
