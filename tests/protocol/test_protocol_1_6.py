"""Protocol 1.6: a stiff body's collision_shape with shape_vertices / shape_triangles. Absent, the shape is
"mesh" (what a 1.5 peer did); a 1.6 client leaves the fields out for an older server when the shape is Mesh
and refuses, naming collision_shape, any other shape. The .clrscene file carries them. The box and
enclosure helpers the add-on and the server share are checked against hand-computed answers."""
import dataclasses

import numpy as np
import pytest

from protocol import ProtocolError
from protocol.collision_shapes import box_shape, outside_vertices, winding_numbers
from protocol.scene import Body, Material, Scene, SceneError, Settings
from protocol.scenefile import load_scene, save_scene
from protocol.scenewire import scene_from_wire, scene_to_wire
from protocol.version import PROTOCOL_VERSION

CUBE_V = np.array([[x, y, z] for z in (0, 1) for y in (0, 1) for x in (0, 1)], float) * 0.1
CUBE_T = np.array([[0, 2, 1], [1, 2, 3], [4, 5, 6], [5, 7, 6], [0, 1, 4], [1, 5, 4],
                   [2, 6, 3], [3, 6, 7], [0, 4, 2], [2, 4, 6], [1, 3, 5], [3, 7, 5]], np.int32)


def _scene(shape="mesh", sv=None, st=None, role="stiff"):
    b = Body("Crate", role, CUBE_V.copy(), CUBE_T.copy(), material=Material(density=500.0), collision_shape=shape,
             shape_vertices=sv, shape_triangles=st)
    return Scene(Settings(frame_start=1, frame_end=3), (b,))


def test_version_is_1_6_and_mesh_is_the_default():
    assert PROTOCOL_VERSION >= (1, 6)
    assert Body("a", "stiff", CUBE_V, CUBE_T).collision_shape == "mesh"


def test_shapes_travel_and_the_scene_file_keeps_them(tmp_path):
    sv, st = box_shape(CUBE_V * 1.5, np.eye(3))
    s = _scene("proxy", sv, st)
    s.validate()
    back = scene_from_wire(scene_to_wire(s))
    back.validate()
    b = back.bodies[0]
    assert b.collision_shape == "proxy"
    np.testing.assert_array_equal(b.shape_vertices, sv)
    np.testing.assert_array_equal(b.shape_triangles, st)
    p = tmp_path / "s.clrscene"
    save_scene(str(p), s)
    b2 = load_scene(str(p)).bodies[0]
    assert b2.collision_shape == "proxy" and b2.shape_vertices.shape == (8, 3)


def test_absent_means_mesh_and_a_1_5_server_gets_nothing_new_unless_it_matters():
    wire = scene_to_wire(_scene("box"))
    for k in ("collision_shape", "shape_vertices", "shape_triangles"):
        del wire["bodies"][0][k]
    assert scene_from_wire(wire).bodies[0].collision_shape == "mesh"
    old = scene_to_wire(_scene("mesh"), (1, 5))
    assert not {"collision_shape", "shape_vertices", "shape_triangles"} & set(old["bodies"][0])
    assert scene_from_wire(old).bodies[0].collision_shape == "mesh"
    with pytest.raises(ProtocolError) as e:
        scene_to_wire(_scene("convex_hull"), (1, 5))
    assert e.value.field.endswith("Crate.collision_shape") and "1.5" in e.value.message


def test_bad_shapes_are_refused_by_name():
    with pytest.raises(SceneError) as e:
        _scene("capsule").validate()
    assert e.value.obj == "Crate" and e.value.field == "collision_shape"
    with pytest.raises(SceneError) as e:
        _scene("box", role="solid").validate()
    assert e.value.field == "collision_shape"
    with pytest.raises(SceneError) as e:
        _scene("proxy").validate()
    assert e.value.field == "shape_vertices"
    with pytest.raises(SceneError) as e:
        _scene("proxy", CUBE_V.copy(), None).validate()
    with pytest.raises(SceneError) as e:
        _scene("proxy", CUBE_V.copy(), CUBE_T + 8).validate()
    assert e.value.field == "shape_triangles"


def test_box_in_rotated_axes_and_the_enclosure_test():
    c, s_ = np.cos(0.3), np.sin(0.3)
    R = np.array([[c, -s_, 0], [s_, c, 0], [0, 0, 1.0]])
    V = (CUBE_V - 0.05) @ R.T + [1.0, 2.0, 3.0]
    bv, bt = box_shape(V, R)
    # the box of a cube in its own axes is the cube: same corners (up to order)
    d = np.linalg.norm(bv[:, None] - V[None], axis=2)
    assert d.min(axis=1).max() < 1e-12
    # outward: positive enclosed volume 0.001 m^3
    a, b, cc = bv[bt[:, 0]], bv[bt[:, 1]], bv[bt[:, 2]]
    assert np.isclose(np.einsum("ij,ij->i", a, np.cross(b, cc)).sum() / 6.0, 1e-3)
    # winding numbers: 1 at the centre, 0 far away; vertices on the surface count as inside
    w = winding_numbers(np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]]), bv, bt)
    np.testing.assert_allclose(w, [1.0, 0.0], atol=1e-12)
    assert outside_vertices(V, bv, bt).size == 0
    # a proxy half the size leaves all 8 corners outside
    small = (bv - [1.0, 2.0, 3.0]) * 0.5 + [1.0, 2.0, 3.0]
    assert outside_vertices(V, small, bt).size == 8
