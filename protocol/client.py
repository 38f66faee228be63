"""A small synchronous client for the solver server, usable from any Python (Blender or not).

One DEALER socket; every wait has a timeout so nothing ever hangs::

    with Client("tcp://127.0.0.1:5555", timeout=5.0, client_name="my tool") as c:
        c.connect()                                  # handshake
        job = c.submit(scene, "/tmp/cache")
        for ev in c.events(job, timeout=60.0):       # Frame / Progress / Error ... until Done
            ...

For a UI timer use :meth:`Client.poll` (non-blocking) instead of :meth:`Client.events`.
A server off loopback encrypts with CurveZMQ: pass its public key (``server_key``: the 40
characters printed by ``clearance-server keygen``, or the path of its ``server.key`` file); a
server that admits only listed clients also needs this client's key (``client_key``: the path
of a ``NAME.key_secret`` from ``clearance-server keygen --client NAME``, or
``$CLEARANCE_CLIENT_KEY_FILE``).
Messages that arrive while waiting for a reply (frames of a running job) are kept and handed
out by poll()/events(), never dropped.
"""
from __future__ import annotations

import os
import time
from collections import deque
from typing import Iterator, Optional

import zmq

from .codec import DEFAULT_LIMITS, Limits
from .errors import ProtocolError, RemoteError, ServerUnreachable, VersionMismatch
from .keys import CLIENT_KEY_FILE_ENV, read_public_key, read_secret_key
from .messages import (Accepted, Cancel, Done, Error, Hello, Message, Ping, Pong, Status, StatusReply, Submit,
                       Welcome, decode_message, encode_message)
from .scene import Scene
from .version import PROTOCOL_VERSION, compatible, version_str

CLIENT_VERSION = "0.1.0"


