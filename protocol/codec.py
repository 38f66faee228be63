"""The wire envelope and array framing shared by every message.

A message is a list of ZeroMQ frames. Frame 0 is a msgpack map (the header)::

    {"id": uuid hex, "type": "frame", "version": [1, 0], "parent": id | None,
     "timestamp": seconds since the epoch, "body": {...fields...},
     "arrays": [{"dtype": "<f4", "shape": [n, 3]}, ...]}

Each numpy array inside ``body`` is replaced by a msgpack extension value (code 1, a
little-endian uint32 index into ``arrays``) and its raw bytes travel as frame ``1 + index``
(explicit little-endian dtype, C order). Sending passes memoryviews of the arrays (no copy);
receiving wraps the frames with ``np.frombuffer`` (no copy; the arrays are read-only).
Decoding validates the whole envelope and every array descriptor against :class:`Limits`
and raises :class:`~protocol.errors.ProtocolError` naming the field.
"""
from __future__ import annotations

import struct
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

import msgpack
import numpy as np

from .errors import ProtocolError
from .version import PROTOCOL_VERSION

ALLOWED_DTYPES = ("<f4", "<f8", "<i4", "<u1", "<i8")
"""Array dtypes accepted on the wire (little-endian, explicit)."""

ARRAY_EXT = 1
"""msgpack extension code of an array reference."""

ENVELOPE_KEYS = ("id", "type", "version", "parent", "timestamp", "body", "arrays")


@dataclass(frozen=True)
class Limits:
    """Bounds a receiver enforces before touching array data (bytes)."""

    max_array_bytes: int = 512 * 1024 ** 2
    max_message_bytes: int = 512 * 1024 ** 2
    """Largest message, header and arrays together (512 MiB: a Submit of ~4 million animated
    vertices-frames; ``clearance-server serve --max-message-mb`` raises it). The server also
    caps every ZeroMQ frame with it (MAXMSGSIZE), so no single frame above it is ever stored."""
    max_header_bytes: int = 16 * 1024 ** 2
    """Largest header frame. Headers hold names, settings and materials (arrays travel in their
    own frames): a 1,000-body Submit has a header of about 1 MB."""
    max_ndim: int = 4
    max_arrays: int = 100_000
    max_depth: int = 32
    """Deepest nesting of lists/maps in the header (the deepest real message, a Submit, uses 5);
    bounded so that a hostile message cannot exhaust the receiver's recursion limit."""
    max_items: int = 1 << 20
    """Most entries of all lists and maps of one header together (and of any one of them). A
    header of one-byte empty maps would otherwise become ~70 bytes of Python object per byte
    received; with this bound decoding builds at most ~2 * max_items objects (~150 MB, a fraction
    of a second) whatever the header's size. A 1,000-body Submit has about 60,000."""
    max_str_bytes: int = 1024 ** 2
    """Longest string or binary value in a header (names are at most 1,024 characters, paths 4,096)."""


DEFAULT_LIMITS = Limits()

_MAX_EXTENT = 2 ** 62
"""No array extent may exceed this, whatever the byte limits (numpy's own bound is 2**63 - 1)."""


@dataclass(frozen=True)
class Envelope:
    """What every message carries besides its body."""

    id: str
    type: str
    version: tuple
    parent: Optional[str]
    timestamp: float


def new_id() -> str:
    """A fresh message id (uuid4 hex, 32 characters)."""
    return uuid.uuid4().hex


class _Ref:
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


