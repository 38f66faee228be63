"""Scene building and evaluation helpers shared by the Blender tests."""
from __future__ import annotations

import bmesh
import bpy
import numpy as np


def mesh_object(name: str, verts, faces, location=(0, 0, 0)) -> bpy.types.Object:
    """A mesh object linked to the scene from plain vertex/face lists."""
    me = bpy.data.meshes.new(name)
    me.from_pydata([tuple(v) for v in verts], [], [tuple(f) for f in faces])
    me.update()
    ob = bpy.data.objects.new(name, me)
    ob.location = location
    bpy.context.scene.collection.objects.link(ob)
    return ob


def cube(name: str, size: float = 1.0, location=(0, 0, 0)) -> bpy.types.Object:
    """A closed cube (8 vertices, 6 quads) of edge ``size``."""
    me = bpy.data.meshes.new(name)
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=size)
    bm.to_mesh(me)
    bm.free()
    ob = bpy.data.objects.new(name, me)
    ob.location = location
    bpy.context.scene.collection.objects.link(ob)
    return ob


def plane(name: str, size: float = 2.0, location=(0, 0, 0)) -> bpy.types.Object:
    h = size / 2
    return mesh_object(name, [(-h, -h, 0), (h, -h, 0), (h, h, 0), (-h, h, 0)], [(0, 1, 2, 3)], location)


def world_positions(ob: bpy.types.Object, frame: int) -> np.ndarray:
    """Evaluated world-space vertex positions of ``ob`` at ``frame`` (float64)."""
    scene = bpy.context.scene
    scene.frame_set(frame)
    dg = bpy.context.evaluated_depsgraph_get()
    ev = ob.evaluated_get(dg)
    me = ev.to_mesh()
    co = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", co)
    m = np.array(ev.matrix_world)
    ev.to_mesh_clear()
    return co.reshape(-1, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]


def linear_keys() -> None:
    """New keyframes interpolate linearly (analytic expectations between keys)."""
    bpy.context.preferences.edit.keyframe_new_interpolation_type = "LINEAR"


def make_linear(idblock) -> None:
    """Every keyframe of ``idblock``'s action interpolates linearly (slotted actions or not)."""
    ad = idblock.animation_data
    try:
        from bpy_extras.anim_utils import action_get_channelbag_for_slot
        fcurves = action_get_channelbag_for_slot(ad.action, ad.action_slot).fcurves
    except ImportError:
        fcurves = ad.action.fcurves
    for fc in fcurves:
        for kp in fc.keyframe_points:
            kp.interpolation = "LINEAR"


def apply_preset_and_check(ob: bpy.types.Object, operator: str, name: str, fields: dict, export_scene) -> None:
    """Run preset operator ``operator`` (e.g. "cloth_preset") with ``name`` on the active object ``ob``,
    then check that ``ob.clearance`` and the exported body's material carry every value of ``fields``."""
    import pytest
    bpy.context.view_layer.objects.active = ob
    assert getattr(bpy.ops.clearance, operator)(preset=name) == {"FINISHED"}
    for key, value in fields.items():
        assert getattr(ob.clearance, key) == pytest.approx(value, rel=1e-6), key
    body = next(b for b in export_scene(bpy.context).scene.bodies if b.name == ob.name)
    for key, value in fields.items():
        assert getattr(body.material, key) == pytest.approx(value, rel=1e-6), key
