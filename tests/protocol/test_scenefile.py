"""Scene files (.clrscene): save/load round trip and refusal of foreign or damaged files."""
import msgpack
import pytest

from protocol import ProtocolError, load_scene, save_scene
from protocol.scenefile import scene_bytes
from scenes import assert_deep_equal, make_scene


def test_save_load_round_trip(tmp_path):
    scene = make_scene(n_frames=4, n_vertices=11, seed=9)
    p = tmp_path / "shot.clrscene"
    save_scene(p, scene)
    back = load_scene(p)
    assert_deep_equal(back, scene)
    assert scene_bytes(back) == scene_bytes(scene)  # canonical bytes: the resume hash is stable
    assert not list(tmp_path.glob("*.tmp*"))


def test_damaged_and_foreign_files_are_refused(tmp_path):
    scene = make_scene()
    d = msgpack.unpackb(scene_bytes(scene), raw=False)
    p = tmp_path / "x.clrscene"
    p.write_bytes(b"hello")
    with pytest.raises(ProtocolError):
        load_scene(p)
    bad = dict(d, version=[2, 0])
    p.write_bytes(msgpack.packb(bad, use_bin_type=True))
    with pytest.raises(ProtocolError) as e:
        load_scene(p)
    assert e.value.field == "version"
    bad = dict(d, arrays=d["arrays"][:-1])
    p.write_bytes(msgpack.packb(bad, use_bin_type=True))
    with pytest.raises(ProtocolError) as e:
        load_scene(p)
    assert e.value.field == "arrays"
    arrays = list(d["arrays"])
    arrays[0] = arrays[0][:-8]
    p.write_bytes(msgpack.packb(dict(d, arrays=arrays), use_bin_type=True))
    with pytest.raises(ProtocolError) as e:
        load_scene(p)
    assert e.value.field == "arrays[0]"