def _wire_dtype(a: np.ndarray) -> tuple:
    """``(dtype to send, its wire name)``: little-endian, one of ALLOWED_DTYPES.

    numpy spells single-byte dtypes without a byte order (``|u1``); the wire name is always the
    explicit ``<u1`` of the allowed list, so uint8 (and bool, sent as uint8) arrays travel.
    """
    dt = a.dtype
    if dt.hasobject or dt.kind not in "fiub":
        raise ProtocolError(f"array dtype {dt} cannot travel on the wire; use one of {ALLOWED_DTYPES}", "arrays")
    if dt.kind == "b":
        dt = np.dtype("u1")
    le = dt.newbyteorder("<")
    name = "<" + le.str[1:]
    if name not in ALLOWED_DTYPES:
        raise ProtocolError(f"array dtype {dt} cannot travel on the wire; use one of {ALLOWED_DTYPES}", "arrays")
    return le, name


def encode(msg_type: str, body: dict, *, msg_id: Optional[str] = None, parent: Optional[str] = None,
           timestamp: Optional[float] = None, version: tuple = PROTOCOL_VERSION) -> list:
    """Encode a body (dict of msgpack-able values and numpy arrays) into ZeroMQ frames.

    Returns ``[header bytes, memoryview, ...]``; send with ``send_multipart(frames, copy=False)``.
    """
    arrays: list = []
    descs: list = []

    def default(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            dt, name = _wire_dtype(obj)
            a = np.ascontiguousarray(obj, dtype=dt)
            descs.append({"dtype": name, "shape": list(a.shape)})
            arrays.append(a)
            return msgpack.ExtType(ARRAY_EXT, struct.pack("<I", len(arrays) - 1))
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, tuple):
            return list(obj)
        raise TypeError(f"cannot encode {type(obj).__name__}")

    body_bytes = msgpack.packb(body, default=default, use_bin_type=True)
    envelope = (
        ("id", msg_id or new_id()),
        ("type", msg_type),
        ("version", [int(version[0]), int(version[1])]),
        ("parent", parent),
        ("timestamp", float(time.time() if timestamp is None else timestamp)),
    )
    p = msgpack.Packer(use_bin_type=True)
    parts = [p.pack_map_header(len(ENVELOPE_KEYS))]
    for k, v in envelope:
        parts += [p.pack(k), p.pack(v)]
    parts += [p.pack("body"), body_bytes, p.pack("arrays"), p.pack(descs)]
    head = b"".join(parts)
    frames: list = [head]
    for a in arrays:
        frames.append(memoryview(a).cast("B") if a.size else b"")
    return frames


def _buffer(frame: Any) -> memoryview:
    buf = getattr(frame, "buffer", None)  # zmq.Frame
    if buf is not None:
        return buf
    return memoryview(frame)


