"""Issue 8 item 4: objects whose names clean to the same file name keep separate .pc2 caches.

Before the fix ``bpy.path.clean_name`` alone named the file, so "Cube.001" and "Cube_001" both
wrote ``Cube_001.pc2`` and both played the motion of whichever was written last (1 m off). A real
bake through a real solver server (backend "none": each object's own keyed motion comes back).
"""
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, make_linear, world_positions
from protocol.pc2 import read_pc2

NAMES = ("Cube.001", "Cube_001", "Cube 001", "Cubé")


def _keyed_cube(name: str, x: float, dz: float, frames=(1, 6)) -> bpy.types.Object:
    """A cube of its own size moving up by ``dz`` and twisting by ``dz`` radians (a Simple
    Deform modifier): once the modifier is gone only its own cache reproduces its shapes."""
    ob = cube(name, size=0.5 + dz, location=(x, 0, 1))
    ob.clearance.role = "SOLID"
    tw = ob.modifiers.new("twist", "SIMPLE_DEFORM")
    tw.angle = 0.0
    ob.keyframe_insert("location", index=2, frame=frames[0])
    tw.keyframe_insert("angle", frame=frames[0])
    ob.location.z = 1.0 + dz
    tw.angle = dz
    ob.keyframe_insert("location", index=2, frame=frames[1])
    tw.keyframe_insert("angle", frame=frames[1])
    make_linear(ob)
    return ob


def _setup(tmp_path, server, frames=(1, 6)):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames
    s = scene.clearance
    s.backend = "none"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")


def test_names_that_clean_alike_get_their_own_cache_and_motion(blender, server, tmp_path):
    _setup(tmp_path, server)
    obs = [_keyed_cube(n, x=2.0 * i, dz=0.4 * (i + 1)) for i, n in enumerate(NAMES)]
    expected = {ob.name: {f: world_positions(ob, f) for f in (1, 3, 6)} for ob in obs}
    assert bpy.ops.clearance.bake() == {"FINISHED"}, bpy.context.scene.clearance.last_error
    wb = addon("writeback")
    folder = str(tmp_path / "cache")
    files = sorted(p for p in os.listdir(folder) if p.endswith(".pc2"))
    assert len(files) == len(NAMES), files                   # one file per object, none shared
    assert "Cube_001.pc2" in files                            # an already clean name keeps its plain file
    for ob in obs:
        mod = ob.modifiers["Clearance Cache"]
        path = os.path.normpath(bpy.path.abspath(mod.filepath))
        assert path == wb.pc2_path(folder, ob.name)
        frames, _, _ = read_pc2(path)
        assert frames.shape == (6, 8, 3)
    # Each object plays its own motion with its twist gone (only its own cache twists it now).
    for ob in obs:
        ob.modifiers.remove(ob.modifiers["twist"])
    for ob in obs:
        for f, want in expected[ob.name].items():
            assert np.abs(world_positions(ob, f) - want).max() < 1e-5, (ob.name, f)
    # Free Bake removes exactly these files.
    assert bpy.ops.clearance.free_bake() == {"FINISHED"}
    assert not [p for p in os.listdir(folder) if p.endswith(".pc2")]


def test_cache_file_names_are_stable_and_distinct(blender):
    wb = addon("writeback")
    stems = {n: wb.pc2_stem(n) for n in NAMES + ("Cube", "a", "a.", "a_", "CON", "con.001", "日本")}
    assert len(set(stems.values())) == len(stems)
    assert stems["Cube"] == "Cube" and stems["Cube_001"] == "Cube_001" and stems["日本"] == "日本"
    assert stems["Cube.001"].startswith("Cube_001.") and stems["CON"] != "CON"
    for n, stem in stems.items():                             # a function of the name alone
        assert wb.pc2_stem(n) == stem
        assert bpy.path.clean_name(stem.replace(".", "_")) == stem.replace(".", "_")   # file-safe


def test_names_differing_only_in_case_are_refused_with_both_named(blender, server, tmp_path):
    _setup(tmp_path, server)
    _keyed_cube("Box", 0.0, 0.3)
    _keyed_cube("box", 2.0, 0.6)
    with pytest.raises(RuntimeError):          # the operator reports ERROR
        bpy.ops.clearance.bake()
    err = bpy.context.scene.clearance.last_error
    assert "'Box'" in err and "'box'" in err and "rename" in err
    assert not os.path.isdir(tmp_path / "cache") or not os.listdir(tmp_path / "cache")
