"""Every protocol message as a frozen dataclass, with validation on construction and decode.

Each message carries the envelope fields ``id``, ``parent`` and ``timestamp`` as keyword-only
fields (defaults: a fresh id, no parent, now). :func:`encode_message` turns a message into
ZeroMQ frames and :func:`decode_message` back, raising ProtocolError naming the field for an
unknown type or a missing, extra or ill-typed field. Field types are taken from the
annotations below; the allowed values of ``state`` fields are in the *_STATES tuples.
"""
from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Optional

import numpy as np

from .codec import DEFAULT_LIMITS, Limits, decode, encode, new_id
from .errors import ProtocolError
from .scene import Scene
from .scenewire import scene_from_wire, scene_to_wire
from .version import PROTOCOL_VERSION

PROGRESS_STATES = ("queued", "compiling", "building", "solving", "writing", "resuming")
DONE_STATES = ("done", "cancelled", "failed")
JOB_STATES = ("queued", "running", "cancelling", "done", "cancelled", "failed")
ERROR_CODES = ("protocol", "version", "auth", "handshake", "scene", "unknown_job", "resume_mismatch",
               "backend", "crash", "busy", "cache", "internal")


@dataclass(frozen=True)
class Message:
    """Base of all messages: the envelope fields (keyword-only)."""

    TYPE: ClassVar[str] = ""
    _: KW_ONLY
    id: str = field(default_factory=new_id)
    parent: Optional[str] = None
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        for f in body_fields(type(self)):
            v = getattr(self, f.name)
            object.__setattr__(self, f.name, _check(f.type, v, f.name))
        self.validate()

    def validate(self) -> None:
        """Per-message value checks (enums, matching lengths); raises ProtocolError."""


def body_fields(cls: type) -> list:
    return [f for f in dataclasses.fields(cls) if f.name not in ("id", "parent", "timestamp")]


def _check(kind: str, v: Any, name: str) -> Any:
    """Check and normalise one field value for its annotation ``kind``."""
    if kind == "str":
        if not isinstance(v, str):
            raise ProtocolError("must be a string", name)
        return v
    if kind == "Optional[str]":
        if v is not None and not isinstance(v, str):
            raise ProtocolError("must be a string or nil", name)
        return v
    if kind == "int":
        if isinstance(v, np.integer):
            v = int(v)
        if type(v) is not int:
            raise ProtocolError("must be an integer", name)
        return v
    if kind == "float":
        if isinstance(v, (np.floating, np.integer)):
            v = float(v)
        if type(v) not in (int, float) or not math.isfinite(v):
            raise ProtocolError("must be a finite number", name)
        return float(v)
    if kind == "bool":
        if type(v) is not bool:
            raise ProtocolError("must be a boolean", name)
        return v
    if kind == "tuple[str, ...]":
        if not (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)):
            raise ProtocolError("must be a list of strings", name)
        return tuple(v)
    if kind == "tuple[int, int]":
        if not (isinstance(v, (list, tuple)) and len(v) == 2 and all(type(x) is int and x >= 0 for x in v)):
            raise ProtocolError("must be [major, minor]", name)
        return (v[0], v[1])
    if kind == "positions":
        if not isinstance(v, (list, tuple)):
            raise ProtocolError("must be a list of (n, 3) float32 arrays", name)
        for i, a in enumerate(v):
            if not (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim == 2 and a.shape[1] == 3):
                raise ProtocolError("must be an (n, 3) float32 array", f"{name}[{i}]")
        return tuple(v)
    if kind == "stats":
        if not (isinstance(v, dict) and all(isinstance(k, str) for k in v)):
            raise ProtocolError("must be a map from strings to numbers, strings or booleans", name)
        for k, x in v.items():
            if isinstance(x, np.generic):
                x = x.item()
            if not (x is None or type(x) in (int, float, str, bool)):
                raise ProtocolError("must be a number, string, boolean or nil", f"{name}.{k}")
        return {k: (x.item() if isinstance(x, np.generic) else x) for k, x in v.items()}
    if kind == "Scene":
        if not isinstance(v, Scene):
            raise ProtocolError("must be a Scene", name)
        return v
    raise AssertionError(f"unknown field kind {kind}")


def _enum(value: str, allowed: tuple, name: str) -> None:
    if value not in allowed:
        raise ProtocolError(f"{value!r} is not one of {allowed}", name)


