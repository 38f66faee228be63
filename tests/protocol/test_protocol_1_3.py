"""Protocol 1.3: Material.element ("linear" or "quadratic" tetrahedra for solids) and the peers that
predate it. A material map without ``element`` means "linear" (the only solid element of 1.0-1.2);
a 1.3 client leaves the field out for an older server when that server would do the same anyway
(non-solids, or linear solids) and refuses, naming the field, for a quadratic solid."""
import numpy as np
import pytest

from protocol import ProtocolError
from protocol.scene import Body, Material, Scene, Settings
from protocol.scenewire import scene_from_wire, scene_to_wire
from protocol.version import PROTOCOL_VERSION

V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
T = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], np.int32)


def _scene(element="quadratic", floor_element="quadratic"):
    st = Settings(solver_quality="accurate")
    jelly = Body("Jelly", "solid", V, T, material=Material(element=element))
    floor = Body("Floor", "collider", V - 2.0, T, material=Material(element=floor_element))
    return Scene(settings=st, bodies=(jelly, floor))


def test_version_is_at_least_1_3_and_new_materials_are_linear():
    assert PROTOCOL_VERSION >= (1, 3) and Material().element == "linear"


def test_the_element_travels_and_its_absence_means_linear():
    back = scene_from_wire(scene_to_wire(_scene()))
    assert [b.material.element for b in back.bodies] == ["quadratic", "quadratic"]
    wire = scene_to_wire(_scene())
    for b in wire["bodies"]:
        del b["material"]["element"]
    assert all(b.material.element == "linear" for b in scene_from_wire(wire).bodies)


def test_a_1_2_server_gets_no_element_field_unless_it_matters():
    wire = scene_to_wire(_scene("linear"), (1, 2))  # the collider's value is never read
    assert all("element" not in b["material"] for b in wire["bodies"])
    assert all(b.material.element == "linear" for b in scene_from_wire(wire).bodies)
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene("quadratic", "linear"), (1, 2))
    assert e.value.field == "scene.bodies.Jelly.material.element" and "Jelly" in e.value.message
    assert "1.2" in e.value.message


def test_wrong_type_is_a_protocol_error():
    wire = scene_to_wire(_scene())
    wire["bodies"][0]["material"]["element"] = 2
    with pytest.raises(ProtocolError) as e:
        scene_from_wire(wire)
    assert "element" in e.value.field
