"""The solver server: a ROUTER socket serving many clients, jobs run in child processes.

One thread runs :meth:`Server.serve_forever`: it polls the ROUTER socket and the pipes of the
running jobs, answers requests, forwards job frames/progress to the submitting client and
enforces cancel deadlines. Every incoming message is decoded and validated; a malformed one
gets an Error (code "protocol", naming the field) and the server keeps serving.
With a CurveZMQ key (``curve_key``) all traffic is encrypted; a client must know the server's
public key to connect at all (protocol/keys.py), and with ``authorized_keys`` its own key must
be listed. Sessions: a client must say Hello first (only Ping is answered before that, and not
even Ping when the server has a secret); a Hello with the wrong secret is refused with code
"auth" and that connection is refused for good.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import Optional

import msgpack
import zmq

from protocol.codec import DEFAULT_LIMITS, Limits
from protocol.errors import ProtocolError
from protocol.messages import (Accepted, Cancel, Done, Error, Frame, Hello, Message, Ping, Pong, Progress, Status,
                               StatusReply, Submit, Welcome, decode_message, encode_message)
from protocol.scene import SceneError
from protocol.version import PROTOCOL_VERSION, compatible, version_str
from .cache import CacheError, JobCache, scene_hash
from .jobs import Job, JobManager
from .security import PREAUTH_MAX_BYTES, AuthThrottle, PreauthRate, Sessions, check_bind, secret_ok

SERVER_NAME = "clearance-server"
SERVER_VERSION = "0.1.0"
CAPABILITIES = ("frames", "progress", "cancel", "status", "resume", "cache")
HEARTBEAT = 1.0
"""Seconds between repeated Progress messages of a running job whose child is silent."""
RCVHWM = 100
"""Messages queued per peer before ZeroMQ stops reading its connection (clients send a few)."""
MAX_HELD_BYTES = 1024 ** 3
"""Default queue budget: bytes of scene arrays held for queued and running jobs (``--max-queued-mb``)."""
MAX_HELD_JOBS = 64
"""Default most jobs queued or running at once (``--max-queued-jobs``)."""


class Server:
    """Serve on ``bind`` until :meth:`stop`. ``protocol_version`` is overridable for tests of
    the version handshake only."""

    def __init__(self, bind: str = "tcp://127.0.0.1:5555", secret: Optional[str] = None, workers: int = 1,
                 limits: Limits = DEFAULT_LIMITS, context: Optional[zmq.Context] = None,
                 protocol_version: tuple = PROTOCOL_VERSION, max_sessions: int = 4096,
                 curve_key: Optional[tuple] = None, plaintext: bool = False,
                 authorized_keys: Optional[str] = None, max_held_bytes: int = MAX_HELD_BYTES,
                 max_held_jobs: int = MAX_HELD_JOBS):
        """``curve_key``: (public, secret) Z85 keys (protocol.keys.read_secret_key) to encrypt
        every connection; ``plaintext``: allow a non-loopback bind without a key;
        ``authorized_keys``: a folder of client public keys (``*.key``): only those clients
        complete the CurveZMQ handshake (ZAP), so no other peer can send anything at all.
        ``max_held_bytes`` / ``max_held_jobs``: the queue budget, bytes of scene arrays and jobs
        the server holds for queued and running jobs together; a Submit beyond it is refused
        (code ``busy``)."""
        check_bind(bind, secret, curve_key is not None, plaintext)
        self._auth = None
        self.authorized = 0     # client keys admitted (0: any client that knows the server's key)
        if authorized_keys is not None:
            if curve_key is None:
                raise ValueError("--authorized-keys needs encryption: give the server its key (--key-file)")
            from protocol.keys import read_authorized_keys
            n_keys = len(read_authorized_keys(authorized_keys))   # named errors, before ZeroMQ reads them
            if context is None:
                context = zmq.Context()   # ZAP applies to a whole context: a context of this server's own
            from zmq.auth.thread import ThreadAuthenticator
            self._auth = ThreadAuthenticator(context)
            self._auth.start()
            self._auth.configure_curve(domain="*", location=authorized_keys)
            self.authorized = n_keys
        self.secret = secret
        self.limits = limits
        self.max_held_bytes = int(max_held_bytes)
        self.max_held_jobs = int(max_held_jobs)
        self.protocol_version = tuple(protocol_version)
        self._ctx = context or zmq.Context.instance()
        self.sock = self._ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.encrypted = curve_key is not None
        if self.encrypted:
            self.sock.curve_publickey, self.sock.curve_secretkey = curve_key
            self.sock.curve_server = True
        self.public_key = curve_key[0].decode("ascii") if self.encrypted else None
        self.sock.setsockopt(zmq.SNDHWM, 0)   # never drop frames for a slow client
        # Inbound: at most RCVHWM messages queued per peer (ZeroMQ then stops reading that
        # connection: back-pressure, nothing dropped), each frame at most MAXMSGSIZE bytes (ZeroMQ
        # reads a frame's length first and disconnects the peer before allocating a bigger one).
        # ZeroMQ hands over a multi-frame message only whole; its declared total is checked
        # against limits.max_message_bytes from the header before any array is touched.
        self.sock.setsockopt(zmq.RCVHWM, RCVHWM)
        self.sock.setsockopt(zmq.MAXMSGSIZE, max_frame_bytes(limits))
        addr = bind[:-2] + ":*" if bind.startswith("tcp://") and bind.endswith(":0") else bind
        self.sock.bind(addr)
        self.address = self.sock.getsockopt_string(zmq.LAST_ENDPOINT) if addr.startswith("tcp://") else bind
        self.jobs = JobManager(self._job_event, workers)
        # identity -> "ok" | "refused", bounded; the owners of queued and running jobs are never evicted
        self.sessions = Sessions(max_sessions, keep=lambda: self.jobs.owners())
        # Both per peer identity (the client's listed CurveZMQ key, else its ZeroMQ connection), never per
        # address: a peer behind the same NAT or SSH tunnel as a client cannot lock that client out.
        self.throttle = AuthThrottle()           # wrong-secret guesses per peer
        self.preauth_rate = PreauthRate()        # messages before Hello per peer
        self._stop = threading.Event()
        self._last_progress: dict = {}  # job id -> (monotonic time, Progress fields)
        from solver_server.backends import available
        self.backends = tuple(available())

    # -- sending ----------------------------------------------------------------------------
    def _send(self, identity: bytes, msg: Message) -> None:
        self.sock.send_multipart([identity, *encode_message(msg, self.protocol_version)], copy=False)

    def _error(self, identity: bytes, code: str, message: str, parent: Optional[str], field: Optional[str] = None,
               obj: Optional[str] = None, job_id: Optional[str] = None) -> None:
        self._send(identity, Error(code, message, field, obj, job_id, parent=parent))

    # -- job events -------------------------------------------------------------------------
    def _job_event(self, job: Job, ev: tuple) -> None:
        kind = ev[0]
        if kind == "frame":
            _, frame, names, positions, stats = ev
            self._send(job.owner, Frame(job.id, frame, names, positions, stats))
            span = max(1, job_span(job))
            self._last_progress[job.id] = (time.monotonic(), "solving", frame,
                                           min(1.0, max(0.0, (frame - job_start(job)) / span)), f"frame {frame}")
        elif kind == "progress":
            _, state, frame, fraction, message = ev
            self._progress(job, state, frame, fraction, message)
            if state in ("compiling", "resuming") and message:
                # the server's own log of a cold compile (one line per kernel) and of where a resume
                # continues (a damaged file makes it fall back), beside what the client shows
                print(f"clearance-server: job {job.id[:8]}: {message}", file=sys.stderr, flush=True)
        elif kind == "end":
            _, state, frames_done, code, message, field, obj = ev
            self._last_progress.pop(job.id, None)
            # the server's one log line per job: what it baked, how it ended, how long it took
            why = f" [{code}] {message}" if state == "failed" else ""
            line = (f"clearance-server: job {job.id[:8]} {state} after {time.monotonic() - job.submitted:.1f} s, "
                    f"{frames_done} frames: {job.summary}{why}")
            print(line[:800].replace("\n", " "), file=sys.stderr, flush=True)
            if state == "failed":
                self._error(job.owner, code or "backend", message, job.submit_id, field, obj, job.id)
            self._send(job.owner, Done(job.id, state, frames_done, message, parent=job.submit_id))

    def _progress(self, job: Job, state: str, frame: int, fraction: float, message: str) -> None:
        self._last_progress[job.id] = (time.monotonic(), state, frame, fraction, message)
        self._send(job.owner, Progress(job.id, state, frame, fraction, message))

    def _heartbeat(self) -> None:
        now = time.monotonic()
        for job in self.jobs.running():
            last = self._last_progress.get(job.id)
            if last is not None and now - last[0] >= HEARTBEAT:
                self._progress(job, *last[1:])

    # -- requests ---------------------------------------------------------------------------
    def _handle(self, identity: bytes, frames: list) -> None:
        """Answer one incoming message. Nothing a client sends may stop the server: a fault in
        handling it (a bug) is answered with code ``internal`` and logged, and serving goes on."""
        try:
            self._handle_message(identity, frames)
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            try:
                self._error(identity, "internal", f"the server failed to handle this message: {type(e).__name__}: "
                            f"{str(e)[:500]}", None)
            except Exception:
                traceback.print_exc(file=sys.stderr)

    def _handle_message(self, identity: bytes, frames: list) -> None:
        session = self.sessions.get(identity)
        peer = _peer_key(identity, frames[0])
        if session != "ok" and self.secret:
            wait = self.preauth_rate.allow(peer)
            if wait > 0:   # a flood of messages from one unauthenticated peer: only a small header's id is read
                self._error(identity, "auth", f"too many messages from this connection without the secret; say "
                            f"Hello with the secret, or try again in {wait:.0f} s", _small_header_id(frames[0]))
                return
        if session != "ok" and (len(frames) != 1 or _nbytes(frames[0]) > PREAUTH_MAX_BYTES):
            # Before Hello only small one-frame messages (hello, ping) are even parsed.
            self._error(identity, "auth" if self.secret else "handshake",
                        f"send Hello first (before it, messages are limited to one frame of {PREAUTH_MAX_BYTES} "
                        "bytes)", _small_header_id(frames[0]))
            return
        try:
            msg, version = decode_message(frames, self.limits)
        except ProtocolError as e:
            self._error(identity, "protocol", e.message, e.msg_id, e.field)
            return
        except Exception as e:  # a decoder bug must not take the server down
            self._error(identity, "internal", f"cannot decode the message: {type(e).__name__}: {e}", None)
            return
        if not compatible(version, self.protocol_version):
            self._error(identity, "version", self._version_text(version), msg.id, "version")
            return
        if session == "refused":
            self._error(identity, "auth", "this connection was refused (wrong secret); reconnect with the right one",
                        msg.id)
            return
        if isinstance(msg, Hello):
            self._hello(identity, msg, peer)
            return
        if session != "ok" and isinstance(msg, (Cancel, Status)) and self._owns(identity, msg.job_id):
            session = "ok"   # the job's own connection: its job id is its token, whatever the table forgot
        if session != "ok":
            if self.secret:
                self._error(identity, "auth", "send Hello with the server's secret first", msg.id)
                return
            if not isinstance(msg, Ping):
                self._error(identity, "handshake", "send Hello first", msg.id)
                return
        if isinstance(msg, Ping):
            self._send(identity, Pong(parent=msg.id))
        elif isinstance(msg, Submit):
            self._submit(identity, msg)
        elif isinstance(msg, (Cancel, Status)):
            job = self.jobs.jobs.get(msg.job_id)
            if job is None:
                self._error(identity, "unknown_job", f"no job {msg.job_id!r} on this server", msg.id, "job_id")
                return
            if isinstance(msg, Cancel):
                self.jobs.cancel(job)
            self._send(identity, StatusReply(job.id, job.state, job.frame, job.frames_done, parent=msg.id))
        else:
            self._error(identity, "protocol", f"a client may not send {msg.TYPE!r}", msg.id, "type")

    def _version_text(self, theirs: tuple) -> str:
        return (f"protocol version mismatch: the server speaks {version_str(self.protocol_version)}, the client "
                f"speaks {version_str(theirs)}; install matching versions of the add-on and the server")

    def _owns(self, identity: bytes, job_id: str) -> bool:
        """True when ``job_id`` names a queued or running job submitted on connection ``identity``."""
        job = self.jobs.jobs.get(job_id)
        return job is not None and job.active and job.owner == identity

    def _hello(self, identity: bytes, msg: Hello, peer: Optional[str] = None) -> None:
        if not compatible(msg.protocol_version, self.protocol_version):
            self._error(identity, "version", self._version_text(msg.protocol_version), msg.id, "protocol_version")
            return
        if self.secret:
            wait = self.throttle.locked_for(peer)
            if wait > 0:
                self._error(identity, "auth", f"too many wrong secrets from this client; try again in {wait:.0f} s",
                            msg.id, "secret")
                return
        if not secret_ok(self.secret, msg.secret):
            self.sessions.set(identity, "refused")
            self.throttle.failure(peer)
            self._error(identity, "auth", "wrong or missing secret", msg.id, "secret")
            return
        self.sessions.set(identity, "ok")
        self._send(identity, Welcome(SERVER_NAME, SERVER_VERSION, self.protocol_version, CAPABILITIES, self.backends,
                                     parent=msg.id))

    def _submit(self, identity: bytes, msg: Submit) -> None:
        scene = msg.scene
        try:
            scene.validate()
        except SceneError as e:
            self._error(identity, "scene", str(e), msg.id, e.field or None, e.obj or None)
            return
        if scene.settings.backend not in self.backends:
            self._error(identity, "scene", f"backend {scene.settings.backend!r} is not available on this server; "
                        f"available: {list(self.backends)}", msg.id, "backend")
            return
        refusal = self._over_budget(scene)
        if refusal:
            self._error(identity, "busy", refusal, msg.id, "scene")
            return
        # msg.cache_dir passed check_cache_dir() when the message was decoded (no NUL, bounded
        # depth, not a root); what depends on this machine is checked here.
        cache_dir = msg.cache_dir
        if not os.path.isabs(cache_dir):
            self._error(identity, "protocol", f"cache_dir must be an absolute path on the server, got {cache_dir!r}",
                        msg.id, "cache_dir")
            return
        try:
            cache = JobCache(cache_dir)
            cache.create()
            real = os.path.realpath(cache.root)   # one job per real folder, whatever the symlinks
            if os.path.dirname(real) == real:
                self._error(identity, "protocol", f"cache_dir {cache_dir!r} is the root folder {real!r}; give the "
                            "bake a folder of its own", msg.id, "cache_dir")
                return
            other = self.jobs.busy_dir(real)
            if other is not None:
                self._error(identity, "busy", f"job {other.id} is already baking into {real}; cancel it or use "
                            "another folder", msg.id, "cache_dir")
                return
            cache = JobCache(real)
            cache.check_unlocked()      # another process (server, `clearance-server bake`) baking there
            if msg.resume:
                cache.check_resume(scene_hash(scene))
            else:
                cache.check_owner()     # never overwrite or clear a folder that is not a Clearance cache
        except SceneError as e:
            self._error(identity, "resume_mismatch", str(e), msg.id, "scene")
            return
        except CacheError as e:
            self._error(identity, e.code, str(e), msg.id, "cache_dir")
            return
        except (OSError, ValueError, RecursionError) as e:   # a path this OS cannot handle
            self._error(identity, "protocol", f"cannot use cache_dir {cache_dir[:200]!r}: {type(e).__name__}: {e}",
                        msg.id, "cache_dir")
            return
        cache_dir = real
        job = self.jobs.submit(scene, cache_dir, msg.resume, identity, msg.id)
        self._send(identity, Accepted(job.id, parent=msg.id))
        self._progress(job, "queued", job.frame, 0.0, "waiting for a worker" if self.jobs.running() else "")
        self.jobs.tick()

    def _over_budget(self, scene) -> str:
        """Why one more job with ``scene`` would exceed the queue budget ("" when it fits). Every
        queued or running job keeps its scene in the server's memory until it ends, so the budget
        bounds that memory whatever the clients submit."""
        from .jobs import scene_nbytes
        n, held = self.jobs.held()
        need = scene_nbytes(scene)
        if n + 1 > self.max_held_jobs:
            return (f"the server already has {n} jobs queued or running (limit {self.max_held_jobs}, clearance-server "
                    "serve --max-queued-jobs); wait for one to finish or cancel one, then submit again")
        if held + need > self.max_held_bytes:
            mib = 1024 * 1024
            return (f"the server's job queue is full: {n} queued or running jobs hold {held / mib:.1f} MiB of scenes "
                    f"and this one needs {need / mib:.1f} MiB, over the limit of {self.max_held_bytes / mib:.0f} MiB "
                    "(clearance-server serve --max-queued-mb); wait for a job to finish or cancel one, then submit "
                    "again")
        return ""

    # -- loop -------------------------------------------------------------------------------
    def serve_forever(self, ready: Optional[threading.Event] = None) -> None:
        """Run until stop(); then stop every job and close the socket."""
        if ready is not None:
            ready.set()
        try:
            while not self._stop.is_set():
                poller = zmq.Poller()
                poller.register(self.sock, zmq.POLLIN)
                pipes = {}
                for job in self.jobs.running():
                    if job.conn is not None:
                        fd = job.conn.fileno()
                        poller.register(fd, zmq.POLLIN)
                        pipes[fd] = (job.conn, job)
                events = dict(poller.poll(10 if self.jobs.awaiting_exit() else 100))
                if self.sock in events:
                    for _ in range(1000):
                        try:
                            frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        self._handle(frames[0].bytes, frames[1:])
                for fd, (conn, job) in pipes.items():
                    if fd in events and job.conn is conn:  # pyzmq reports plain fds by number
                        self.jobs.read(job)
                self.jobs.tick()
                self._heartbeat()
        finally:
            self.jobs.shutdown()
            self.sock.close(linger=0)
            if self._auth is not None:
                self._auth.stop()

    def stop(self) -> None:
        self._stop.set()


def max_frame_bytes(limits: Limits) -> int:
    """The largest single frame the server lets ZeroMQ receive (MAXMSGSIZE): the largest array
    or header, and never more than a whole message may hold."""
    return int(min(max(limits.max_array_bytes, limits.max_header_bytes), limits.max_message_bytes, 2 ** 62))


def _nbytes(frame) -> int:
    """Byte length of a received frame (zmq.Frame or bytes)."""
    buf = getattr(frame, "buffer", None)
    return buf.nbytes if buf is not None else len(frame)


def _small_header_id(frame) -> Optional[str]:
    """The message id from a header frame of at most PREAUTH_MAX_BYTES (so that the refusal
    answers its request), else None: a bigger header is not parsed for an unknown peer."""
    if _nbytes(frame) > PREAUTH_MAX_BYTES:
        return None
    try:
        head = msgpack.unpackb(bytes(getattr(frame, "buffer", frame)), raw=False, ext_hook=lambda code, data: None)
    except Exception:
        return None
    mid = head.get("id") if isinstance(head, dict) else None
    return mid if isinstance(mid, str) and 0 < len(mid) <= 64 else None


def _peer_key(identity: bytes, frame) -> str:
    """Who a message is from, for the throttles: the client's CurveZMQ public key when ZAP admitted
    it (``--authorized-keys``: the same key across reconnects), else the ZeroMQ routing id of its
    connection. Never the IP address, which a NAT or an SSH tunnel shares between clients."""
    try:
        user = frame.get("User-Id")
    except Exception:
        user = None
    return f"key:{user}" if user else f"connection:{identity.hex()}"


def job_start(job: Job) -> int:
    return job.scene.settings.frame_start if job.scene is not None else 0


def job_span(job: Job) -> int:
    s = job.scene.settings if job.scene is not None else None
    return (s.frame_end - s.frame_start) if s is not None else 1