@dataclass(frozen=True)
class Hello(Message):
    """Client -> server, first message: who is calling and which protocol it speaks."""

    TYPE: ClassVar[str] = "hello"
    client_name: str
    client_version: str
    protocol_version: tuple[int, int] = PROTOCOL_VERSION
    secret: Optional[str] = None


@dataclass(frozen=True)
class Welcome(Message):
    """Server -> client, reply to Hello."""

    TYPE: ClassVar[str] = "welcome"
    server_name: str
    server_version: str
    protocol_version: tuple[int, int] = PROTOCOL_VERSION
    capabilities: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()


MAX_PATH_CHARS = 4096
"""Longest ``cache_dir`` accepted (PATH_MAX of Linux)."""
MAX_PATH_PARTS = 128
"""Most folder levels in a ``cache_dir``: deep enough for any real project, shallow enough that
no path walk on the server (os.makedirs recurses per level) can run out of recursion."""
_SEPARATORS = re.compile(r"[\\/]+")
_DRIVE = re.compile(r"^[A-Za-z]:$")


def check_cache_dir(path: str, field: str = "cache_dir") -> None:
    """Refuse a cache folder no server should touch, whatever its OS: empty, with a NUL
    character (no file system accepts one; Python raises ValueError), longer than
    MAX_PATH_CHARS or deeper than MAX_PATH_PARTS, or a file-system root (``/``, ``/..``,
    ``C:\\``), which a bake would fill with its files. Raises ProtocolError naming ``field``.
    Whether the path is absolute is the server's question (it depends on its OS)."""
    if not path:
        raise ProtocolError("must not be empty", field)
    if "\0" in path:
        raise ProtocolError("must not contain a NUL character", field)
    if len(path) > MAX_PATH_CHARS:
        raise ProtocolError(f"is {len(path)} characters long, more than {MAX_PATH_CHARS}", field)
    parts = [p for p in _SEPARATORS.split(path) if p not in ("", ".")]
    if len(parts) > MAX_PATH_PARTS:
        raise ProtocolError(f"has {len(parts)} folder levels, more than {MAX_PATH_PARTS}", field)
    kept: list = []
    for p in parts:
        if p != "..":
            kept.append(p)
        elif kept and not _DRIVE.match(kept[-1]):
            kept.pop()
    if not kept or (len(kept) == 1 and _DRIVE.match(kept[0])):
        raise ProtocolError(f"{path!r} is the root of a file system; give the bake a folder of its own", field)


@dataclass(frozen=True)
class Submit(Message):
    """Client -> server: bake ``scene``, caching into ``cache_dir`` (a folder on the server).
    ``cache_dir`` is checked here, at the protocol boundary (:func:`check_cache_dir`)."""

    TYPE: ClassVar[str] = "submit"
    scene: Scene
    cache_dir: str
    resume: bool = False

    def validate(self) -> None:
        check_cache_dir(self.cache_dir)


@dataclass(frozen=True)
class Accepted(Message):
    """Server -> client, reply to Submit: the job id."""

    TYPE: ClassVar[str] = "accepted"
    job_id: str


@dataclass(frozen=True)
class Frame(Message):
    """Server -> client: one finished frame; ``positions[i]`` belongs to body ``names[i]``."""

    TYPE: ClassVar[str] = "frame"
    job_id: str
    frame: int
    names: tuple[str, ...]
    positions: positions
    stats: stats = field(default_factory=dict)

    def validate(self) -> None:
        if len(self.names) != len(self.positions):
            raise ProtocolError(f"{len(self.names)} names but {len(self.positions)} position arrays", "positions")


@dataclass(frozen=True)
class Progress(Message):
    """Server -> client: job state, current frame and overall fraction in [0, 1]."""

    TYPE: ClassVar[str] = "progress"
    job_id: str
    state: str
    frame: int
    fraction: float
    message: str = ""

    def validate(self) -> None:
        _enum(self.state, PROGRESS_STATES, "state")
        if not 0.0 <= self.fraction <= 1.0:
            raise ProtocolError("must be in [0, 1]", "fraction")


@dataclass(frozen=True)
class Done(Message):
    """Server -> client: the job ended (done, cancelled or failed)."""

    TYPE: ClassVar[str] = "done"
    job_id: str
    state: str
    frames_done: int
    message: str = ""

    def validate(self) -> None:
        _enum(self.state, DONE_STATES, "state")