def decode(frames: list, limits: Limits = DEFAULT_LIMITS,
           check_body: Optional[Callable[[str, dict, str], None]] = None) -> tuple:
    """Decode ZeroMQ frames into ``(Envelope, body dict)``; arrays are np.frombuffer views.

    Raises ProtocolError for anything malformed: header not msgpack or not a map, missing or
    extra envelope keys, ill-typed envelope values, unknown dtype, bad shape, array count
    mismatch, byte length not equal to dtype size times shape, sizes over ``limits``.
    ``check_body(type, body, msg_id)`` (decode_message's: known type, known fields) runs once the
    envelope and the declared sizes are checked, before any array frame is looked at and before
    the body is walked.
    """
    if not frames:
        raise ProtocolError("empty message", "header")
    head = _buffer(frames[0])
    if head.nbytes > limits.max_header_bytes:
        raise ProtocolError(f"header of {head.nbytes} bytes exceeds the limit of {limits.max_header_bytes}", "header")
    refs: list = []

    def ext_hook(code: int, data: bytes) -> Any:
        if code != ARRAY_EXT or len(data) != 4:
            raise ProtocolError(f"unknown msgpack extension {code}", "body")
        r = _Ref(struct.unpack("<I", data)[0])
        refs.append(r)
        return r

    # Decoding cost is bounded by the limits, not by the header's size: msgpack refuses any one
    # list, map, string or binary over its bound from its length prefix (before building it),
    # and the hooks below count the entries of every finished list and map, stopping the
    # decoder as soon as the header holds more than max_items in all.
    items = [0]

    def count(obj: Any) -> Any:
        items[0] += len(obj) + 1
        if items[0] > limits.max_items:
            raise ProtocolError(f"header holds more than {limits.max_items} list and map entries", "header")
        return obj

    try:
        header = msgpack.unpackb(head, raw=False, ext_hook=ext_hook, strict_map_key=True, object_hook=count,
                                 list_hook=count, max_array_len=limits.max_items, max_map_len=limits.max_items,
                                 max_str_len=limits.max_str_bytes, max_bin_len=limits.max_str_bytes, max_ext_len=4)
    except ProtocolError:
        raise
    except Exception as e:  # msgpack raises several types
        if isinstance(e, ValueError) and "exceeds max_" in str(e):   # from a length prefix, nothing built
            raise ProtocolError(f"header holds a list, map or string over the receiver's limit ({str(e)[:200]}): "
                                f"at most {limits.max_items} list and map entries, {limits.max_str_bytes} bytes "
                                "per string", "header") from None
        raise ProtocolError(f"header is not valid msgpack ({str(e)[:200]})", "header") from None
    if not isinstance(header, dict):
        raise ProtocolError("header must be a msgpack map", "header")
    msg_id = header.get("id") if isinstance(header.get("id"), str) else None
    for k in ENVELOPE_KEYS:
        if k not in header:
            raise ProtocolError("missing envelope field", k, msg_id)
    for k in header:
        if k not in ENVELOPE_KEYS:
            # the key is the sender's: cut short, and never an empty field name
            raise ProtocolError(f"unknown envelope field {str(k)[:64]!r}", str(k)[:64] or "header", msg_id)
    if not (isinstance(msg_id, str) and 0 < len(msg_id) <= 64):
        raise ProtocolError("must be a non-empty string of at most 64 characters", "id")
    if not isinstance(header["type"], str):
        raise ProtocolError("must be a string", "type", msg_id)
    v = header["version"]
    if not (isinstance(v, list) and len(v) == 2 and all(type(x) is int and x >= 0 for x in v)):
        raise ProtocolError("must be [major, minor] (two non-negative integers)", "version", msg_id)
    if not (header["parent"] is None or isinstance(header["parent"], str)):
        raise ProtocolError("must be a string or nil", "parent", msg_id)
    ts = header["timestamp"]
    if type(ts) not in (int, float):
        raise ProtocolError("must be a number (seconds)", "timestamp", msg_id)
    body = header["body"]
    if not isinstance(body, dict):
        raise ProtocolError("must be a map", "body", msg_id)
    descs = header["arrays"]
    if not isinstance(descs, list):
        raise ProtocolError("must be a list of {dtype, shape}", "arrays", msg_id)
    if len(descs) > limits.max_arrays:
        raise ProtocolError(f"{len(descs)} arrays exceed the limit of {limits.max_arrays}", "arrays", msg_id)
    if len(descs) != len(frames) - 1:
        raise ProtocolError(f"header lists {len(descs)} arrays but {len(frames) - 1} array frames follow",
                            "arrays", msg_id)
    # First every descriptor and the declared total, before any array frame is looked at: a
    # message that declares more than the limits is refused on its header alone, whatever its
    # frames hold, and nothing is allocated for it.
    sizes = []
    total = head.nbytes
    max_extent = min(limits.max_array_bytes, _MAX_EXTENT)
    for i, d in enumerate(descs):
        f = f"arrays[{i}]"
        if not (isinstance(d, dict) and set(d) == {"dtype", "shape"}):
            raise ProtocolError("must be a map with exactly the keys dtype and shape", f, msg_id)
        if d["dtype"] not in ALLOWED_DTYPES:
            raise ProtocolError(f"dtype {d['dtype']!r} not allowed; use one of {ALLOWED_DTYPES}", f + ".dtype", msg_id)
        shape = d["shape"]
        if not (isinstance(shape, list) and len(shape) <= limits.max_ndim
                and all(type(s) is int and s >= 0 for s in shape)):
            raise ProtocolError(f"must be a list of at most {limits.max_ndim} non-negative integers",
                                f + ".shape", msg_id)
        # Each extent on its own is bounded too: [0, 2**63] holds 0 bytes but no array has it.
        if any(s > max_extent for s in shape):
            raise ProtocolError(f"an extent exceeds the limit of {max_extent}", f + ".shape", msg_id)
        dt = np.dtype(d["dtype"])
        nbytes = dt.itemsize
        for s in shape:
            nbytes *= s
        if nbytes > limits.max_array_bytes:
            raise ProtocolError(f"array of {nbytes} bytes exceeds the limit of {limits.max_array_bytes}",
                                f + ".shape", msg_id)
        total += nbytes
        if total > limits.max_message_bytes:
            declared = total + sum(_declared_nbytes(x) for x in descs[i + 1:])
            raise ProtocolError(f"the message declares {declared} bytes (header and arrays), over the receiver's "
                                f"limit of {limits.max_message_bytes} bytes per message; send less per message",
                                "arrays", msg_id)
        sizes.append((dt, shape, nbytes))
    if check_body is not None:   # unknown type or field: refused before the body is walked
        check_body(header["type"], body, msg_id)
    arrays = []
    for i, (dt, shape, nbytes) in enumerate(sizes):
        buf = _buffer(frames[1 + i])
        if buf.nbytes != nbytes:
            raise ProtocolError(f"has {buf.nbytes} bytes but dtype {descs[i]['dtype']} and shape {shape} need "
                                f"{nbytes}", f"arrays[{i}]", msg_id)
        arrays.append(np.frombuffer(buf, dtype=dt).reshape(shape) if nbytes else np.zeros(shape, dt))
    if len(refs) != len(arrays) or sorted(r.index for r in refs) != list(range(len(arrays))):
        raise ProtocolError("array references in the body do not match the array list", "arrays", msg_id)
    body = _resolve(body, arrays, limits.max_depth, msg_id)
    env = Envelope(msg_id, header["type"], (v[0], v[1]), header["parent"], float(ts))
    return env, body


