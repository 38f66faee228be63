"""Clearance wire protocol: messages, array framing, scene files, PC2 caches and a client.

Pure Python + numpy + msgpack + pyzmq; vendored into the Blender add-on. See docs/protocol.md.
"""
from .codec import ALLOWED_DTYPES, DEFAULT_LIMITS, Envelope, Limits, decode, encode, new_id
from .errors import ProtocolError, RemoteError, ServerUnreachable, VersionMismatch
from .messages import (DONE_STATES, ERROR_CODES, JOB_STATES, MESSAGE_TYPES, PROGRESS_STATES, Accepted, Cancel,
                       Done, Error, Frame, Hello, Message, Ping, Pong, Progress, Status, StatusReply, Submit,
                       Welcome, decode_message, encode_message)
from .pc2 import PC2Writer, read_pc2, write_pc2
from .scene import BACKENDS, ROLES, SOLVER_QUALITIES, Body, Material, Scene, SceneError, Settings
from .scenefile import load_scene, save_scene, scene_bytes
from .version import PROTOCOL_VERSION, PROTOCOL_VERSION_STR


def __getattr__(name: str):
    # The client imports zmq; load it lazily so scene files and pc2 work without pyzmq.
    if name in ("Client", "CLIENT_VERSION"):
        from . import client
        return getattr(client, name)
    raise AttributeError(name)


__all__ = [
    "ALLOWED_DTYPES", "DEFAULT_LIMITS", "Envelope", "Limits", "decode", "encode", "new_id",
    "ProtocolError", "RemoteError", "ServerUnreachable", "VersionMismatch",
    "DONE_STATES", "ERROR_CODES", "JOB_STATES", "MESSAGE_TYPES", "PROGRESS_STATES", "Accepted", "Cancel", "Done",
    "Error", "Frame", "Hello", "Message", "Ping", "Pong", "Progress", "Status", "StatusReply", "Submit", "Welcome",
    "decode_message", "encode_message", "PC2Writer", "read_pc2", "write_pc2", "BACKENDS", "ROLES", "SOLVER_QUALITIES",
    "Body",
    "Material", "Scene", "SceneError", "Settings", "load_scene", "save_scene", "scene_bytes", "PROTOCOL_VERSION",
    "PROTOCOL_VERSION_STR", "Client", "CLIENT_VERSION",
]
