"""Fuzz the message decoder (issue 8, "a fuzz suite in the project"): whatever frames arrive,
``decode_message`` returns a validated message or raises ``ProtocolError`` naming a field, and a
decoded ``submit``'s scene passes ``Scene.validate`` or raises ``SceneError``. Nothing else may
escape (the server would answer it with code ``internal`` instead of ``protocol``/``scene``).

Three generators (hypothesis): raw bytes, msgpack headers built from random values, and random
mutations of valid messages (hello, ping, status, frame, submit with a full scene) at a random
place of the header. About 1,000 inputs in the default suite; ``-m slow`` runs 100,000.
"""
import math

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import ProtocolError, decode_message, encode_message
from protocol.codec import Limits
from protocol.messages import Frame, Hello, Ping, Status, Submit
from protocol.scene import SceneError
from scenes import make_scene

LIMITS = Limits(max_array_bytes=1 << 20, max_message_bytes=1 << 22)
FAST = settings(max_examples=350, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
SLOW = settings(max_examples=34_000, deadline=None, suppress_health_check=list(HealthCheck))


def check(frames: list) -> None:
    """The property: a message, or a ProtocolError naming a field; a submit's scene validates or
    raises SceneError."""
    try:
        msg, version = decode_message(frames, LIMITS)
    except ProtocolError as e:
        assert isinstance(e.field, (str, type(None))) and e.message
        return
    assert isinstance(version, tuple) and len(version) == 2
    if isinstance(msg, Submit):
        try:
            msg.scene.validate()
        except SceneError as e:
            assert isinstance(e.field, str) and str(e)


# -- generators ---------------------------------------------------------------------------------
ints = st.one_of(st.integers(-2**63, 2**64 - 1), st.sampled_from([0, 1, -1, 2**31, 2**63, 2**64 - 1]))
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e308, math.nan]))
ext = st.builds(lambda code, data: msgpack.ExtType(code, data), st.sampled_from([1, 1, 2, 127]),
                st.one_of(st.binary(min_size=4, max_size=4), st.binary(max_size=8)))
scalars = st.one_of(st.none(), st.booleans(), ints, floats, st.text(max_size=20), st.binary(max_size=20), ext)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.one_of(st.text(max_size=12), ints), inner,
                                                                      max_size=4)), max_leaves=20)
descriptor = st.fixed_dictionaries({"dtype": st.sampled_from(["<f4", "<f8", "<i4", "<u1", "<i8", ">f4", "O", "x"]),
                                    "shape": st.lists(st.integers(-2, 2**40), max_size=5)})
TYPES = ["hello", "welcome", "submit", "accepted", "frame", "progress", "done", "error", "cancel", "status",
         "status_reply", "ping", "pong", "teleport"]


def _pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


@st.composite
def built_headers(draw) -> list:
    """An envelope-shaped header (keys right or not) with random values, plus random frames."""
    env = {"id": draw(st.one_of(st.text(min_size=1, max_size=70), values)),
           "type": draw(st.one_of(st.sampled_from(TYPES), values)),
           "version": draw(st.one_of(st.just([1, 1]), st.lists(ints, max_size=3), values)),
           "parent": draw(st.one_of(st.none(), st.text(max_size=10), values)),
           "timestamp": draw(st.one_of(floats, values)),
           "body": draw(st.one_of(st.dictionaries(st.text(max_size=12), values, max_size=6), values)),
           "arrays": draw(st.one_of(st.lists(descriptor, max_size=3), values))}
    for k in draw(st.lists(st.sampled_from(sorted(env)), max_size=2, unique=True)):
        del env[k]
    if draw(st.booleans()):
        env[draw(st.text(max_size=8))] = draw(values)
    return [_pack(env)] + draw(st.lists(st.binary(max_size=64), max_size=3))


def _valid_messages() -> list:
    rng = np.random.default_rng(0)
    return [encode_message(m) for m in (
        Hello("fuzz", "0"), Ping(), Status("j" * 8),
        Frame("j", 3, ["a", "b"], [rng.normal(size=(4, 3)).astype(np.float32),
                                   rng.normal(size=(2, 3)).astype(np.float32)], {"k": 1.5}),
        Submit(make_scene(n_frames=3, n_vertices=7), "/tmp/fuzz_cache"))]


VALID = _valid_messages()


def _paths(obj, path=()):
    """Every place inside a decoded header (map keys and list indices)."""
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, path + (i,))


@st.composite
def mutated(draw) -> list:
    """A valid message with one place of its header replaced, deleted or duplicated, or one frame
    truncated, dropped or added."""
    frames = [bytes(memoryview(f)) for f in draw(st.sampled_from(VALID))]
    header = msgpack.unpackb(frames[0], raw=False, strict_map_key=False)
    places = list(_paths(header))
    path = draw(st.sampled_from(places[1:]))
    parent = header
    for p in path[:-1]:
        parent = parent[p]
    action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "frame"]))
    if action == "replace":
        parent[path[-1]] = draw(values)
    elif action == "delete":
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    frames[0] = _pack(header)
    if action == "frame" and len(frames) > 1:
        i = draw(st.integers(1, len(frames) - 1))
        how = draw(st.sampled_from(["cut", "drop", "extra", "garble"]))
        if how == "cut":
            frames[i] = frames[i][:draw(st.integers(0, max(len(frames[i]) - 1, 0)))]
        elif how == "drop":
            del frames[i]
        elif how == "extra":
            frames.append(draw(st.binary(max_size=32)))
        else:
            b = bytearray(frames[i])
            if b:
                b[draw(st.integers(0, len(b) - 1))] ^= 0xFF
            frames[i] = bytes(b)
    return frames


raw = st.lists(st.binary(max_size=200), min_size=0, max_size=4)


# -- the default suite: ~1,000 inputs -------------------------------------------------------------
@FAST
@given(raw)
def test_raw_bytes(frames):
    check(frames)


@FAST
@given(built_headers())
def test_built_headers(frames):
    check(frames)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(mutated())
def test_mutated_valid_messages(frames):
    check(frames)


def test_the_valid_messages_decode():
    for frames in VALID:
        msg, _ = decode_message(frames, LIMITS)
        if isinstance(msg, Submit):
            msg.scene.validate()


# -- slow: 100,000 inputs ----------------------------------------------------------------------
@pytest.mark.slow
@SLOW
@given(st.one_of(raw, built_headers(), mutated(), mutated()))
def test_fuzz_100k(frames):
    check(frames)


@pytest.mark.slow
@settings(max_examples=66_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(built_headers(), mutated()))
def test_fuzz_100k_more(frames):
    check(frames)
