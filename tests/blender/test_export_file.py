"""Issue 20 item 11: a TD bakes on a node with no Blender. Real bpy exports the scene (the panel's Export
Scene (.clrscene) operator, and ``scripts/bake_blend.py --export``), a real ``clearance-server bake``
process bakes the file, and its frames are Blender's motion; the exported scene is the one the Bake sends
(the server's scene hash of an add-on Bake is the file's)."""
import json
import os
import subprocess
import sys

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, make_linear, plane, world_positions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(os.path.dirname(sys.executable), "clearance-server")


def _shot(tmp_path):
    """A keyframed, bending box over a floor collider (pass-through backend: the bake is the motion)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 6
    ob = cube("box", size=0.5, location=(0.0, 0.0, 1.0))
    ob.clearance.role = "SOLID"
    ob.keyframe_insert("location", index=2, frame=1)
    ob.location.z = 0.4
    ob.keyframe_insert("location", index=2, frame=6)
    ob.modifiers.new("bend", "SIMPLE_DEFORM").angle = 0.0
    ob.modifiers["bend"].keyframe_insert("angle", frame=1)
    ob.modifiers["bend"].angle = 0.6
    ob.modifiers["bend"].keyframe_insert("angle", frame=6)
    make_linear(ob)
    floor = plane("floor", size=3.0)
    floor.clearance.role = "COLLIDER"
    scene.clearance.backend = "none"
    blend = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    return bpy.data.objects["box"], blend


def _cli_bake(scene_file, out):
    r = subprocess.run([CLI, "bake", str(scene_file), "--out", str(out)], capture_output=True, text=True,
                       timeout=300, cwd=str(out.parent))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r


def _assert_frames_are_blenders(out, expected):
    from protocol.pc2 import read_pc2
    frames, start, _ = read_pc2(str(out / "box.pc2"))
    assert start == 1.0 and frames.shape[0] == len(expected)
    for f, want in expected.items():
        assert np.abs(frames[f - 1] - want).max() < 1e-5, f


def test_export_operator_then_clearance_server_bake_gives_blenders_frames(blender, server, tmp_path):
    ob, blend = _shot(tmp_path)
    expected = {f: world_positions(ob, f).astype(np.float32) for f in range(1, 7)}
    path = tmp_path / "farm" / "shot.clrscene"
    bpy.context.scene.frame_set(3)
    assert bpy.ops.clearance.export_scene(filepath=str(path)) == {"FINISHED"}
    assert path.is_file() and bpy.context.scene.frame_current == 3     # the current frame is kept
    assert not (tmp_path / "clearance_cache").exists()       # exporting bakes and writes nothing else

    out = tmp_path / "node_out"
    r = _cli_bake(path, out)
    assert "bake done: 6 frames" in r.stdout
    _assert_frames_are_blenders(out, expected)

    # the file holds the scene the Bake sends: the server hashes the same scene
    from protocol.scenefile import load_scene
    from solver_server.runtime.cache import scene_hash
    s = bpy.context.scene.clearance
    s.server_address = server.address
    addon("preferences").get().timeout = 30.0
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    with open(tmp_path / "clearance_cache" / "shot" / "server" / "scene.json") as f:
        baked = json.load(f)["scene_hash"]
    assert baked == scene_hash(load_scene(str(path)))
    with open(out / "scene.json") as f:
        assert json.load(f)["scene_hash"] == baked


def test_export_adds_the_extension_and_defaults_beside_the_blend(blender, tmp_path):
    _shot(tmp_path)
    assert addon("scene_file").default_path(bpy.context) == str(tmp_path / "shot.clrscene")
    assert bpy.ops.clearance.export_scene(filepath="//exports/take1") == {"FINISHED"}
    assert (tmp_path / "exports" / "take1.clrscene").is_file()


def test_export_refuses_what_the_bake_refuses_and_writes_nothing(blender, tmp_path):
    ob = cube("Flat")
    ob.clearance.role = "SOLID"
    ob.scale = (1.0, 0.0, 1.0)
    path = tmp_path / "x.clrscene"
    with pytest.raises(RuntimeError) as info:
        bpy.ops.clearance.export_scene(filepath=str(path))
    assert "Flat: the object has zero scale" in str(info.value)
    assert not path.exists()
    ob.scale = (1.0, 1.0, 1.0)
    with pytest.raises(RuntimeError) as info:                 # unsaved file, blend-relative path
        bpy.ops.clearance.export_scene(filepath="//x.clrscene")
    assert "not saved" in str(info.value)


def test_bake_blend_export_writes_a_scene_a_node_bakes(blender, tmp_path):
    ob, blend = _shot(tmp_path)
    expected = {f: world_positions(ob, f).astype(np.float32) for f in range(1, 5)}
    path = tmp_path / "shot_1_4.clrscene"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bake_blend.py"), blend, "--frames", "1", "4",
                        "--export", str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"clearance: exported the scene to {path}" in r.stdout
    assert not (tmp_path / "shot_baked.blend").exists()      # --export bakes nothing and saves nothing
    out = tmp_path / "node_out"
    _cli_bake(path, out)
    _assert_frames_are_blenders(out, expected)


def test_a_physics_bake_of_the_exported_file_equals_the_addons_bake(blender, server, tmp_path):
    """The real use: a cloth (IPC, Converged) falling onto a box. The node's ``clearance-server bake`` of
    the exported file gives the same frames, bit for bit, as the add-on's Bake through the server."""
    import bmesh
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    me = bpy.data.meshes.new("sheet")
    bm = bmesh.new()
    bmesh.ops.create_grid(bm, x_segments=8, y_segments=8, size=0.4)
    bm.to_mesh(me)
    bm.free()
    sheet = bpy.data.objects.new("sheet", me)
    sheet.location.z = 0.45
    scene.collection.objects.link(sheet)
    sheet.clearance.role = "CLOTH"
    box = cube("box", size=0.6, location=(0.0, 0.0, 0.0))
    box.clearance.role = "COLLIDER"
    s = scene.clearance
    s.server_address = server.address
    addon("preferences").get().timeout = 600.0
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "drape.blend"))
    path = tmp_path / "drape.clrscene"
    assert bpy.ops.clearance.export_scene(filepath=str(path)) == {"FINISHED"}
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    out = tmp_path / "node_out"
    _cli_bake(path, out)
    served = tmp_path / "clearance_cache" / "drape" / "server" / "frames"
    for f in range(1, 5):
        with np.load(served / f"frame_{f:05d}.npz") as a, np.load(out / "frames" / f"frame_{f:05d}.npz") as b:
            assert list(a["names"]) == list(b["names"]) == ["sheet"]
            assert np.array_equal(a["p0"], b["p0"]), f
    with np.load(out / "frames" / "frame_00004.npz") as b:
        assert b["p0"][:, 2].max() < 0.45 - 1e-3          # it fell: a real solve, not the input
