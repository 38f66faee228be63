"""Protocol 1.7: Body.world_matrices, each simulated object's world matrix per frame, so whoever writes the
results (``clearance-server bake``) can write them in the object's space as the add-on's Bake does. Absent means
world space (what 1.6 did); a 1.7 client leaves it out for an older peer (no solver reads it); a 1.6 scene file
still loads. protocol/cache_layout.py names the files and converts the space for the add-on and the farm alike."""
import dataclasses

import msgpack
import numpy as np
import pytest

from protocol.cache_layout import clean_name, pc2_file_name, pc2_stem, to_local
from protocol.scene import Body, Scene, SceneError, Settings
from protocol.scenefile import load_scene, save_scene, scene_bytes
from protocol.scenewire import scene_from_wire, scene_to_wire
from protocol.version import PROTOCOL_VERSION

V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
T = np.array([[0, 1, 2], [1, 3, 2]], np.int32)
F = 3


def _matrices():
    m = np.repeat(np.eye(4)[None], F, 0)
    m[:, :3, 3] = [[0.0, 0.0, 1.0], [0.5, 0.0, 1.0], [1.0, 0.2, 1.0]]
    m[2, :3, :3] *= 2.0
    return m


def _scene(matrices=None):
    return Scene(Settings(frame_start=1, frame_end=F), (Body("Sheet", "cloth", V, T, world_matrices=matrices),))


def test_world_matrices_travel_and_are_absent_for_old_files(tmp_path):
    assert PROTOCOL_VERSION >= (1, 7)
    s = _scene(_matrices())
    s.validate()
    back = scene_from_wire(scene_to_wire(s))
    np.testing.assert_array_equal(back.bodies[0].world_matrices, _matrices())
    p = tmp_path / "s.clrscene"
    save_scene(str(p), s)
    np.testing.assert_array_equal(load_scene(str(p)).bodies[0].world_matrices, _matrices())
    # a 1.6 peer never hears of them (they cannot change its solve) ...
    old = scene_to_wire(s, (1, 6))
    assert "world_matrices" not in old["bodies"][0]
    assert scene_from_wire(old).bodies[0].world_matrices is None
    # ... and a 1.6 file (written without the field, version [1, 6]) loads: world space
    d = msgpack.unpackb(scene_bytes(_scene()), raw=False)
    d["version"] = [1, 6]
    (tmp_path / "old.clrscene").write_bytes(msgpack.packb(d, use_bin_type=True))
    assert load_scene(str(tmp_path / "old.clrscene")).bodies[0].world_matrices is None


@pytest.mark.parametrize("bad, words", [(np.eye(4)[None].repeat(F - 1, 0), "shape (3, 4, 4)"),
                                         ("nan", "NaN"), ("zero", "zero scale")])
def test_bad_world_matrices_are_refused_naming_the_object(bad, words):
    m = _matrices()
    if isinstance(bad, str):
        if bad == "nan":
            m[1, 0, 3] = np.nan
        else:
            m[2, :3, :3] = 0.0
        bad = m
    with pytest.raises(SceneError) as e:
        dataclasses.replace(_scene(), bodies=(Body("Sheet", "cloth", V, T, world_matrices=bad),)).validate()
    assert e.value.obj == "Sheet" and e.value.field == "world_matrices" and words in str(e.value)


def test_to_local_inverts_the_world_matrix():
    m = _matrices()[2]
    world = V @ m[:3, :3].T + m[:3, 3]
    np.testing.assert_allclose(to_local(world, m), V, atol=1e-6)
    assert to_local(world, m).dtype == np.float32


def test_file_names_are_the_addons():
    assert pc2_stem("Cube") == "Cube" and pc2_stem("Cube.001") != pc2_stem("Cube_001") == "Cube_001"
    assert pc2_stem("Cube.001").startswith("Cube_001.") and len(pc2_stem("Cube.001")) == len("Cube_001.") + 10
    assert pc2_stem("CON") != "CON" and clean_name("Cubé/ő") == "Cub__ő"
    assert pc2_file_name("Sand", "granular") == "Sand_particles.pc2" and pc2_file_name("Sand", "cloth") == "Sand.pc2"
