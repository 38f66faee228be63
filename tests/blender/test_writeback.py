"""Write-back: .pc2 files, Mesh Cache playback, shape keys, particles, save + reload without the add-on."""
import math
import os

import bpy
import numpy as np

import addon_env
from conftest import addon
from helpers import cube, world_positions

FRAMES = (1, 6)


def _setup(tmp_path, modifier: bool = True):
    """A transformed, modified cube and per-frame world positions a solver could have returned."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES
    ob = cube("box", size=1.0, location=(0.5, -1.0, 2.0))
    ob.rotation_euler = (0.3, 0.0, math.pi / 5)
    ob.scale = (1.0, 2.0, 1.0)
    if modifier:
        ob.modifiers.new("bevel", "BEVEL").width = 0.1  # changes topology: the cache must go after it
    ob.clearance.role = "SOLID"
    scene.clearance.cache_folder = str(tmp_path / "cache")
    res = addon("export").export_scene(bpy.context)
    (body,) = res.scene.bodies
    rng = np.random.default_rng(1)
    n_frames = FRAMES[1] - FRAMES[0] + 1
    motion = body.vertices[None] + np.cumsum(rng.normal(0, 0.05, (n_frames, *body.vertices.shape)), axis=0)
    motion[0] = body.vertices
    return ob, res, motion


def _write_all(res, motion, mode: str, folder: str):
    wb = addon("writeback")
    (body,) = res.scene.bodies
    cache = wb.BodyCache(res.objects[body.name], body.role, res.matrices[body.name], folder, FRAMES[0], mode)
    for i, f in enumerate(range(FRAMES[0], FRAMES[1] + 1)):
        cache.write(f, motion[i])
    cache.close()
    return cache


def test_pc2_holds_local_positions_and_mesh_cache_plays_them(blender, tmp_path):
    ob, res, motion = _setup(tmp_path)
    folder = str(tmp_path / "cache")
    cache = _write_all(res, motion, "PC2", folder)
    from protocol.pc2 import read_pc2
    frames, start, rate = read_pc2(cache.path)
    assert (start, rate) == (1.0, 1.0) and frames.shape == motion.shape
    m = res.matrices["box"][0]
    back = frames.astype(np.float64) @ m[:3, :3].T + m[:3, 3]
    assert np.abs(back - motion).max() < 1e-5
    mod = ob.modifiers[-1]
    assert mod.type == "MESH_CACHE" and mod.name == "Clearance Cache" and ob.modifiers[0].name == "bevel"
    for f in (1, 2, 4, 6):
        assert np.abs(world_positions(ob, f) - motion[f - 1]).max() < 1e-5, f


def test_shape_keys_play_the_positions(blender, tmp_path):
    ob, res, motion = _setup(tmp_path, modifier=False)
    _write_all(res, motion, "SHAPE_KEYS", str(tmp_path / "cache"))
    keys = ob.data.shape_keys.key_blocks
    assert len(keys) == 1 + motion.shape[0]
    for f in (1, 3, 6):
        assert np.abs(world_positions(ob, f) - motion[f - 1]).max() < 1e-5, f
    # Half way between two frames the keys blend linearly.
    bpy.context.scene.frame_set(2, subframe=0.5)
    dg = bpy.context.evaluated_depsgraph_get()
    me = ob.evaluated_get(dg).to_mesh()
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    ob.evaluated_get(dg).to_mesh_clear()
    m = res.matrices["box"][0]
    mid = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
    assert np.abs(mid - 0.5 * (motion[1] + motion[2])).max() < 1e-5
    addon("writeback").free_object(ob, str(tmp_path / "cache"))
    assert ob.data.shape_keys is None


def test_shape_keys_refuse_a_vertex_count_change(blender, tmp_path):
    ob, res, motion = _setup(tmp_path, modifier=True)
    from protocol.scene import SceneError
    try:
        _write_all(res, motion, "SHAPE_KEYS", str(tmp_path / "cache"))
    except SceneError as exc:
        assert "box" in str(exc) and "Point Cache" in str(exc)
    else:
        raise AssertionError("a bevelled mesh cannot take shape keys of its base mesh")


def test_save_reload_without_addon_keeps_the_animation(blender, tmp_path):
    ob, res, motion = _setup(tmp_path)
    blend = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    bpy.context.scene.clearance.cache_folder = "//cache/"
    _write_all(res, motion, "PC2", str(tmp_path / "cache"))
    assert ob.modifiers["Clearance Cache"].filepath.startswith("//")
    bpy.ops.wm.save_mainfile()
    addon_env.disable()
    bpy.ops.wm.open_mainfile(filepath=blend)
    assert not hasattr(bpy.types.Object, "clearance")
    ob = bpy.data.objects["box"]
    for f in (1, 3, 6):
        assert np.abs(world_positions(ob, f) - motion[f - 1]).max() < 1e-5, f


def test_free_bake_removes_modifier_and_files(blender, tmp_path):
    ob, res, motion = _setup(tmp_path)
    folder = str(tmp_path / "cache")
    cache = _write_all(res, motion, "PC2", folder)
    assert os.path.isfile(cache.path)
    assert bpy.ops.clearance.free_bake() == {"FINISHED"}
    assert "Clearance Cache" not in ob.modifiers and not os.path.exists(cache.path)
    assert np.abs(world_positions(ob, 4) - motion[0]).max() < 1e-5  # back to the unbaked mesh


def test_granular_particles_object(blender, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    src = cube("sand", size=0.4, location=(0, 0, 1))
    src.clearance.role = "GRANULAR"
    src.clearance.particle_spacing = 0.05
    wb = addon("writeback")
    folder = str(tmp_path / "cache")
    cache = wb.BodyCache(src, "granular", np.eye(4)[None], folder, 1, "PC2", radius=0.025)
    rng = np.random.default_rng(3)
    pts = rng.uniform(-0.2, 0.2, (3, 50, 3)) + [0, 0, 1]
    for f in (1, 2, 3):
        cache.write(f, pts[f - 1])
    cache.close()
    ob = bpy.data.objects["sand_particles"]
    assert len(ob.data.vertices) == 50 and len(ob.data.polygons) == 0
    radius = np.empty(50, np.float32)
    ob.data.attributes["radius"].data.foreach_get("value", radius)
    assert np.allclose(radius, 0.025)
    assert [m.type for m in ob.modifiers] == ["MESH_CACHE", "NODES"]
    assert src.hide_render
    ob.modifiers["Clearance Particles"].show_viewport = False  # read the cached vertices themselves
    for f in (1, 3):
        assert np.abs(world_positions(ob, f) - pts[f - 1]).max() < 1e-5
    ob.modifiers["Clearance Particles"].show_viewport = True
    dg = bpy.context.evaluated_depsgraph_get()
    n_points = sum(len(inst.object.data.points) for inst in dg.object_instances
                   if inst.object.type == "POINTCLOUD" and inst.object.original == ob)
    assert n_points == 50  # Geometry Nodes turns the vertices into renderable points
    wb.free_object(src, folder)
    assert "sand_particles" not in bpy.data.objects and not src.hide_render
