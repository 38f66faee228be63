"""Protocol 1.2: Settings.mpm_domain and Material.grain_size, and the peers that predate them.

A scene map without mpm_domain means "box" (the walled domain every 1.0/1.1 peer had); a material
without grain_size means 0 (rate-independent sand). A 1.2 client leaves either field out for an
older server when that server would do the same anyway, and refuses (naming the field) otherwise.
"""
import dataclasses

import numpy as np
import pytest
import zmq

from protocol import ProtocolError, SceneError, Settings, load_scene
from protocol.scene import Body, Material, Scene
from protocol.scenewire import scene_from_wire, scene_to_wire
from scenes import make_scene

from test_protocol_solver_quality import V1_0_FILE


def _sand_scene(mpm_domain="auto", grain_size=1e-3):
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    t = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], np.int32)
    st = Settings(backend="mpm", mpm_domain=mpm_domain, solver_quality="accurate")
    sand = Body("Sand", "granular", v, t, material=Material(mpm_material="sand", grain_size=grain_size))
    floor = Body("Floor", "collider", v - 2.0, t, material=Material(grain_size=0.5))
    return Scene(settings=st, bodies=(sand, floor))


def test_new_scenes_default_to_the_open_domain_and_1_mm_grains():
    assert Settings().mpm_domain == "auto" and Material().grain_size == 1e-3
    with pytest.raises(SceneError) as e:
        Settings(mpm_domain="sphere").validate()
    assert e.value.field == "mpm_domain" and "'auto'" in str(e.value)
    with pytest.raises(SceneError) as e:
        Material(grain_size=-1e-3).validate("Sand")
    assert e.value.field == "grain_size" and e.value.obj == "Sand"


def test_maps_without_the_fields_mean_what_1_1_did():
    wire = scene_to_wire(_sand_scene("box", 0.0), (1, 1))
    assert "mpm_domain" not in wire["settings"]
    assert all("grain_size" not in b["material"] for b in wire["bodies"])
    back = scene_from_wire(wire)
    assert back.settings.mpm_domain == "box"
    assert back.bodies[0].material.grain_size == 0.0 and back.bodies[1].material.grain_size == 0.0
    # a 1.2 peer gets and keeps the new values
    cur = scene_from_wire(scene_to_wire(_sand_scene()))
    assert cur.settings.mpm_domain == "auto" and cur.bodies[0].material.grain_size == 1e-3
    assert cur.bodies[1].material.grain_size == 0.5


def test_a_1_1_server_is_not_asked_for_what_it_cannot_do():
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_sand_scene("auto", 0.0), (1, 1))
    assert e.value.field == "scene.settings.mpm_domain" and "1.1" in e.value.message
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_sand_scene("box", 2e-3), (1, 1))
    assert e.value.field == "scene.bodies.Sand.material.grain_size" and "Sand" in e.value.message


def test_fields_a_scene_does_not_use_are_simply_left_out_for_a_1_1_server():
    """An IPC scene (default Settings: auto domain, 1 mm grains on every material) goes to a 1.1
    server unchanged in meaning: neither field is read by its backend."""
    sc = make_scene(backend="ipc", solver_quality="accurate")
    wire = scene_to_wire(sc, (1, 1))
    assert "mpm_domain" not in wire["settings"]
    assert all("grain_size" not in b["material"] for b in wire["bodies"])
    # a collider's grain size is ignored even in an MPM scene
    sc = _sand_scene("box", 0.0)
    floor = dataclasses.replace(sc.bodies[1], material=Material(grain_size=0.3))
    scene_to_wire(dataclasses.replace(sc, bodies=(sc.bodies[0], floor)), (1, 1))


def test_a_1_0_scene_file_loads_with_walls_and_rate_independent_sand():
    scene = load_scene(V1_0_FILE)
    assert scene.settings.mpm_domain == "box"
    assert all(b.material.grain_size == 0.0 for b in scene.bodies)


def _server_1_1(ctx):
    """A ROUTER that answers Hello as a 1.1 server and records the next message's raw body."""
    import threading

    from protocol import Welcome, decode, decode_message, encode, encode_message
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    got = {}

    def serve():
        if not router.poll(10000):
            return
        ident, *frames = router.recv_multipart()
        hello, _ = decode_message(frames)
        router.send_multipart([ident, *encode_message(Welcome("old", "0.2.0", (1, 1), parent=hello.id), (1, 1))])
        if router.poll(3000):
            ident, *frames = router.recv_multipart()
            env, body = decode(frames)
            got["body"] = body
            router.send_multipart([ident, *encode("accepted", {"job_id": "j1"}, parent=env.id, version=(1, 1))])

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return router, t, f"tcp://127.0.0.1:{port}", got


@pytest.fixture
def ctx():
    c = zmq.Context()
    yield c
    c.term()


def test_a_1_1_server_over_a_socket(ctx):
    """The real Client against a peer answering as 1.1: a sand scene with the 1.2 defaults is refused
    before anything is sent (VersionMismatch naming the material field); with the 1.1 meanings
    (box, grain size 0) it is sent without the new fields."""
    from protocol import Client, VersionMismatch
    router, t, address, got = _server_1_1(ctx)
    try:
        with Client(address, context=ctx, timeout=5.0) as c:
            assert c.connect().protocol_version == (1, 1)
            with pytest.raises(VersionMismatch) as e:
                c.submit(_sand_scene("box", 1e-3), "/tmp/x")
            assert "grain_size" in str(e.value) and "Sand" in str(e.value) and "1.1" in str(e.value)
            with pytest.raises(VersionMismatch) as e:
                c.submit(_sand_scene("auto", 0.0), "/tmp/x")
            assert "mpm_domain" in str(e.value)
            assert c.submit(_sand_scene("box", 0.0), "/tmp/x") == "j1"
        t.join(5)
        sent = got["body"]["scene"]
        assert "mpm_domain" not in sent["settings"]
        assert all("grain_size" not in b["material"] for b in sent["bodies"])
    finally:
        router.close(0)
