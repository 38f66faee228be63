"""CurveZMQ encryption for remote use (issue 8 item 5): ``clearance-server keygen``, a server
bound off loopback that needs its key file and a secret file, clients that know (or do not
know) its public key, and a byte-recording TCP relay between them that shows what crosses the
network. Real server processes and real sockets throughout.
"""
import os
import socket
import stat
import subprocess
import sys
import threading

import pytest
import zmq

from protocol import Client, Done, Frame, RemoteError, ServerUnreachable
from protocol import keys
from scenes import expected_positions, make_scene

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq without CurveZMQ")
SECRET = "correct horse battery staple"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, timeout=60):
    """``clearance-server ARGS`` to completion, without any Clearance secret or key in its environment."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE_")}
    e["PYTHONPATH"] = ROOT
    return subprocess.run([sys.executable, "-m", "solver_server", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def keydir(tmp_path):
    r = _run("keygen", "--out", str(tmp_path / "keys"))
    assert r.returncode == 0, r.stderr
    return tmp_path / "keys", r.stdout


@pytest.fixture
def secret_file(tmp_path):
    p = tmp_path / "secret.txt"
    p.write_text(SECRET + "\n")
    p.chmod(0o600)
    return p


def _rss(pid: int) -> int:
    """Resident memory of a process, bytes (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def _local(address: str) -> str:
    """The loopback address of a server bound to 0.0.0.0."""
    return "tcp://127.0.0.1:" + address.rsplit(":", 1)[1]


def _remote_server(server_factory, tmp_path, keydir, secret_file, *extra):
    return server_factory("--bind", "tcp://0.0.0.0:0", "--secret-file", str(secret_file),
                          "--key-file", str(keydir / keys.SECRET_NAME), *extra,
                          env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})


def test_keygen_writes_a_private_secret_key_and_a_public_key(keydir, tmp_path):
    d, out = keydir
    sec, pub = d / keys.SECRET_NAME, d / keys.PUBLIC_NAME
    assert stat.S_IMODE(sec.stat().st_mode) == 0o600
    public, secret = keys.read_secret_key(str(sec))
    assert keys.read_public_key(str(pub)) == public == zmq.curve_public(secret)
    assert "secret-key" not in pub.read_text()
    assert f"server public key: {public.decode()}" in out
    assert keys.read_public_key(public.decode()) == public          # its 40 characters work as well
    again = _run("keygen", "--out", str(d))                          # never overwritten by accident
    assert again.returncode == 1 and "already exists" in again.stderr and "--force" in again.stderr
    assert keys.read_secret_key(str(sec))[1] == secret
    assert _run("keygen", "--out", str(d), "--force").returncode == 0
    assert keys.read_secret_key(str(sec))[1] != secret


def test_unusable_key_files_are_refused_naming_the_file(keydir, tmp_path):
    d, _ = keydir
    sec = d / keys.SECRET_NAME
    sec.chmod(0o644)
    with pytest.raises(ValueError, match="other users.*chmod 600"):
        keys.read_secret_key(str(sec))
    with pytest.raises(ValueError, match="holds no secret-key"):
        keys.read_secret_key(str(d / keys.PUBLIC_NAME))
    bad = tmp_path / "bad.key"
    bad.write_text('curve\n    public-key = "short"\n')
    with pytest.raises(ValueError, match="40 Z85 characters"):
        keys.read_public_key(str(bad))
    with pytest.raises(ValueError, match="neither"):
        keys.read_public_key("not a key and not a file")
    r = _run("serve", "--bind", "tcp://127.0.0.1:0", "--key-file", str(sec), timeout=30)
    assert r.returncode == 2 and str(sec) in r.stderr and "listening" not in r.stdout


