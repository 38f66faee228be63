"""Settings.solver_quality (protocol 1.1) and the peers that predate it.

New scenes default to "accurate" (the Converged solver, issue 23); a scene map without the field (a 1.0 client, a 1.0 scene file)
means "accurate", the only solver 1.0 had. Checked over real sockets: a raw 1.0 client against
the server, a 1.1 client against a peer that answers as 1.0, and a bad value refused by name.
"""
import dataclasses
import json
import os
import threading
import uuid

import msgpack
import pytest
import zmq

from protocol import (Client, Hello, ProtocolError, RemoteError, SceneError, Settings, Submit, VersionMismatch,
                      Welcome, decode, decode_message, encode, encode_message, load_scene)
from protocol.scenefile import scene_bytes, scene_from_bytes
from protocol.scenewire import scene_to_wire
from protocol.version import PROTOCOL_VERSION
from scenes import make_scene
from solver_server.runtime.cache import scene_hash
from solver_server.runtime.server import Server

HERE = os.path.dirname(os.path.abspath(__file__))
V1_0_FILE = os.path.join(HERE, "data", "scene_v1_0.clrscene")
"""Written by protocol 1.0 (commit bdcbdc3, make_scene(n_frames=4, n_vertices=7, seed=5)), before
solver_quality existed: the bytes an artist's old .clrscene files hold."""


@pytest.fixture
def ctx():
    c = zmq.Context()
    yield c
    c.term()


@pytest.fixture
def server(ctx):
    srv = Server("tcp://127.0.0.1:0", context=ctx)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.stop()
    t.join(5)


def _with_quality(scene, quality):
    return dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, solver_quality=quality))


def _wire_without_quality(scene):
    """The scene map a 1.0 client sends: every 1.0 field, no solver_quality."""
    wire = scene_to_wire(_with_quality(scene, "accurate"), (1, 0))
    assert "solver_quality" not in wire["settings"]
    return wire


def _reply(sock, timeout_ms=10000):
    assert sock.poll(timeout_ms), "no reply"
    msg, _ = decode_message(sock.recv_multipart())
    return msg


def test_new_settings_default_to_accurate_and_a_bad_value_names_the_field():
    assert Settings().solver_quality == "accurate"
    Settings(solver_quality="accurate").validate()
    with pytest.raises(SceneError) as e:
        Settings(solver_quality="medium").validate()
    assert e.value.field == "solver_quality" and "solver_quality" in str(e.value) and "'fast'" in str(e.value)


@pytest.mark.parametrize("sent, expected", [(None, "accurate"), ("fast", "fast"), ("accurate", "accurate")])
def test_settings_without_the_field_decode_to_accurate_over_a_socket(ctx, sent, expected):
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer.connect(f"tcp://127.0.0.1:{port}")
        scene = make_scene()
        wire = _wire_without_quality(scene) if sent is None else scene_to_wire(_with_quality(scene, sent))
        version = (1, 0) if sent is None else PROTOCOL_VERSION
        dealer.send_multipart(encode("submit", {"scene": wire, "cache_dir": "/tmp/x"}, version=version), copy=False)
        assert router.poll(5000)
        msg, got_version = decode_message(router.recv_multipart(copy=False)[1:])
        assert got_version == version
        assert isinstance(msg, Submit) and msg.scene.settings.solver_quality == expected
        msg.scene.validate()
    finally:
        router.close(0)
        dealer.close(0)


def test_a_non_string_value_is_a_protocol_error_naming_the_field():
    wire = scene_to_wire(make_scene())
    wire["settings"]["solver_quality"] = 1
    with pytest.raises(ProtocolError) as e:
        decode_message(encode("submit", {"scene": wire, "cache_dir": "/tmp/x"}))
    assert e.value.field == "scene.settings.solver_quality"


def test_a_scene_file_written_by_protocol_1_0_loads_as_accurate():
    with open(V1_0_FILE, "rb") as f:
        raw = msgpack.unpackb(f.read(), raw=False)
    assert raw["version"] == [1, 0]                        # really an old file
    scene = load_scene(V1_0_FILE)
    assert scene.settings.solver_quality == "accurate"
    scene.validate()
    want = make_scene(n_frames=4, n_vertices=7, seed=5)
    assert scene.bodies[0].vertices.tolist() == want.bodies[0].vertices.tolist()
    # written again it becomes a current file that keeps the meaning
    again = scene_from_bytes(scene_bytes(scene))
    assert again.settings.solver_quality == "accurate"
    assert msgpack.unpackb(scene_bytes(scene), raw=False)["version"] == list(PROTOCOL_VERSION)