class Client:
    """Synchronous client. ``timeout`` (seconds) bounds the handshake and every request."""

    def __init__(self, address: str = "tcp://127.0.0.1:5555", secret: Optional[str] = None, timeout: float = 5.0,
                 client_name: str = "clearance-client", *, protocol_version: tuple = PROTOCOL_VERSION,
                 limits: Limits = DEFAULT_LIMITS, context: Optional[zmq.Context] = None,
                 server_key: Optional[str] = None, client_key: Optional[str] = None):
        self.address = address
        self.secret = secret
        self.timeout = float(timeout)
        self.client_name = client_name
        self.protocol_version = tuple(protocol_version)
        self.limits = limits
        self.welcome: Optional[Welcome] = None
        self._ctx = context or zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.RCVHWM, 0)
        self.encrypted = bool(server_key)
        if self.encrypted:   # the server is known by its public key
            try:
                key = read_public_key(server_key)
                # this client's own keypair: a listed one (a server with --authorized-keys admits
                # only those), else a fresh one per connection
                own = client_key or os.environ.get(CLIENT_KEY_FILE_ENV)
                public, secret = read_secret_key(own) if own else zmq.curve_keypair()
            except Exception:
                self._sock.close(linger=0)
                raise
            self._sock.curve_publickey, self._sock.curve_secretkey, self._sock.curve_serverkey = public, secret, key
        # Handshake failures (wrong key, encryption on one side only) and a lost connection (the
        # server killed) would otherwise look like a silent server: watch the connection events
        # and name them.
        self._monitor = self._sock.get_monitor_socket(events=zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                                      zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                                      zmq.EVENT_HANDSHAKE_FAILED_AUTH |
                                                      zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
        self._handshake_failure: Optional[str] = None
        self._connected = False   # a handshake succeeded (and no disconnect since)
        self._lost = False        # disconnected after a handshake: reported once by _recv
        self._down = False        # lost and not reconnected since: requests other than Hello fail at once
        self._handshake_definite = False
        self._sock.connect(address)
        self._pending: deque = deque()
        self._closed = False

    # -- plumbing ---------------------------------------------------------------------------
    def peer_version(self) -> tuple:
        """The protocol version both sides know: the lower of this client's and the server's
        (from its Welcome; this client's own before the handshake). Scenes are encoded for it."""
        if self.welcome is None:
            return self.protocol_version
        return min(self.protocol_version, tuple(self.welcome.protocol_version))

    def _send(self, msg: Message) -> None:
        if self._closed:
            raise RuntimeError("client is closed")
        try:
            frames = encode_message(msg, self.protocol_version, self.peer_version())
        except ProtocolError as e:
            if e.field and (e.field.startswith("scene.settings.") or ".material." in e.field):
                # A setting or material field the (older) server cannot honour: a version problem,
                # said plainly.
                raise VersionMismatch(e.message) from None
            raise
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._sock.send_multipart(frames, copy=False, flags=zmq.NOBLOCK)
                return
            except zmq.Again:
                pass
            # No pipe to send on: a handshake that failed before this send (encryption on one side
            # only, a wrong key) ends the connection's pipe; its reason is in the monitor events,
            # which may arrive a little after the failure on a loaded machine. Wait for a pipe or
            # a reason, at most the client's timeout.
            problem = self.handshake_problem()
            if problem and self._handshake_definite:
                raise ServerUnreachable(problem)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerUnreachable(problem or f"cannot send to {self.address}: the server is not reachable "
                                        "or not reading")
            zmq.select([self._monitor], [self._sock], [], min(left, 0.1))

    def _recv(self, timeout: float) -> Optional[Message]:
        """One message within ``timeout`` seconds, or None. Raises ServerUnreachable as soon as
        the connection is lost (the server stopped, crashed or dropped it), once every message
        that arrived before the loss has been handed out."""
        deadline = time.monotonic() + max(0.0, timeout)
        while not self._sock.poll(0):
            self.handshake_problem()                 # reads the connection events
            if self._lost:
                self._lost = False                   # said once; a later request may reconnect
                raise ServerUnreachable(self.lost_text())
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            zmq.select([self._sock, self._monitor], [], [], left)
        frames = self._sock.recv_multipart(copy=False)
        msg, version = decode_message(frames, self.limits)
        if not compatible(version, self.protocol_version):
            raise VersionMismatch(f"server speaks protocol {version_str(version)}, this client speaks "
                                  f"{version_str(self.protocol_version)}")
        return msg

    def _request(self, msg: Message, reply_types: tuple, timeout: Optional[float] = None) -> Message:
        """Send ``msg`` and wait for the reply whose parent is its id; other messages are queued.
        After a lost connection only a Hello waits for the server to come back: anything else
        (a cancel after the server was killed) fails at once instead of after the timeout."""
        if not isinstance(msg, Hello):
            self.handshake_problem()
            if self._down:
                raise ServerUnreachable(self.lost_text())
        self._send(msg)
        t = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + t
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                problem = self.handshake_problem()
                if problem:
                    raise ServerUnreachable(problem)
                raise ServerUnreachable(f"no reply from {self.address} to {msg.TYPE} within {t:.1f} s")
            m = self._recv(left)
            if m is None:
                continue
            if m.parent == msg.id:
                if isinstance(m, Error):
                    if m.code == "version":
                        raise VersionMismatch(m.message)
                    raise RemoteError(m.code, m.message, m.field, m.obj, m.job_id)
                if isinstance(m, reply_types):
                    return m
                raise ProtocolError(f"unexpected {m.TYPE} in reply to {msg.TYPE}", "type")
            self._pending.append(m)

    def lost_text(self) -> str:
        return (f"lost the connection to the server at {self.address}: it stopped or crashed, or refused a message "
                "frame over its size limit (clearance-server serve --max-array-mb / --max-message-mb). A bake's "
                "finished frames stay in its cache folder: submit it again with resume to continue")

    def handshake_problem(self) -> Optional[str]:
        """Why the connection's ZeroMQ handshake failed (None if it did not): encryption on one
        side only, or a server public key that does not match the server. Also notes a lost
        connection (a disconnect after a successful handshake) for _recv."""
        from zmq.utils.monitor import recv_monitor_message
        while self._monitor.poll(0):
            ev = recv_monitor_message(self._monitor)
            if ev["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._connected, self._down = True, False
                continue
            if ev["event"] == zmq.EVENT_DISCONNECTED:
                if self._connected:
                    self._connected, self._lost, self._down = False, True, True
                continue
            mismatch = ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and \
                ev["value"] == getattr(zmq, "PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH", -1)
            if mismatch and self.encrypted:   # definite: kept whatever later reconnects report
                self._handshake_failure = (f"the server at {self.address} does not use encryption but this client "
                                           "was given a server public key; remove the key or start the server "
                                           "with its key file")
                self._handshake_definite = True
            elif mismatch:
                self._handshake_failure = (f"the server at {self.address} requires encryption (CurveZMQ): give the "
                                           "client the server's public key (the server.key file from "
                                           "'clearance-server keygen', or its 40 characters)")
                self._handshake_definite = True
            elif self._handshake_definite:
                continue
            elif ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self._handshake_failure = (f"the server at {self.address} does not admit this client's key: add its "
                                           "public key (NAME.key from 'clearance-server keygen --client NAME') to "
                                           "the server's --authorized-keys folder and restart it, and give this "
                                           f"client NAME.key_secret (client_key= or ${CLIENT_KEY_FILE_ENV})")
                self._handshake_definite = True
            elif self.encrypted:
                # a wrong server key, or (on a loaded machine, when the mechanism mismatch is not the event seen
                # before the timeout) a server without encryption: both are said
                self._handshake_failure = (f"the encrypted handshake with {self.address} failed: the server public "
                                           "key given does not match the server's key (copy server.key again), or "
                                           "the server does not use encryption (start it with its key file)")
            elif ev["event"] == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                # a plain (NULL) handshake with a plain server cannot fail; a CurveZMQ server drops it, and on a
                # loaded machine this event may be the only one seen before the timeout (no mechanism mismatch)
                self._handshake_failure = (f"the server at {self.address} ended the handshake without a reason: it "
                                           "most likely requires encryption (CurveZMQ): give the client the server's "
                                           "public key (the server.key file from 'clearance-server keygen', or its "
                                           "40 characters)")
            else:
                self._handshake_failure = f"the connection handshake with {self.address} failed ({ev['event']!r})"
        return self._handshake_failure

    # -- public API -------------------------------------------------------------------------
    def connect(self) -> Welcome:
        """Handshake. Raises ServerUnreachable (timeout), VersionMismatch, RemoteError (e.g. auth)."""
        hello = Hello(self.client_name, CLIENT_VERSION, self.protocol_version, self.secret)
        w = self._request(hello, (Welcome,))
        if not compatible(w.protocol_version, self.protocol_version):
            raise VersionMismatch(f"server speaks protocol {version_str(w.protocol_version)}, this client speaks "
                                  f"{version_str(self.protocol_version)}; use matching versions of the add-on "
                                  "and the server")
        self.welcome = w
        return w

    def submit(self, scene: Scene, cache_dir: str, resume: bool = False) -> str:
        """Submit a bake; returns the job id. Raises RemoteError if the server refuses the scene,
        VersionMismatch if the server's minor version cannot honour one of its settings (a
        "fast" solver_quality sent to a 1.0 server, which has only the accurate solver)."""
        a = self._request(Submit(scene, str(cache_dir), bool(resume)), (Accepted,))
        return a.job_id

    def poll(self, timeout: float = 0.0) -> list:
        """Every message received so far (Frame, Progress, Done, Error ...), waiting at most
        ``timeout`` seconds for the first one. Never blocks longer."""
        deadline = time.monotonic() + timeout
        while True:
            m = self._recv(max(0.0, deadline - time.monotonic()) if not self._pending else 0.0)
            if m is None:
                break
            self._pending.append(m)
        out = list(self._pending)
        self._pending.clear()
        return out

    def events(self, job_id: str, timeout: float = 60.0) -> Iterator[Message]:
        """Yield the job's messages until its Done (included). Raises ServerUnreachable when
        nothing arrives for ``timeout`` seconds. Messages of other jobs stay queued for poll()."""
        while True:
            for i, m in enumerate(self._pending):
                if getattr(m, "job_id", None) == job_id:
                    del self._pending[i]
                    yield m
                    if isinstance(m, Done):
                        return
                    break
            else:
                m = self._recv(timeout)
                if m is None:
                    raise ServerUnreachable(f"no message about job {job_id} for {timeout:.1f} s")
                self._pending.append(m)

    def cancel(self, job_id: str) -> StatusReply:
        """Ask the server to stop a job (effective within about a second); returns its state."""
        return self._request(Cancel(job_id), (StatusReply,))

    def status(self, job_id: str) -> StatusReply:
        return self._request(Status(job_id), (StatusReply,))

    def ping(self) -> float:
        """Round trip time in seconds."""
        t = time.perf_counter()
        self._request(Ping(), (Pong,))
        return time.perf_counter() - t

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._sock.disable_monitor()
            except zmq.ZMQError:
                pass
            self._monitor.close(linger=0)
            self._sock.close(linger=0)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