def test_a_remote_bind_needs_a_key_unless_plaintext_is_asked_for(keydir, secret_file, server_factory, tmp_path):
    r = _run("serve", "--bind", "tcp://0.0.0.0:0", "--secret-file", str(secret_file), timeout=30)
    assert r.returncode == 2 and "without encryption" in r.stderr and "keygen" in r.stderr
    srv = server_factory("--bind", "tcp://0.0.0.0:0", "--secret-file", str(secret_file), "--plaintext",
                         env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    with Client(_local(srv.address), timeout=10.0, secret=SECRET) as c:
        c.connect()


def test_encrypted_bake_and_what_a_client_without_the_key_sees(keydir, secret_file, server_factory, tmp_path):
    d, _ = keydir
    srv = _remote_server(server_factory, tmp_path, d, secret_file)
    address = _local(srv.address)
    scene = make_scene(n_frames=3)
    with Client(address, timeout=10.0, secret=SECRET, server_key=str(d / keys.PUBLIC_NAME)) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "cache"))
        events = list(c.events(job, timeout=30.0))
    assert events[-1].state == "done"
    frames = {ev.frame: ev for ev in events if isinstance(ev, Frame)}
    assert sorted(frames) == [3, 4, 5]
    for f in (3, 4, 5):
        assert (frames[f].positions[0] == expected_positions(scene, f)["Cube.001"]).all()
    with Client(address, timeout=2.0, secret=SECRET) as c:                  # no key: named, not a silent timeout
        with pytest.raises(ServerUnreachable, match="requires encryption"):
            c.connect()
    wrong = zmq.curve_keypair()[0].decode()
    with Client(address, timeout=2.0, secret=SECRET, server_key=wrong) as c:
        with pytest.raises(ServerUnreachable, match="does not match the server's key"):
            c.connect()
    with Client(address, timeout=10.0, secret="guess", server_key=str(d / keys.PUBLIC_NAME)) as c:
        with pytest.raises(RemoteError) as e:                              # the secret still authenticates
            c.connect()
        assert e.value.code == "auth"


def test_a_handshake_that_failed_before_the_first_send_is_named(keydir, secret_file, server_factory, tmp_path):
    """The handshake runs as soon as the client connects; on a loaded machine it can fail (and
    ZeroMQ drop the connection's pipe) before connect() sends the Hello. That send must still name
    the reason, not report an unreachable server (a CI run saw exactly that)."""
    d, _ = keydir
    srv = _remote_server(server_factory, tmp_path, d, secret_file)
    address = _local(srv.address)
    with Client(address, timeout=5.0, secret=SECRET) as c:             # no key against an encrypted server
        assert c.poll(1.0) == []          # the handshake fails meanwhile, and the socket processes it
        with pytest.raises(ServerUnreachable, match="requires encryption"):
            c.connect()
    wrong = zmq.curve_keypair()[0].decode()
    with Client(address, timeout=2.0, secret=SECRET, server_key=wrong) as c:
        assert c.poll(1.0) == []
        with pytest.raises(ServerUnreachable, match="does not match the server's key"):
            c.connect()


def test_key_from_the_environment_and_a_key_against_a_plain_server(keydir, secret_file, server_factory, tmp_path):
    d, _ = keydir
    public, secret = keys.read_secret_key(str(d / keys.SECRET_NAME))
    srv = server_factory("--bind", "tcp://0.0.0.0:0", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state"),
                                                           "CLEARANCE_CURVE_SECRET_KEY": secret.decode(),
                                                           "CLEARANCE_SECRET_FILE": str(secret_file)})
    with Client(_local(srv.address), timeout=10.0, secret=SECRET, server_key=public.decode()) as c:
        c.connect()
        c.ping()
    plain = server_factory(env={"CLEARANCE_STATE_DIR": str(tmp_path / "state2")})
    with Client(plain.address, timeout=2.0, server_key=public.decode()) as c:
        with pytest.raises(ServerUnreachable, match="does not use encryption"):
            c.connect()


class Relay:
    """A TCP relay 127.0.0.1:port -> target that records every byte sent by the client."""

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream = bytearray()
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._stop:
            try:
                a, _ = self.listener.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(a, b, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(b, a, False), daemon=True).start()

    def _pipe(self, src, dst, record):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if record:
                    self.upstream += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self._stop = True
        self.listener.close()


