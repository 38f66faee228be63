"""A remote server with CurveZMQ encryption, reached from the add-on's preferences (Remote
Server, Shared Secret, Server Public Key): the bake comes back; a wrong key is reported
naming the problem. Real bpy, a real ``clearance-server serve`` subprocess with keys from
``clearance-server keygen``."""
import os
import subprocess
import sys

import bpy
import numpy as np
import pytest
import zmq

from conftest import addon
from helpers import cube, make_linear, world_positions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq without CurveZMQ")


def _cli(*args, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE_")}
    e["PYTHONPATH"] = ROOT
    e.update(env or {})
    return e, [sys.executable, "-m", "solver_server", *args]


def _serve(tmp_path, *extra):
    """A ``clearance-server serve`` with keys from keygen: yields (address, server.key path)."""
    env, cmd = _cli("keygen", "--out", str(tmp_path / "keys"))
    assert subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=60).returncode == 0
    (tmp_path / "secret").write_text("s3cret\n")
    env, cmd = _cli("serve", "--bind", "tcp://127.0.0.1:0", "--key-file", str(tmp_path / "keys" / "server.key_secret"),
                    *extra, env={"CLEARANCE_SECRET_FILE": str(tmp_path / "secret"),
                                 "CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert "listening on" in line, line
    yield line.split()[-1], str(tmp_path / "keys" / "server.key")
    proc.kill()
    proc.wait(10)
    proc.stdout.close()


@pytest.fixture
def encrypted_server(tmp_path):
    yield from _serve(tmp_path)


@pytest.fixture
def listed_clients_server(tmp_path):
    """An encrypted server with --authorized-keys admitting only client "alice" ("mallory" has a key too)."""
    for name in ("alice", "mallory"):
        env, cmd = _cli("keygen", "--out", str(tmp_path / name), "--client", name)
        assert subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=60).returncode == 0
    (tmp_path / "clients").mkdir()
    (tmp_path / "clients" / "alice.key").write_bytes((tmp_path / "alice" / "alice.key").read_bytes())
    yield from _serve(tmp_path, "--authorized-keys", str(tmp_path / "clients"))


def _remote_prefs(address: str, server_key: str, timeout: float):
    prefs = addon("preferences").get()
    prefs.server_mode, prefs.remote_address, prefs.secret = "REMOTE", address, "s3cret"
    prefs.server_key, prefs.timeout = server_key, timeout
    return prefs


def test_bake_through_an_encrypted_remote_server(blender, encrypted_server, tmp_path):
    address, public_key_file = encrypted_server
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 5
    ob = cube("box", size=1.0, location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    twist = ob.modifiers.new("twist", "SIMPLE_DEFORM")   # keyed deformation: only the cache keeps it
    twist.angle = 0.0
    twist.keyframe_insert("angle", frame=1)
    twist.angle = 1.0
    twist.keyframe_insert("angle", frame=5)
    make_linear(ob)
    s = scene.clearance
    s.backend = "none"
    s.cache_folder = str(tmp_path / "cache")
    prefs = _remote_prefs(address, "", 3.0)
    expected = {f: world_positions(ob, f) for f in range(1, 6)}

    prefs.server_key = ""                         # no key: the add-on says encryption is required
    with pytest.raises(RuntimeError, match="requires encryption"):
        bpy.ops.clearance.bake()
    prefs.server_key = zmq.curve_keypair()[0].decode()          # someone else's key
    with pytest.raises(RuntimeError, match="does not match the server's key"):
        bpy.ops.clearance.bake()

    prefs.server_key = public_key_file            # the server.key file from keygen
    prefs.timeout = 30.0
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    assert s.frames_baked == 5 and s.last_error == ""
    ob.modifiers.remove(ob.modifiers["twist"])
    assert np.abs(world_positions(ob, 1) - world_positions(ob, 5)).max() > 0.1
    for f, want in expected.items():
        assert np.abs(world_positions(ob, f) - want).max() < 1e-5, f


def test_client_key_preference_reaches_a_server_that_admits_listed_clients(blender, listed_clients_server, tmp_path,
                                                                        monkeypatch):
    """Preferences > Client Key (this machine's NAME.key_secret) is what a server with --authorized-keys
    admits: no key or an unlisted one is refused naming the Client Key preference, a listed one bakes,
    an unsafe key file is refused naming the file and the preference."""
    monkeypatch.delenv("CLEARANCE_CLIENT_KEY_FILE", raising=False)
    address, public_key_file = listed_clients_server
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    ob = cube("box", size=1.0, location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    s = scene.clearance
    s.backend = "none"
    s.cache_folder = str(tmp_path / "cache")
    prefs = _remote_prefs(address, public_key_file, 3.0)
    for key in ("", str(tmp_path / "mallory" / "mallory.key_secret")):   # a fresh key, an unlisted key
        prefs.client_key = key
        with pytest.raises(RuntimeError, match="does not admit this client's key.*Clearance > Client Key"):
            bpy.ops.clearance.bake()
    leaked = tmp_path / "alice" / "alice.key_secret"
    leaked.chmod(0o644)
    prefs.client_key = str(leaked)
    with pytest.raises(RuntimeError, match="can be read by other users.*Clearance > Client Key"):
        bpy.ops.clearance.bake()
    leaked.chmod(0o600)
    prefs.timeout = 30.0
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    assert s.frames_baked == 3 and s.last_error == ""
