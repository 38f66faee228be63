"""Issue 20 item 11: a TD bakes on a node with no Blender. Real bpy exports the scene (the panel's Export
Scene (.clrscene) operator, and ``scripts/bake_blend.py --export``), a real ``clearance-server bake``
process bakes the file, and its frames are Blender's motion; the exported scene is the one the Bake sends
(the server's scene hash of an add-on Bake is the file's).

Protocol 1.7: the exported scene carries each object's world matrix per frame, so the node writes its .pc2
files in object space in the add-on's cache layout, and Load Farm Bake plays that folder in Blender exactly as
the add-on's own Bake plays its cache (a translated, rotated, scaled, parented cloth under an animated parent)."""
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


def local_positions(ob, frame: int) -> np.ndarray:
    """Evaluated vertex positions of ``ob`` at ``frame`` in its own space (what a Mesh Cache plays)."""
    scene = bpy.context.scene
    scene.frame_set(frame)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    me = ev.to_mesh()
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    return co.reshape(-1, 3)


def _assert_frames_are_blenders(out, expected):
    """The node's box.pc2 holds Blender's motion of the box, in the box's space of each frame (object space:
    the scene carries the world matrices, protocol 1.7), as the add-on's own Bake writes it."""
    from protocol.pc2 import read_pc2
    frames, start, _ = read_pc2(str(out / "box.pc2"))
    assert start == 1.0 and frames.shape[0] == len(expected)
    for f, want in expected.items():
        assert np.abs(frames[f - 1] - want).max() < 1e-5, f


def test_export_operator_then_clearance_server_bake_gives_blenders_frames(blender, server, tmp_path):
    ob, blend = _shot(tmp_path)
    expected = {f: local_positions(ob, f) for f in range(1, 7)}
    assert np.abs(expected[6] - world_positions(ob, 6)).max() > 0.3    # the box moved: the spaces differ
    path = tmp_path / "farm" / "shot.clrscene"
    bpy.context.scene.frame_set(3)
    assert bpy.ops.clearance.export_scene(filepath=str(path)) == {"FINISHED"}
    assert path.is_file() and bpy.context.scene.frame_current == 3     # the current frame is kept
    assert not (tmp_path / "clearance_cache").exists()       # exporting bakes and writes nothing else

    out = tmp_path / "node_out"
    r = _cli_bake(path, out)
    assert "bake done: 6 frames" in r.stdout
    assert "output: object space" in r.stdout and "(box, object space)" in r.stdout
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
    with open(out / "server" / "scene.json") as f:    # the add-on's layout: the server's cache in server/
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
    expected = {f: local_positions(ob, f) for f in range(1, 5)}
    path = tmp_path / "shot_1_4.clrscene"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bake_blend.py"), blend, "--frames", "1", "4",
                        "--export", str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"clearance: exported the scene to {path}" in r.stdout
    assert not (tmp_path / "shot_baked.blend").exists()      # --export bakes nothing and saves nothing
    out = tmp_path / "node_out"
    _cli_bake(path, out)
    _assert_frames_are_blenders(out, expected)


