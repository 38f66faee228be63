"""Protocol 1.4: Settings.integrator ("implicit_euler" or "bdf2", both IPC solvers) and the peers that
predate it. A settings map without ``integrator`` means "implicit_euler" (the only IPC integrator of
1.0-1.3); a 1.4 client leaves the field out for an older server when that server would do the same
anyway (implicit Euler, or a scene for another backend) and refuses, naming the field, for BDF-2."""
import numpy as np
import pytest

from protocol import ProtocolError
from protocol.scene import Body, Scene, SceneError, Settings
from protocol.scenewire import scene_from_wire, scene_to_wire
from protocol.version import PROTOCOL_VERSION

V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
T = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], np.int32)


def _scene(integrator="bdf2", backend="ipc"):
    st = Settings(solver_quality="accurate", integrator=integrator, backend=backend)
    return Scene(settings=st, bodies=(Body("Jelly", "solid", V, T),))


def test_version_is_1_4_and_new_scenes_use_implicit_euler():
    assert PROTOCOL_VERSION >= (1, 4) and Settings().integrator == "implicit_euler"


def test_the_integrator_travels_and_its_absence_means_implicit_euler():
    assert scene_from_wire(scene_to_wire(_scene())).settings.integrator == "bdf2"
    wire = scene_to_wire(_scene())
    del wire["settings"]["integrator"]
    assert scene_from_wire(wire).settings.integrator == "implicit_euler"


def test_a_1_3_server_gets_no_integrator_field_unless_it_matters():
    wire = scene_to_wire(_scene("implicit_euler"), (1, 3))
    assert "integrator" not in wire["settings"]
    assert scene_from_wire(wire).settings.integrator == "implicit_euler"
    assert "integrator" not in scene_to_wire(_scene("bdf2", backend="mpm"), (1, 3))["settings"]  # MPM never reads it
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene("bdf2"), (1, 3))
    assert e.value.field == "scene.settings.integrator" and "1.3" in e.value.message


def test_unknown_integrator_is_refused_by_name():
    with pytest.raises(SceneError) as e:
        _scene("verlet").validate()
    assert e.value.field == "integrator" and "verlet" in str(e.value)
    wire = scene_to_wire(_scene())
    wire["settings"]["integrator"] = 2
    with pytest.raises(ProtocolError) as e:
        scene_from_wire(wire)
    assert "integrator" in e.value.field
