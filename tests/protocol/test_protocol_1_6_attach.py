"""Protocol 1.6: attachments (Body.attach_to, Body.attach_indices), keyframed Shrink (Body.shrink_samples,
Body.shrink_weights) and air drag on solid, stiff and rod bodies. Absent fields mean what a 1.5 peer did (no
attachment, a fixed rest size); a 1.6 client leaves them out for an older server when unset and refuses,
naming the field, when that server could not honour them."""
import dataclasses

import numpy as np
import pytest

from protocol import ProtocolError
from protocol.scene import Body, Material, Scene, SceneError, Settings
from protocol.scenefile import load_scene, save_scene
from protocol.scenewire import scene_from_wire, scene_to_wire
from protocol.version import PROTOCOL_VERSION

V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
T = np.array([[0, 1, 2], [1, 3, 2]], np.int32)
BOX = V + [0.0, 0.0, -1.0]
F = 3


def _scene(attach=True, shrink=None, weights=None):
    st = Settings(frame_start=1, frame_end=F)
    cape = Body("Cape", "cloth", V, T, attach_to="Crate" if attach else "",
                attach_indices=np.array([0, 1], np.int32) if attach else np.zeros(0, np.int32),
                shrink_samples=shrink, shrink_weights=weights)
    crate = Body("Crate", "collider", BOX, T)
    return Scene(settings=st, bodies=(cape, crate))


def test_version_is_1_6_and_bodies_start_unattached():
    assert PROTOCOL_VERSION >= (1, 6)
    b = Body("B", "cloth", V, T)
    assert b.attach_to == "" and b.attach_indices.size == 0 and b.shrink_samples is None


def test_attachment_and_keyed_shrink_travel(tmp_path):
    s = _scene(shrink=np.array([0.0, 0.1, 0.2]), weights=np.array([1.0, 1.0, 0.5, 0.0]))
    s.validate()
    back = scene_from_wire(scene_to_wire(s))
    back.validate()
    b = back.bodies[0]
    assert b.attach_to == "Crate"
    np.testing.assert_array_equal(b.attach_indices, [0, 1])
    np.testing.assert_array_equal(b.shrink_samples, [0.0, 0.1, 0.2])
    np.testing.assert_array_equal(b.shrink_weights, [1.0, 1.0, 0.5, 0.0])
    p = tmp_path / "s.clrscene"
    save_scene(str(p), s)
    assert load_scene(str(p)).bodies[0].attach_to == "Crate"


def test_absent_fields_mean_what_1_5_did():
    wire = scene_to_wire(_scene())
    for k in ("attach_to", "attach_indices", "shrink_samples", "shrink_weights"):
        del wire["bodies"][0][k]
    b = scene_from_wire(wire).bodies[0]
    assert b.attach_to == "" and b.attach_indices.size == 0 and b.shrink_samples is None


def test_a_1_5_server_gets_nothing_new_unless_it_matters():
    wire = scene_to_wire(_scene(attach=False), (1, 5))
    assert not {"attach_to", "attach_indices", "shrink_samples", "shrink_weights"} & set(wire["bodies"][0])
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene(), (1, 5))
    assert e.value.field.endswith("attach_to") and "1.5" in e.value.message
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene(attach=False, shrink=np.array([0.0, 0.1, 0.2])), (1, 5))
    assert e.value.field.endswith("shrink_samples")
    # air drag on a solid: read since 1.6 only
    solid = Body("Ball", "solid", V, T, material=Material(air_drag=2.0))
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(Scene(Settings(frame_start=1, frame_end=F), (solid,)), (1, 5))
    assert e.value.field.endswith("material.air_drag")
    ok = scene_to_wire(Scene(Settings(frame_start=1, frame_end=F), (dataclasses.replace(
        solid, material=Material(air_drag=0.0)),)), (1, 5))
    assert "attach_to" not in ok["bodies"][0]


def test_bad_attachments_are_refused_by_name():
    s = _scene()
    cape, crate = s.bodies
    for bad, field in ((dataclasses.replace(cape, attach_to="Nowhere"), "attach_to"),
                       (dataclasses.replace(cape, attach_to="Cape"), "attach_to"),
                       (dataclasses.replace(cape, attach_indices=np.array([0, 9], np.int32)), "attach_indices"),
                       (dataclasses.replace(cape, attach_indices=np.zeros(0, np.int32)), "attach_indices"),
                       (dataclasses.replace(cape, pin_indices=np.array([1], np.int32)), "attach_indices")):
        with pytest.raises(SceneError) as e:
            Scene(s.settings, (bad, crate)).validate()
        assert e.value.obj == "Cape" and e.value.field == field
    rod = Body("Rope", "rod", V, T, edges=np.array([[0, 1]], np.int32))
    with pytest.raises(SceneError) as e:
        Scene(s.settings, (dataclasses.replace(cape, attach_to="Rope"), crate, rod)).validate()
    assert "surface" in str(e.value)
    with pytest.raises(SceneError) as e:
        _scene(shrink=np.array([0.0, 0.95, 0.2])).validate()
    assert e.value.field == "shrink_samples"