@pytest.mark.parametrize("encrypted", [False, True])
def test_the_secret_and_the_scene_cross_the_network_only_encrypted(encrypted, keydir, secret_file, server_factory,
                                                                    tmp_path):
    d, _ = keydir
    if encrypted:
        srv = _remote_server(server_factory, tmp_path, d, secret_file)
    else:   # the control: the same traffic in clear text shows both
        srv = server_factory("--bind", "tcp://0.0.0.0:0", "--secret-file", str(secret_file), "--plaintext",
                             env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    relay = Relay(int(srv.address.rsplit(":", 1)[1]))
    try:
        key = str(d / keys.PUBLIC_NAME) if encrypted else None
        with Client(f"tcp://127.0.0.1:{relay.port}", timeout=10.0, secret=SECRET, server_key=key) as c:
            c.connect()
            job = c.submit(make_scene(n_frames=2), str(tmp_path / "cache"))
            assert [ev for ev in c.events(job, timeout=30.0) if isinstance(ev, Done)][0].state == "done"
    finally:
        relay.close()
    sent = bytes(relay.upstream)
    assert len(sent) > 1000
    for plain in (SECRET.encode(), "Cloth/with spaces é".encode(), str(tmp_path / "cache").encode()):
        assert (plain in sent) != encrypted, plain
    assert os.path.isdir(tmp_path / "cache" / "frames")


def test_authorized_keys_admit_only_listed_clients(keydir, secret_file, server_factory, tmp_path):
    """With --authorized-keys, a peer whose key is not listed cannot complete the handshake, so
    it cannot make the server hold anything: its 64 MiB never leave its own queue."""
    d, _ = keydir
    clients = tmp_path / "clients"
    for name in ("alice", "mallory"):
        r = _run("keygen", "--out", str(tmp_path / name), "--client", name)
        assert r.returncode == 0 and f"{name}.key_secret" in r.stdout, r.stderr
    clients.mkdir()
    (clients / "alice.key").write_bytes((tmp_path / "alice" / "alice.key").read_bytes())
    r = _run("serve", "--bind", "tcp://0.0.0.0:0", "--secret-file", str(secret_file), "--plaintext",
             "--authorized-keys", str(clients), timeout=30)
    assert r.returncode == 2 and "needs encryption" in r.stderr
    r = _run("serve", "--bind", "tcp://127.0.0.1:0", "--key-file", str(d / keys.SECRET_NAME),
             "--authorized-keys", str(tmp_path / "mallory" / "nothing"), timeout=30)
    assert r.returncode == 2 and "not a folder" in r.stderr
    srv = _remote_server(server_factory, tmp_path, d, secret_file, "--authorized-keys", str(clients))
    address = _local(srv.address)
    pub = str(d / keys.PUBLIC_NAME)
    with Client(address, timeout=10.0, secret=SECRET, server_key=pub,
                client_key=str(tmp_path / "alice" / "alice.key_secret")) as c:
        c.connect()
        job = c.submit(make_scene(n_frames=2), str(tmp_path / "cache"))
        assert list(c.events(job, timeout=30.0))[-1].state == "done"
    for own in (None, str(tmp_path / "mallory" / "mallory.key_secret")):   # a fresh key, an unlisted key
        with Client(address, timeout=2.0, secret=SECRET, server_key=pub, client_key=own) as c:
            with pytest.raises(ServerUnreachable, match="does not admit this client's key"):
                c.connect()
    # an unlisted peer that knows the server's public key and the secret offers 64 MiB
    import numpy as np
    from protocol import encode
    before = _rss(srv.proc.pid)
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.curve_publickey, s.curve_secretkey = zmq.curve_keypair()
    s.curve_serverkey = keys.read_public_key(pub)
    s.connect(address)
    for _ in range(8):
        try:   # once the server has refused its key the socket has no peer: sending would block
            s.send_multipart(encode("status", {"job_id": "j", "x": np.ones(8 << 20, np.uint8)}), flags=zmq.NOBLOCK)
        except zmq.Again:
            pass
    assert not s.poll(3000)                                  # nothing ever answers it ...
    s.close(0)
    ctx.term()
    assert _rss(srv.proc.pid) - before < 16 << 20            # ... and the server holds none of it
    with Client(address, timeout=10.0, secret=SECRET, server_key=pub,
                client_key=str(tmp_path / "alice" / "alice.key_secret")) as c:
        c.connect()
