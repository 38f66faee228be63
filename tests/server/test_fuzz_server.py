"""Fuzz the running server over real sockets (issue 8, "a fuzz suite in the project").

A real ``clearance-server serve`` process on tcp loopback, with small limits (1 MiB per array,
4 MiB per message), gets hypothesis-generated input: raw bytes, envelope-shaped headers with
random values, one-place mutations of valid messages (hello, ping, status, frame, submit with a
whole scene), truncated/dropped/garbled array frames, valid requests under random protocol
versions, frames over its size limit, and input from connections that never said Hello.

The properties, for every input:
- the server process stays alive;
- every input that fits the limits gets an answer (a reply, or an ``error`` whose code is
  never ``internal`` and, for code ``protocol``, names the field);
- a frame over the limit closes only that connection.
After the run a new client is served, the server's memory has grown by less than 64 MiB and
its stderr holds no traceback. About 1,000 inputs in the default suite; ``-m slow`` runs
100,000.
"""
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import Client, Error, Hello, Ping, Status, encode_message
from protocol.messages import decode_message
from protocol.version import PROTOCOL_VERSION
from test_fuzz_codec import built_headers, mutated, raw   # the decoder fuzz's generators (tests/protocol)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1024 * 1024
REPLY_TIMEOUT = 20.0    # seconds: only a bound for a dead server, never a timing assertion
CODES_WITHOUT_FIELD = ("version", "handshake", "auth", "unknown_job", "busy", "cache", "resume_mismatch", "scene")
FUZZ_CACHE = "/tmp/fuzz_cache"   # the cache_dir inside the decoder fuzz's valid Submit


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class FuzzTarget:
    """The server process, one authenticated DEALER connection, and the bookkeeping."""

    def __init__(self, tmp):
        e = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE_")}
        e["PYTHONPATH"] = ROOT
        e["CLEARANCE_STATE_DIR"] = str(tmp / "state")
        self.stderr_path = tmp / "server.stderr"
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "solver_server", "serve", "--bind", "tcp://127.0.0.1:0",
                                      "--max-array-mb", "1", "--max-message-mb", "4"], cwd=ROOT, env=e,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        try:
            self._setup()
        except BaseException:
            self.close()        # never leave the server running when the setup fails
            raise

    def _setup(self):
        line = self.proc.stdout.readline()
        assert "listening on" in line, (line, self.stderr_path.read_text())
        self.address = line.split()[-1]
        # Valid submits that survive a mutation really bake (none backend): into a folder of this
        # run, whose path has the same length as the one inside the generated message.
        self.cache = f"/tmp/fz{uuid.uuid4().hex[:8]}"
        assert len(self.cache) == len(FUZZ_CACHE)
        self.ctx = zmq.Context()
        self.sock = None
        self.inputs = 0
        self.dropped = 0
        self._connect()
        self.rss0 = _rss(self.proc.pid)

    def _connect(self):
        if self.sock is not None:
            self.sock.close(0)
        self.sock = self._dealer()
        hello = Hello("fuzz", "0")
        self.sock.send_multipart(encode_message(hello))
        assert self._answer(self.sock, hello.id) is not None, "no Welcome"

    def _dealer(self):
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVHWM, 0)
        s.connect(self.address)
        return s

    def _answer(self, sock, mid=None):
        """The answer to the last input: the reply whose parent is its id ``mid``, or an error
        that is not about a job (its parent is whatever id the server could read, if any); a
        running job's messages in between are skipped. None if nothing came in time."""
        while sock.poll(int(REPLY_TIMEOUT * 1000)):
            msg, _ = decode_message(sock.recv_multipart())
            if isinstance(msg, Error) and msg.job_id is None:
                return msg
            if mid is not None and msg.parent == mid and not isinstance(msg, Error):
                return msg
        return None

    def send(self, frames: list, fresh: bool) -> None:
        """Send one input and check the properties."""
        self.inputs += 1
        frames = [bytes(f) for f in frames] or [b""]
        frames[0] = frames[0].replace(FUZZ_CACHE.encode(), self.cache.encode())
        mid = _header_id(frames[0])
        sock = self._dealer() if fresh else self.sock
        try:
            sock.send_multipart(frames)
            reply = self._answer(sock, mid)
            assert self.proc.poll() is None, f"the server died: {self.stderr_path.read_text()[-3000:]}"
            assert reply is not None, f"no answer to {frames[0][:200]!r} ({len(frames)} frames)"
            if isinstance(reply, Error):
                assert reply.code != "internal", reply.message
                assert reply.field or reply.code in CODES_WITHOUT_FIELD, (reply.code, reply.message)
        finally:
            if fresh:
                sock.close(0)

    def send_oversized(self, nbytes: int) -> None:
        """A frame over the 1 MiB limit: ZeroMQ drops the connection; the next one is served."""
        self.inputs += 1
        self.dropped += 1
        self.sock.send_multipart([encode_message(Ping())[0], np.zeros(nbytes, np.uint8)])
        self._connect()            # a new connection (and Hello) is served
        assert self.proc.poll() is None

    def close(self):
        if getattr(self, "sock", None) is not None:
            self.sock.close(0)
        if getattr(self, "ctx", None) is not None:
            self.ctx.term()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc.stdout.close()
        self._stderr.close()