def test_a_1_0_client_is_served_and_its_scene_bakes_as_accurate(ctx, server, tmp_path):
    """A raw DEALER speaking 1.0 (envelope and hello), submitting a scene map with no
    solver_quality: the server welcomes it, accepts the job, and the job's scene is the
    accurate one (its cache records the hash of exactly that scene)."""
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(server.address)
    try:
        hello = Hello("old add-on", "0.1.0", (1, 0))
        s.send_multipart(encode_message(hello, (1, 0)))
        w = _reply(s)
        assert isinstance(w, Welcome) and w.parent == hello.id and w.protocol_version == PROTOCOL_VERSION
        scene = make_scene()
        cache = str(tmp_path / "cache")
        submit_id = uuid.uuid4().hex
        s.send_multipart(encode("submit", {"scene": _wire_without_quality(scene), "cache_dir": cache},
                                msg_id=submit_id, version=(1, 0)))
        accepted = _reply(s)
        assert type(accepted).__name__ == "Accepted", accepted
        while True:
            m = _reply(s, 60000)
            if type(m).__name__ == "Done":
                break
        assert m.state == "done", m
        with open(os.path.join(cache, "scene.json")) as f:
            digest = json.load(f)["scene_hash"]
        # what a 1.0 client meant: accurate, and (protocol 1.2) a walled MPM box, rate-independent sand
        meant = _with_quality(scene, "accurate")
        meant = dataclasses.replace(meant, settings=dataclasses.replace(meant.settings, mpm_domain="box"), bodies=tuple(
            dataclasses.replace(b, material=dataclasses.replace(b.material, grain_size=0.0)) for b in meant.bodies))
        assert digest == scene_hash(meant)
        assert digest != scene_hash(_with_quality(scene, "fast"))
    finally:
        s.close(0)


def test_a_bad_solver_quality_is_refused_naming_the_field(ctx, server, tmp_path):
    scene = _with_quality(make_scene(), "medium")
    with Client(server.address, context=ctx) as c:
        c.connect()
        with pytest.raises(RemoteError) as e:
            c.submit(scene, str(tmp_path / "cache"))
    assert e.value.code == "scene" and e.value.field == "solver_quality"
    assert "solver_quality" in e.value.message and "'medium'" in e.value.message


def _old_server(ctx):
    """A ROUTER that answers Hello as a 1.0 server and hands back the next message's raw body."""
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    got = {}

    def serve():
        if not router.poll(10000):
            return
        ident, *frames = router.recv_multipart()
        hello, _ = decode_message(frames)
        router.send_multipart([ident, *encode_message(Welcome("old", "0.1.0", (1, 0), parent=hello.id), (1, 0))])
        if router.poll(3000):
            ident, *frames = router.recv_multipart()
            env, body = decode(frames)
            got["version"], got["body"] = env.version, body
            router.send_multipart([ident, *encode("accepted", {"job_id": "j1"}, parent=env.id, version=(1, 0))])

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return router, t, f"tcp://127.0.0.1:{port}", got


def test_a_new_client_sends_a_1_0_server_only_what_it_knows(ctx):
    router, t, address, got = _old_server(ctx)
    try:
        with Client(address, context=ctx, timeout=5.0) as c:
            assert c.connect().protocol_version == (1, 0)
            assert c.peer_version() == (1, 0)
            assert c.submit(_with_quality(make_scene(), "accurate"), "/tmp/x") == "j1"
        t.join(5)
        assert got["version"] == PROTOCOL_VERSION            # the envelope says who we are
        assert "solver_quality" not in got["body"]["scene"]["settings"]   # ... the scene what it knows
        assert set(got["body"]["scene"]["settings"]) == {f.name for f in dataclasses.fields(Settings)} - {
            "solver_quality", "mpm_domain", "integrator"}   # mpm_domain (1.2): an IPC scene does not use it;
        # integrator (1.4): implicit Euler, what a 1.0 server does anyway, is left out
    finally:
        router.close(0)


def test_a_new_client_refuses_to_ask_a_1_0_server_for_fast(ctx):
    router, t, address, got = _old_server(ctx)
    try:
        with Client(address, context=ctx, timeout=5.0) as c:
            c.connect()
            with pytest.raises(VersionMismatch) as e:
                c.submit(_with_quality(make_scene(), "fast"), "/tmp/x")
            assert "solver_quality" in str(e.value) and "1.0" in str(e.value)
        t.join(5)
        assert "body" not in got                             # nothing was sent
    finally:
        router.close(0)
