"""Protocol 1.5: Material.air_drag and Material.pressure (cloth), the scene's force_fields (Blender's Wind,
Force and Vortex objects sampled per frame) and Body.field_weights. Absent fields mean what a 1.4 peer did
(no air, no pressure, no field, weights 1); a 1.5 client leaves them out for an older server when they
change nothing and refuses, naming the field, when that server could not honour them."""
import dataclasses

import numpy as np
import pytest

from protocol import ProtocolError
from protocol.scene import Body, ForceField, Material, Scene, SceneError, Settings
from protocol.scenefile import load_scene, save_scene
from protocol.scenewire import scene_from_wire, scene_to_wire
from protocol.version import PROTOCOL_VERSION

V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
T = np.array([[0, 1, 2], [1, 3, 2]], np.int32)
F = 3


def _wind(strength=2.0, **kw):
    m = np.repeat(np.eye(4)[None], F, 0)
    return ForceField("Wind", "wind", np.full(F, strength), m, **kw)


def _scene(drag=0.5, pressure=0.0, fields=(), weights=(1.0, 1.0, 1.0, 1.0)):
    st = Settings(frame_start=1, frame_end=F, solver_quality="accurate")
    cloth = Body("Flag", "cloth", V, T, material=Material(air_drag=drag, pressure=pressure), field_weights=weights)
    return Scene(settings=st, bodies=(cloth,), force_fields=tuple(fields))


def test_version_is_1_5_and_new_materials_feel_no_air():
    assert PROTOCOL_VERSION >= (1, 5)
    assert Material().air_drag == 0.0 and Material().pressure == 0.0 and Scene(Settings(), ()).force_fields == ()


def test_fields_weights_drag_and_pressure_travel():
    s = _scene(0.7, 120.0, [_wind(3.0, shape="point", falloff_power=2.0, use_max=True, distance_max=4.0)],
               (0.5, 1.0, 0.0, 1.0))
    s.validate()
    back = scene_from_wire(scene_to_wire(s))
    back.validate()
    b = back.bodies[0]
    assert b.material.air_drag == 0.7 and b.material.pressure == 120.0 and b.field_weights == (0.5, 1.0, 0.0, 1.0)
    f = back.force_fields[0]
    assert (f.kind, f.shape, f.falloff_power, f.use_max, f.distance_max) == ("wind", "point", 2.0, True, 4.0)
    np.testing.assert_array_equal(f.strength, np.full(F, 3.0))
    np.testing.assert_array_equal(f.matrix, np.repeat(np.eye(4)[None], F, 0))


def test_scene_file_keeps_the_fields(tmp_path):
    p = tmp_path / "s.clrscene"
    save_scene(str(p), _scene(fields=[_wind()]))
    assert load_scene(str(p)).force_fields[0].name == "Wind"


def test_absent_fields_mean_what_1_4_did():
    wire = scene_to_wire(_scene(0.7, 50.0, [_wind()], (0.2, 0.2, 0.2, 0.2)))
    del wire["force_fields"]
    del wire["bodies"][0]["field_weights"]
    del wire["bodies"][0]["material"]["air_drag"]
    del wire["bodies"][0]["material"]["pressure"]
    s = scene_from_wire(wire)
    assert s.force_fields == () and s.bodies[0].field_weights == (1.0, 1.0, 1.0, 1.0)
    assert s.bodies[0].material.air_drag == 0.0 and s.bodies[0].material.pressure == 0.0