def _header_id(head: bytes):
    """The id the server reads from a header (a non-empty string of at most 64 characters)."""
    import msgpack
    try:
        h = msgpack.unpackb(head, raw=False, strict_map_key=False, ext_hook=lambda c, d: None)
    except Exception:
        return None
    mid = h.get("id") if isinstance(h, dict) else None
    return mid if isinstance(mid, str) and 0 < len(mid) <= 64 else None


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    t = FuzzTarget(tmp_path_factory.mktemp("fuzz_server"))
    yield t
    try:
        # after the run: a new client is served, memory stayed bounded, nothing crashed inside
        with Client(t.address, timeout=REPLY_TIMEOUT, client_name="after the fuzz") as c:
            c.connect()
            c.ping()
        grown = _rss(t.proc.pid) - t.rss0
        print(f"fuzzed the server with {t.inputs} inputs ({t.dropped} oversized); memory grew by {grown / MB:.1f} MiB")
        assert grown < 64 * MB, f"server memory grew by {grown / MB:.0f} MiB over {t.inputs} inputs"
        assert "Traceback" not in t.stderr_path.read_text(), t.stderr_path.read_text()[-3000:]
    finally:
        t.close()
        import shutil
        shutil.rmtree(t.cache, ignore_errors=True)


# -- inputs ---------------------------------------------------------------------------------------
versions = st.one_of(st.tuples(st.integers(0, 3), st.integers(0, 5)),
                     st.tuples(st.integers(0, 2**31), st.integers(0, 2**31)))


@st.composite
def versioned(draw) -> list:
    """A valid request announced under a random protocol version (and, for Hello, a random
    protocol_version field)."""
    v = draw(versions)
    kind = draw(st.sampled_from(["ping", "status", "hello"]))
    msg = {"ping": Ping(), "status": Status("j" * 8), "hello": Hello("fuzz", "0", v)}[kind]
    return encode_message(msg, v)


inputs = st.one_of(raw, built_headers(), mutated(), mutated(), versioned())
FAST = settings(max_examples=1_000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
SLOW = settings(max_examples=100_000, deadline=None, suppress_health_check=list(HealthCheck))


@FAST
@given(frames=inputs, fresh=st.booleans())
def test_fuzz_the_running_server(target, frames, fresh):
    target.send(frames, fresh)


def test_frames_over_the_limit_close_only_their_connection(target):
    for n in (MB + 1, 2 * MB, 6 * MB):
        target.send_oversized(n)
    target.send(encode_message(Ping()), fresh=False)


@pytest.mark.slow
@SLOW
@given(frames=inputs, fresh=st.booleans())
def test_fuzz_the_running_server_100k(target, frames, fresh):
    target.send(frames, fresh)
