"""Exceptions raised by the protocol layer (codec, messages, client).

``ProtocolError`` is a malformed message (the server answers it with an Error of code
"protocol" naming ``field``); the other three are what a client sees: the server cannot be
reached in time, speaks another major version, or refused a request.
"""
from __future__ import annotations

from typing import Optional


class ProtocolError(ValueError):
    """A message that does not follow the protocol. ``field`` names the offending field
    (dotted path such as ``"body.positions[2]"``), ``msg_id`` is the id of the message when
    its envelope could be read (so an Error reply can name its parent)."""

    def __init__(self, message: str, field: Optional[str] = None, msg_id: Optional[str] = None):
        super().__init__(f"{field}: {message}" if field else message)
        self.message = message
        self.field = field
        self.msg_id = msg_id


class ServerUnreachable(ConnectionError):
    """No answer from the server within the timeout (not running, wrong address, stuck)."""


class VersionMismatch(RuntimeError):
    """The two sides speak different major protocol versions; the message names both."""


class RemoteError(RuntimeError):
    """The server refused a request or a job failed: carries the Error message's fields."""

    def __init__(self, code: str, message: str, field: Optional[str] = None, obj: Optional[str] = None,
                 job_id: Optional[str] = None):
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message
        self.field = field
        self.obj = obj
        self.job_id = job_id