def test_a_1_4_server_gets_nothing_new_unless_it_matters():
    wire = scene_to_wire(_scene(0.0, 0.0, (), (0.3, 0.3, 0.3, 0.3)), (1, 4))
    assert "force_fields" not in wire and "field_weights" not in wire["bodies"][0]
    assert "air_drag" not in wire["bodies"][0]["material"] and "pressure" not in wire["bodies"][0]["material"]
    assert scene_from_wire(wire).bodies[0].material.air_drag == 0.0
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene(drag=0.5), (1, 4))
    assert e.value.field.endswith("material.air_drag") and "1.4" in e.value.message
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene(drag=0.0, pressure=10.0), (1, 4))
    assert e.value.field.endswith("material.pressure")
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene(drag=0.0, fields=[_wind()]), (1, 4))
    assert e.value.field == "scene.force_fields"
    # a collider's air_drag is never read: left out for the old server whatever its value (solids read it
    # since 1.6, tests/protocol/test_protocol_1_6.py)
    wall = dataclasses.replace(_scene(0.0).bodies[0], role="collider", material=Material(air_drag=3.0))
    assert "air_drag" not in scene_to_wire(Scene(_scene().settings, (_scene(0.0).bodies[0], wall)),
                                           (1, 4))["bodies"][1]["material"]


def test_bad_fields_are_refused_by_name():
    with pytest.raises(SceneError) as e:
        _scene(fields=[dataclasses.replace(_wind(), kind="harmonic")]).validate()
    assert e.value.obj == "Wind" and e.value.field == "kind"
    with pytest.raises(SceneError) as e:
        _scene(fields=[dataclasses.replace(_wind(), strength=np.full(F + 1, 1.0))]).validate()
    assert e.value.field == "strength"
    with pytest.raises(SceneError) as e:
        _scene(fields=[dataclasses.replace(_wind(), strength=np.array([1.0, np.nan, 1.0]))]).validate()
    assert e.value.field == "strength"
    with pytest.raises(SceneError) as e:
        _scene(drag=-1.0).validate()
    assert e.value.field == "air_drag"
    with pytest.raises(SceneError) as e:
        _scene(weights=(1.0, float("inf"), 1.0, 1.0)).validate()
    assert e.value.field == "field_weights"
    wire = scene_to_wire(_scene(fields=[_wind()]))
    wire["force_fields"][0]["strength"] = wire["force_fields"][0]["strength"].astype(np.float32)
    with pytest.raises(ProtocolError) as e:
        scene_from_wire(wire)
    assert "strength" in e.value.field


def test_keyed_pressure_travels_and_a_1_4_server_refuses_it():
    ball = dataclasses.replace(_scene(0.0).bodies[0], pressure_samples=np.array([0.0, 10.0, 20.0]))
    s = Scene(_scene().settings, (ball,))
    s.validate()
    np.testing.assert_array_equal(scene_from_wire(scene_to_wire(s)).bodies[0].pressure_samples, [0.0, 10.0, 20.0])
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(s, (1, 4))
    assert e.value.field.endswith("pressure_samples")
    with pytest.raises(SceneError) as e:
        Scene(s.settings, (dataclasses.replace(ball, pressure_samples=np.array([0.0, np.inf, 1.0])),)).validate()
    assert e.value.field == "pressure_samples"


def test_vertex_maps_travel_and_a_1_4_server_refuses_them():
    vs = np.ones((4, 4))
    vs[:, 3] = 0.9
    sheet = dataclasses.replace(_scene(0.0).bodies[0], vertex_scales=vs)
    s = Scene(_scene().settings, (sheet,))
    s.validate()
    np.testing.assert_array_equal(scene_from_wire(scene_to_wire(s)).bodies[0].vertex_scales, vs)
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(s, (1, 4))
    assert e.value.field.endswith("vertex_scales")
    bad = vs.copy()
    bad[0, 2] = 0.0                                   # a massless vertex
    with pytest.raises(SceneError) as e:
        Scene(s.settings, (dataclasses.replace(sheet, vertex_scales=bad),)).validate()
    assert e.value.field == "vertex_scales"


def test_sewing_travels_and_a_1_4_server_refuses_it():
    sewn = Scene(_scene().settings, (dataclasses.replace(_scene(0.0).bodies[0], material=Material(sewing=12.0)),))
    assert scene_from_wire(scene_to_wire(sewn)).bodies[0].material.sewing == 12.0
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(sewn, (1, 4))
    assert e.value.field.endswith("material.sewing")