@dataclass(frozen=True)
class Error(Message):
    """Server -> client: a refused request or a failed job. ``parent`` is the id of the
    message it answers (when known); ``job_id`` is set for job failures."""

    TYPE: ClassVar[str] = "error"
    code: str
    message: str
    field: Optional[str] = None
    obj: Optional[str] = None
    job_id: Optional[str] = None


@dataclass(frozen=True)
class Cancel(Message):
    """Client -> server: stop a job (reply: Progress/Done for the job, or Error)."""

    TYPE: ClassVar[str] = "cancel"
    job_id: str


@dataclass(frozen=True)
class Status(Message):
    """Client -> server: ask for a job's state (reply: StatusReply)."""

    TYPE: ClassVar[str] = "status"
    job_id: str


@dataclass(frozen=True)
class StatusReply(Message):
    """Server -> client, reply to Status (and to Cancel)."""

    TYPE: ClassVar[str] = "status_reply"
    job_id: str
    state: str
    frame: int
    frames_done: int

    def validate(self) -> None:
        _enum(self.state, JOB_STATES, "state")


@dataclass(frozen=True)
class Ping(Message):
    """Either direction: are you alive? (reply: Pong)."""

    TYPE: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Pong(Message):
    """Reply to Ping."""

    TYPE: ClassVar[str] = "pong"


MESSAGE_TYPES = {c.TYPE: c for c in (Hello, Welcome, Submit, Accepted, Frame, Progress, Done, Error, Cancel,
                                     Status, StatusReply, Ping, Pong)}


def encode_message(msg: Message, version: tuple = PROTOCOL_VERSION, peer_version: Optional[tuple] = None) -> list:
    """ZeroMQ frames of a message (send with ``send_multipart(frames, copy=False)``).

    ``version`` goes into the envelope. ``peer_version`` (default: ``version``) is what the
    receiver speaks: optional fields newer than it are left out of a scene, or refused with a
    ProtocolError when the receiver could not honour their value (docs/protocol.md, rule 3 of
    versioning: never send a field the peer's minor version does not know).
    """
    peer = version if peer_version is None else peer_version
    body = {}
    for f in body_fields(type(msg)):
        v = getattr(msg, f.name)
        body[f.name] = scene_to_wire(v, peer) if f.type == "Scene" else (list(v) if isinstance(v, tuple) else v)
    return encode(msg.TYPE, body, msg_id=msg.id, parent=msg.parent, timestamp=msg.timestamp, version=version)


def _check_body(msg_type: str, body: dict, msg_id: Optional[str]) -> None:
    """Refuse an unknown message type or body field from the header alone, before the decoder
    walks the body or looks at an array (what a hostile header costs stays small)."""
    cls = MESSAGE_TYPES.get(msg_type)
    if cls is None:
        raise ProtocolError(f"unknown message type {str(msg_type)[:64]!r}; known: {sorted(MESSAGE_TYPES)}", "type",
                            msg_id)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in body_fields(cls))
    for k in body:
        if k not in names:
            raise ProtocolError(f"unknown field {str(k)[:64]!r}", str(k)[:64] or "body", msg_id)


_FIELD_NAMES: dict = {}


def decode_message(frames: list, limits: Limits = DEFAULT_LIMITS) -> tuple:
    """Decode and validate frames: returns ``(message, envelope version (major, minor))``.

    Raises ProtocolError (with ``msg_id`` when the envelope was readable) naming the field.
    """
    env, body = decode(frames, limits, _check_body)
    cls = MESSAGE_TYPES[env.type]
    try:
        fields = {f.name: f for f in body_fields(cls)}
        kw = {}
        for name, f in fields.items():
            if name not in body:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise ProtocolError("missing field", name)
                continue
            v = body[name]
            kw[name] = scene_from_wire(v, name) if f.type == "Scene" else v
        msg = cls(**kw, id=env.id, parent=env.parent, timestamp=env.timestamp)
    except ProtocolError as e:
        raise ProtocolError(e.message, e.field, env.id) from None
    except TypeError as e:  # should not happen after the checks above
        raise ProtocolError(str(e), "body", env.id) from None
    return msg, env.version
