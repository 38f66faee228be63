"""Scene files (.clrscene): a Submit-style scene written to one file, so any tool can save,
load and bake a scene without sockets.

The file is one msgpack map::

    {"format": "clearance-scene", "version": [major, minor],
     "header": <bytes: the codec header of a "scene" message whose body is the scene map>,
     "arrays": [<bytes>, ...]}   # raw array bytes, described by the header's "arrays" list

so loading goes through exactly the same validation as a scene received on a socket.
"""
from __future__ import annotations

import os

import msgpack

from .codec import DEFAULT_LIMITS, Limits, decode, encode
from .errors import ProtocolError
from .scene import Scene
from .scenewire import scene_from_wire, scene_to_wire
from .version import PROTOCOL_VERSION, compatible, version_str

EXTENSION = ".clrscene"
FORMAT = "clearance-scene"


def scene_bytes(scene: Scene) -> bytes:
    """The file content of a scene (also used to hash scenes for resume)."""
    frames = encode("scene", {"scene": scene_to_wire(scene)}, msg_id="0" * 32, timestamp=0.0)
    return msgpack.packb({"format": FORMAT, "version": list(PROTOCOL_VERSION), "header": bytes(frames[0]),
                          "arrays": [bytes(f) for f in frames[1:]]}, use_bin_type=True)


def save_scene(path: str, scene: Scene) -> None:
    """Write ``scene`` to ``path`` (atomically: temporary file then rename)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(scene_bytes(scene))
    os.replace(tmp, path)


def scene_from_bytes(data: bytes, limits: Limits = DEFAULT_LIMITS) -> Scene:
    try:
        d = msgpack.unpackb(data, raw=False)
    except Exception as e:
        raise ProtocolError(f"not a Clearance scene file ({e})", "file") from None
    if not (isinstance(d, dict) and d.get("format") == FORMAT):
        raise ProtocolError("not a Clearance scene file (missing format marker)", "format")
    if set(d) != {"format", "version", "header", "arrays"}:
        raise ProtocolError("unexpected keys in scene file", "file")
    v = d["version"]
    if not (isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)):
        raise ProtocolError("must be [major, minor]", "version")
    if not compatible(v, PROTOCOL_VERSION):
        raise ProtocolError(f"scene file version {version_str(v)} cannot be read by protocol "
                            f"{version_str(PROTOCOL_VERSION)}", "version")
    if not (isinstance(d["header"], bytes) and isinstance(d["arrays"], list)
            and all(isinstance(a, bytes) for a in d["arrays"])):
        raise ProtocolError("header and arrays must be bytes", "file")
    env, body = decode([d["header"], *d["arrays"]], limits)
    if env.type != "scene" or set(body) != {"scene"}:
        raise ProtocolError("scene file does not hold a scene", "type")
    return scene_from_wire(body["scene"])


def load_scene(path: str, limits: Limits = DEFAULT_LIMITS) -> Scene:
    """Read a scene written by :func:`save_scene`; raises ProtocolError for a bad file."""
    with open(os.fspath(path), "rb") as f:
        return scene_from_bytes(f.read(), limits)
