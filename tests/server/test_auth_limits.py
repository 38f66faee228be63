"""Issue 8 item 5 (the cheap parts): what an unauthenticated peer can cost a server.

Wrong-secret guesses are throttled per address, a peer that has not said Hello gets nothing
bigger than one small frame parsed, and the per-connection handshake state is bounded.
Real servers on tcp loopback: a subprocess for the secret server, an in-process one where
the test counts the server's session table.
"""
import threading
import uuid

import numpy as np
import pytest
import zmq

from protocol import Client, Error, Hello, RemoteError, Status, Welcome, encode
from protocol.messages import decode_message, encode_message
from solver_server.runtime.security import PREAUTH_MAX_BYTES, AuthThrottle
from solver_server.runtime.server import Server


def test_wrong_secrets_from_one_peer_do_not_lock_out_others_at_its_address(server_factory, tmp_path):
    """Issue 20 item 6: five wrong secrets from one address used to lock the right client at the
    same address (a NAT, an SSH tunnel) out for 60 s. Each wrong connection is refused for good;
    the next connection with the right secret is welcome."""
    srv = server_factory("--secret", "right", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    for i in range(8):
        with Client(srv.address, timeout=10.0, secret=f"guess{i}") as c:
            with pytest.raises(RemoteError) as e:
                c.connect()
            assert e.value.code == "auth" and "wrong or missing secret" in e.value.message
    with Client(srv.address, timeout=10.0, secret="right") as c:
        c.connect()
        c.ping()


def test_a_connection_that_gave_a_wrong_secret_stays_refused(server_factory, tmp_path):
    srv = server_factory("--secret", "right", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    with Client(srv.address, timeout=10.0, secret="wrong") as c:
        with pytest.raises(RemoteError):
            c.connect()
        c.secret = "right"                       # the same connection cannot try again
        with pytest.raises(RemoteError) as e:
            c.connect()
        assert e.value.code == "auth" and "refused" in e.value.message


def test_throttle_window_and_lockout_follow_its_clock():
    now = [0.0]
    t = AuthThrottle(max_failures=3, window=10.0, lockout=30.0, clock=lambda: now[0])
    for _ in range(2):
        t.failure("10.0.0.1")
    now[0] = 11.0                       # the first two fell out of the window
    t.failure("10.0.0.1")
    assert t.locked_for("10.0.0.1") == 0.0
    t.failure("10.0.0.1")
    t.failure("10.0.0.1")
    assert t.locked_for("10.0.0.1") == 30.0 and t.locked_for("10.0.0.2") == 0.0
    now[0] = 41.0
    assert t.locked_for("10.0.0.1") == 0.0
    assert t.locked_for(None) == 0.0    # inproc/ipc peers have no address


def _raw(address):
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(address)
    return ctx, s


def _reply(sock):
    assert sock.poll(10000), "no reply"
    return decode_message(sock.recv_multipart())[0]


def test_nothing_big_is_parsed_before_hello(server_factory, tmp_path):
    srv = server_factory("--secret", "right", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    ctx, s = _raw(srv.address)
    try:
        big = encode("status", {"job_id": "j", "x": np.zeros(1 << 18, np.float32)}, msg_id=uuid.uuid4().hex)
        s.send_multipart(big)                                     # a small header and a 1 MB array frame
        err = _reply(s)
        assert isinstance(err, Error) and err.code == "auth" and str(PREAUTH_MAX_BYTES) in err.message
        s.send_multipart(encode("status", {"job_id": "x" * (PREAUTH_MAX_BYTES + 1)}))   # one big frame
        err = _reply(s)
        assert err.code == "auth" and err.parent is None
        s.send_multipart(encode_message(Hello("raw", "0", secret="right")))   # then a Hello works
        assert isinstance(_reply(s), Welcome)
    finally:
        s.close(0)
        ctx.term()


def test_the_session_table_is_bounded():
    ctx = zmq.Context()
    srv = Server("tcp://127.0.0.1:0", context=ctx, max_sessions=20)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    clients = []
    try:
        for i in range(60):
            c = Client(srv.address, timeout=10.0, client_name=f"c{i}", context=ctx)
            c.connect()
            clients.append(c)
        assert len(srv.sessions) == 20
        clients[-1].ping()
        with pytest.raises(RemoteError) as e:      # clients[-1] is known: its request is served
            clients[-1].status("no-such-job")
        assert e.value.code == "unknown_job"
        with pytest.raises(RemoteError) as e:      # the least recently seen was forgotten
            clients[0]._request(Status("no-such-job"), ())
        assert e.value.code == "handshake"
        clients[0].connect()                       # and says Hello again
        with pytest.raises(RemoteError) as e:
            clients[0].status("no-such-job")
        assert e.value.code == "unknown_job"
    finally:
        for c in clients:
            c.close()
        srv.stop()
        t.join(10)
        ctx.term()


def test_junk_before_hello_is_limited_per_connection_not_per_address():
    """Issue 20 item 6: a peer's messages before Hello are limited per connection. Past its
    budget they are refused undecoded; a client at the same address still gets in, and peers
    that already said Hello keep being served. A real in-process server on tcp loopback, its
    limit lowered to 4 messages a minute."""
    from solver_server.runtime.security import PreauthRate
    ctx = zmq.Context()
    srv = Server("tcp://127.0.0.1:0", context=ctx, secret="right")
    srv.preauth_rate = PreauthRate(max_messages=4, window=60.0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    clients = []
    junk = ctx.socket(zmq.DEALER)
    junk.setsockopt(zmq.LINGER, 0)
    junk.connect(srv.address)
    try:
        first = Client(srv.address, timeout=10.0, client_name="first", context=ctx, secret="right")
        first.connect()
        clients.append(first)
        for i in range(5):
            junk.send_multipart(encode("status", {"job_id": "j"}, msg_id=uuid.uuid4().hex))
            err = _reply(junk)
            assert err.code == "auth"
        assert "too many messages from this connection" in err.message   # the fifth, undecoded
        late = Client(srv.address, timeout=10.0, client_name="late", context=ctx, secret="right")
        clients.append(late)
        late.connect()                              # same address, another connection: welcome
        with pytest.raises(RemoteError) as e:       # the authenticated one is still served
            first.status("no-such-job")
        assert e.value.code == "unknown_job"
    finally:
        junk.close(0)
        for c in clients:
            c.close()
        srv.stop()
        t.join(10)
        ctx.term()


def test_preauth_rate_window_follows_its_clock():
    from solver_server.runtime.security import PreauthRate
    now = [0.0]
    r = PreauthRate(max_messages=2, window=10.0, max_addresses=2, clock=lambda: now[0])
    assert r.allow("a") == 0 and r.allow("a") == 0
    assert r.allow("a") == 10.0 and r.allow("b") == 0      # per address
    now[0] = 10.5                                          # the first two expired
    assert r.allow("a") == 0
    assert r.allow(None) == 0                              # inproc/ipc peers have no address
    r.allow("c")
    assert "b" not in r._seen and len(r._seen) == 2        # bounded: least recently seen dropped


def test_a_client_receiving_frames_keeps_its_session_and_can_cancel():
    """Issue 20 item 5: Hellos of many other clients used to evict a client that only received
    frames, whose Cancel then failed ("send Hello first") while its job ran on. The owner of a
    queued or running job is never evicted; a real in-process server with 8 sessions."""
    from protocol import Done
    from scenes import make_scene
    import tempfile
    ctx = zmq.Context()
    srv = Server("tcp://127.0.0.1:0", context=ctx, max_sessions=8)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    others = []
    try:
        with tempfile.TemporaryDirectory() as tmp, Client(srv.address, timeout=30.0, context=ctx) as owner:
            owner.connect()
            job = owner.submit(make_scene(n_frames=4, debug_frame_delay=60.0), tmp + "/cache")
            for i in range(40):                     # five times the table
                c = Client(srv.address, timeout=10.0, client_name=f"o{i}", context=ctx)
                c.connect()
                others.append(c)
            assert len(srv.sessions) <= 9
            reply = owner.cancel(job)
            assert reply.state in ("cancelling", "cancelled")
            ends = [ev for ev in owner.events(job, timeout=30.0) if isinstance(ev, Done)]
            assert ends[-1].state == "cancelled"
        with pytest.raises(RemoteError) as e:       # an idle client was evicted as before
            others[0]._request(Status("no-such-job"), ())
        assert e.value.code == "handshake"
    finally:
        for c in others:
            c.close()
        srv.stop()
        t.join(10)
        ctx.term()
