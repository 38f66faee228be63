"""Issue 8 items 4 and 9: inputs that cannot be baked are refused at submit, naming the object
and the field, before any solve.

A real ``python -m solver_server serve`` subprocess on tcp loopback; each bad scene is sent by a
real client, refused with ``RemoteError`` (code ``scene``), and the server keeps serving (a
good scene bakes afterwards on the same server).
"""
import dataclasses

import pytest

from protocol import Client, Done, RemoteError
from scenes import make_scene
from protocol.scene import material_label, settings_label


def _refusal(address: str, scene, folder) -> RemoteError:
    """The RemoteError with which the server refuses ``scene`` (the test fails if accepted)."""
    with Client(address, timeout=10.0) as c:
        c.connect()
        with pytest.raises(RemoteError) as e:
            c.submit(scene, str(folder))
        c.ping()   # the server is still serving
        return e.value


def _bakes(address: str, scene, folder) -> str:
    with Client(address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(folder))
        return [ev for ev in c.events(job, timeout=30.0) if isinstance(ev, Done)][-1].state


def _renamed(scene, i: int, name: str):
    bodies = list(scene.bodies)
    bodies[i] = dataclasses.replace(bodies[i], name=name)
    return dataclasses.replace(scene, bodies=tuple(bodies))


@pytest.mark.parametrize("name", ["Cube.001\0", "Cube\n001", "\x7f", "x" * 1025])
def test_body_names_with_control_characters_are_refused(server, tmp_path, name):
    # Before: "a" and "a\0" collapsed into one entry of the frame cache (numpy strips the NUL).
    scene = _renamed(make_scene(), 1, name)
    err = _refusal(server.address, scene, tmp_path / "c")
    assert err.code == "scene" and err.field == "name" and err.obj == name, err
    assert not (tmp_path / "c").exists()                      # refused before anything was written


def test_names_that_clean_alike_stay_apart_in_the_frame_cache(server, tmp_path):
    scene = make_scene()
    scene = _renamed(_renamed(scene, 0, "Cube.001"), 1, "Cube_001")
    with Client(server.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(tmp_path / "c"))
        frames = {ev.frame: ev for ev in c.events(job, timeout=30.0) if type(ev).__name__ == "Frame"}
    last = frames[max(frames)]
    assert list(last.names) == ["Cube.001", "Cube_001"]
    assert (last.positions[0] != last.positions[1]).any()


NAN = float("nan")

BAD_INPUTS = [   # (where, field, value): issue 8 item 9's cases and the brief's absurd inputs
    ("material", "bending_stiffness", NAN),     # before: "Factor is exactly singular", no object named
    ("material", "friction_angle", NAN),        # before: finished "done"
    ("material", "youngs_modulus", 1e30),       # before: finished "done" with no warning
    ("material", "youngs_modulus", 0.0),
    ("material", "youngs_modulus", NAN),
    ("material", "density", -5.0),
    ("material", "poisson_ratio", 0.5),
    ("material", "thickness", -0.002),
    ("body", "initial_velocity", (1e9, 0.0, 0.0)),  # before: finished "done"
    ("settings", "fps", 0.0),                   # dt = 1 / (fps * substeps) <= 0
    ("settings", "fps", float("-inf")),
    ("settings", "substeps", 0),
    ("settings", "newton_tol", NAN),
    ("settings", "contact_gap", -1e-3),
    ("settings", "gravity", (0.0, 0.0, NAN)),
]


def _bad_scene(where: str, field: str, value):
    scene = make_scene()
    if where == "settings":
        return dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, **{field: value}))
    bodies = list(scene.bodies)
    b = bodies[1]
    bodies[1] = (dataclasses.replace(b, material=dataclasses.replace(b.material, **{field: value}))
                 if where == "material" else dataclasses.replace(b, **{field: value}))
    return dataclasses.replace(scene, bodies=tuple(bodies))


def test_bad_values_are_refused_over_the_socket_naming_object_and_field(server, tmp_path):
    for i, (where, field, value) in enumerate(BAD_INPUTS):
        folder = tmp_path / f"c{i}"
        err = _refusal(server.address, _bad_scene(where, field, value), folder)
        want_obj = None if where == "settings" else make_scene().bodies[1].name
        assert (err.code, err.field) == ("scene", field), (field, value, err)
        assert (err.obj or None) == want_obj, (field, err)
        label = material_label(field) if where == "material" else settings_label(field)
        assert label in err.message or field == "initial_velocity", err.message
        assert not folder.exists()      # refused before any solve: nothing written
    assert _bakes(server.address, make_scene(), tmp_path / "good") == "done"   # and the server still bakes