def _declared_nbytes(d: Any) -> int:
    """Bytes a well-formed descriptor declares (0 for a malformed one: only for the error text)."""
    try:
        n = np.dtype(d["dtype"]).itemsize if d["dtype"] in ALLOWED_DTYPES else 0
        for s in d["shape"]:
            n *= int(s) if type(s) is int and 0 <= s <= _MAX_EXTENT else 0
        return n
    except Exception:
        return 0


def _resolve(obj: Any, arrays: list, depth: int, msg_id: Optional[str], path: tuple = ()) -> Any:
    """Replace array references by the arrays, in place; refuse nesting deeper than ``depth``
    levels (so neither this nor any later walk of the body can run out of recursion). Scalars
    are not visited one by one and the field path (a tuple of keys and indexes) is only turned
    into text for an error, so the walk costs a few operations per entry."""
    if isinstance(obj, _Ref):
        return arrays[obj.index]
    if depth <= 0:
        raise ProtocolError("nested too deeply (lists and maps inside each other)", _path_text(path), msg_id)
    for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
        if isinstance(v, (dict, list, _Ref)):   # replacing a value never resizes the container
            obj[k] = _resolve(v, arrays, depth - 1, msg_id, (*path, k))
    return obj


def _path_text(path: tuple) -> str:
    """Field path of an entry, as in ``scene.bodies[1].material``, from the body down. Keys are
    cut short, since they come from the sender and the path is echoed back in the error."""
    text = "body"
    for k in path:
        text = f"{text}[{k}]" if isinstance(k, int) else (str(k)[:64] if text == "body" else f"{text}.{str(k)[:64]}")
        if len(text) > 512:
            return text[:512]
    return text