def test_bake_blend_overrides_max_newton_iterations(blender, tmp_path):
    """The farm script's --max-newton-iterations reaches the scene the bake sends (here the exported one), and a
    budget below 1 is refused with exit status 2, naming the option."""
    from protocol.scenefile import load_scene
    _, blend = _shot(tmp_path)
    path = tmp_path / "shot.clrscene"
    script = os.path.join(ROOT, "scripts", "bake_blend.py")
    r = subprocess.run([sys.executable, script, blend, "--max-newton-iterations", "640", "--export", str(path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert load_scene(str(path)).settings.max_newton_iterations == 640
    r = subprocess.run([sys.executable, script, blend, "--max-newton-iterations", "0", "--export", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--max-newton-iterations" in r.stderr


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
        with np.load(served / f"frame_{f:05d}.npz") as a, np.load(out / "server" / "frames" / f"frame_{f:05d}.npz") as b:
            assert list(a["names"]) == list(b["names"]) == ["sheet"]
            assert np.array_equal(a["p0"], b["p0"]), f
    with np.load(out / "server" / "frames" / "frame_00004.npz") as b:
        assert b["p0"][:, 2].max() < 0.45 - 1e-3          # it fell: a real solve, not the input


def _transformed_drape(tmp_path, server):
    """A cloth translated, rotated, non-uniformly scaled and parented to an empty that moves and turns during the
    bake, falling onto a box collider (IPC, Converged)."""
    import bmesh
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 5
    rig = bpy.data.objects.new("rig", None)
    scene.collection.objects.link(rig)
    rig.location = (0.3, -0.2, 0.1)
    rig.rotation_euler = (0.0, 0.0, 0.4)
    rig.keyframe_insert("location", frame=1)
    rig.keyframe_insert("rotation_euler", frame=1)
    rig.location = (0.5, 0.1, 0.3)
    rig.rotation_euler = (0.2, -0.1, 1.1)
    rig.keyframe_insert("location", frame=5)
    rig.keyframe_insert("rotation_euler", frame=5)
    make_linear(rig)
    me = bpy.data.meshes.new("sheet")
    bm = bmesh.new()
    bmesh.ops.create_grid(bm, x_segments=8, y_segments=8, size=0.25)
    bm.to_mesh(me)
    bm.free()
    sheet = bpy.data.objects.new("sheet", me)
    scene.collection.objects.link(sheet)
    sheet.parent = rig
    sheet.location = (-0.3, 0.2, 0.35)
    sheet.rotation_euler = (0.05, 0.1, -0.4)
    sheet.scale = (1.6, 1.2, 0.8)
    sheet.clearance.role = "CLOTH"
    box = cube("box", size=0.6, location=(0.0, 0.0, 0.0))
    box.clearance.role = "COLLIDER"
    s = scene.clearance
    s.server_address = server.address
    addon("preferences").get().timeout = 600.0
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "drape.blend"))
    return sheet


def test_a_farm_bake_of_a_transformed_parented_cloth_plays_as_the_addons_bake(blender, server, tmp_path):
    """Export, the add-on's Bake, ``clearance-server bake`` on the node, Free Bake, Load Farm Bake: the evaluated
    cloth at every frame is the add-on's Bake's, to float32 precision (the .pc2 files are the same bytes)."""
    from protocol.pc2 import read_pc2
    sheet = _transformed_drape(tmp_path, server)
    path = tmp_path / "drape.clrscene"
    assert bpy.ops.clearance.export_scene(filepath=str(path)) == {"FINISHED"}
    s = bpy.context.scene.clearance
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    frames = range(1, 6)
    baked_world = {f: world_positions(sheet, f) for f in frames}
    baked_local = {f: local_positions(sheet, f).copy() for f in frames}
    assert baked_world[5][:, 2].max() < baked_world[1][:, 2].max() - 1e-3          # it fell: a real solve
    addon_pc2 = (tmp_path / "clearance_cache" / "drape" / "sheet.pc2").read_bytes()

    out = tmp_path / "node_out"
    r = _cli_bake(path, out)
    assert "output: object space" in r.stdout and f"wrote {out / 'sheet.pc2'} (sheet, object space)" in r.stdout
    assert (out / "server" / "scene.json").is_file() and not (out / "box.pc2").exists()
    assert (out / "sheet.pc2").read_bytes() == addon_pc2        # the add-on's file, byte for byte
    world_farm = read_pc2(str(out / "sheet.pc2"))[0]
    assert np.abs(world_farm[4] - baked_world[5]).max() > 0.05  # object space is not world space here

    assert bpy.ops.clearance.free_bake() == {"FINISHED"}
    assert sheet.modifiers.get("Clearance Cache") is None
    moved = {f: world_positions(sheet, f) for f in (1, 5)}
    assert np.abs(moved[5] - baked_world[5]).max() > 1e-3       # without the cache the sheet does not fall
    before = {p.name: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert bpy.ops.clearance.load_farm_bake(directory=str(out)) == {"FINISHED"}, s.last_error
    mod = sheet.modifiers.get("Clearance Cache")
    assert mod is not None and mod.type == "MESH_CACHE" and sheet.modifiers[-1] == mod
    assert os.path.normpath(bpy.path.abspath(mod.filepath)) == str(out / "sheet.pc2")
    assert bpy.path.abspath(s.cache_folder).rstrip("/") == str(out)      # Free Bake / Resume act on it now
    for f in frames:
        np.testing.assert_array_equal(local_positions(sheet, f), baked_local[f])
        np.testing.assert_allclose(world_positions(sheet, f), baked_world[f], rtol=0, atol=2e-6)
    after = {p.name: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file() and p.name != "clearance_blend.json"}
    assert after == before                                      # the farm's files were read, never rewritten

    # the scene changed since the export: refused, naming the file, and the loaded bake stays
    bpy.data.objects["box"].location.x = 0.05
    with pytest.raises(RuntimeError) as info:
        bpy.ops.clearance.load_farm_bake(directory=str(out))
    assert str(out / "server" / "scene.json") in str(info.value) and "another scene" in str(info.value)
    assert "\n" not in s.last_error and sheet.modifiers.get("Clearance Cache") is not None


def test_load_farm_bake_gives_shape_keys_and_refuses_a_world_space_folder(blender, tmp_path):
    """Output Shape Keys: Load Farm Bake keys the farm's frames as a Bake keys them (pass-through backend: the
    keyframed box's own motion); a folder baked from a scene without world matrices is refused naming it."""
    ob, blend = _shot(tmp_path)
    bpy.context.scene.clearance.output = "SHAPE_KEYS"
    expected = {f: local_positions(ob, f).copy() for f in range(1, 7)}
    path = tmp_path / "shot.clrscene"
    assert bpy.ops.clearance.export_scene(filepath=str(path)) == {"FINISHED"}
    out = tmp_path / "node_out"
    _cli_bake(path, out)
    assert bpy.ops.clearance.load_farm_bake(directory=str(out)) == {"FINISHED"}
    keys = ob.data.shape_keys.key_blocks
    assert [k.name for k in keys if k.name.startswith("clearance_")] == [f"clearance_{f:05d}" for f in range(1, 7)]
    assert not ob.modifiers["bend"].show_viewport              # its effect is in the keys, as after a Bake
    for f in range(1, 7):
        np.testing.assert_allclose(local_positions(ob, f), expected[f], rtol=0, atol=1e-6)

    import dataclasses
    from protocol.scenefile import load_scene, save_scene
    old = load_scene(str(path))
    old = dataclasses.replace(old, bodies=tuple(dataclasses.replace(b, world_matrices=None) for b in old.bodies))
    save_scene(str(tmp_path / "old.clrscene"), old)
    r = _cli_bake(tmp_path / "old.clrscene", tmp_path / "world_out")
    assert "output: world space" in r.stdout and (tmp_path / "world_out" / "scene.json").is_file()
    with pytest.raises(RuntimeError) as info:
        bpy.ops.clearance.load_farm_bake(directory=str(tmp_path / "world_out"))
    assert "world-space farm bake" in str(info.value) and str(tmp_path / "world_out") in str(info.value)


def test_bake_blend_load_farm_attaches_the_node_output_headless(blender, tmp_path):
    """``scripts/bake_blend.py shot.blend --load-farm DIR --out loaded.blend``: the headless Load Farm Bake; the
    saved file plays the node's object-space caches (pass-through backend: the keyframed, bending box)."""
    ob, blend = _shot(tmp_path)
    expected = {f: world_positions(ob, f) for f in range(1, 7)}
    path = tmp_path / "shot.clrscene"
    assert bpy.ops.clearance.export_scene(filepath=str(path)) == {"FINISHED"}
    out = tmp_path / "node_out"
    _cli_bake(path, out)
    loaded = tmp_path / "loaded.blend"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bake_blend.py"), blend, "--load-farm", str(out),
                        "--out", str(loaded)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"clearance: loaded the farm bake in {out} into {loaded}" in r.stdout
    bpy.ops.wm.open_mainfile(filepath=str(loaded))
    box = bpy.data.objects["box"]
    assert box.modifiers.get("Clearance Cache") is not None
    assert os.path.normpath(bpy.path.abspath(box.modifiers["Clearance Cache"].filepath)) == str(out / "box.pc2")
    for f, want in expected.items():
        np.testing.assert_allclose(world_positions(box, f), want, rtol=0, atol=2e-6)


@pytest.mark.slow
def test_load_farm_bake_keys_a_stiff_object_transform_as_the_bake_does(blender, server, tmp_path):
    """Stiff, Output Object Transform (Converged: an affine body): the add-on's Bake keys the object's transform
    and writes no .pc2; the node writes an object-space .pc2 for it, and Load Farm Bake keys the same transforms
    from it: the evaluated cube at every frame equals the Bake's to float32 precision."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 6
    crate = cube("crate", size=0.2, location=(0.1, -0.05, 0.22))
    crate.rotation_euler = (0.4, 0.2, 0.3)
    crate.scale = (1.5, 1.0, 0.8)
    crate.clearance.role = "STIFF"
    crate.clearance.stiff_output = "TRANSFORM"
    plane("floor", size=2.0).clearance.role = "COLLIDER"
    s = scene.clearance
    s.server_address = server.address
    s.solver_quality = "ACCURATE"
    addon("preferences").get().timeout = 600.0
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "crate.blend"))
    path = tmp_path / "crate.clrscene"
    assert bpy.ops.clearance.export_scene(filepath=str(path)) == {"FINISHED"}
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    baked = {f: world_positions(crate, f) for f in range(1, 7)}
    assert baked[6][:, 2].min() < baked[1][:, 2].min() - 1e-3      # it fell
    assert not (tmp_path / "clearance_cache" / "crate" / "crate.pc2").exists()
    out = tmp_path / "node_out"
    _cli_bake(path, out)
    assert (out / "crate.pc2").is_file()
    assert bpy.ops.clearance.free_bake() == {"FINISHED"}
    assert crate.animation_data is None or crate.animation_data.action is None
    assert bpy.ops.clearance.load_farm_bake(directory=str(out)) == {"FINISHED"}, s.last_error
    assert crate.modifiers.get("Clearance Cache") is None and crate.animation_data.action is not None
    for f, want in baked.items():
        np.testing.assert_allclose(world_positions(crate, f), want, rtol=0, atol=1e-5)
