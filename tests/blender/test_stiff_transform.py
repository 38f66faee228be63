"""Stiff objects in real Blender: the "Object Transform" output (keyed location / rotation / scale
from the polar decomposition of the body's affine map), Free Bake restoring the object, keyframed
stiff objects exported as prescribed bodies, and a real bake through a server."""
import math

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, plane, world_positions

FRAMES = (1, 8)


def _rot(axis, angle):
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * K @ K


def _stiff_box(rotation_mode="XYZ"):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES
    ob = cube("crate", size=0.5, location=(0.5, -1.0, 2.0))
    ob.rotation_mode = rotation_mode
    if rotation_mode == "XYZ":
        ob.rotation_euler = (0.3, 0.0, math.pi / 5)
    ob.scale = (1.0, 2.0, 1.0)
    ob.clearance.role = "STIFF"
    ob.clearance.stiff_output = "TRANSFORM"
    return ob


def _rigid_motion(rest):
    """Frames of a tumbling, translating body (what the solver returns for a stiff body), float32."""
    c = rest.mean(0)
    out = []
    for k in range(FRAMES[1] - FRAMES[0] + 1):
        R = _rot((0.3, 1.0, 0.2), 0.45 * k)          # > 180 degrees over the shot: continuity matters
        out.append((rest - c) @ R.T + c + np.array([0.1 * k, 0.0, -0.05 * k * k]))
    return np.array(out, np.float32)


@pytest.mark.parametrize("mode", ["XYZ", "QUATERNION"])
def test_transform_output_plays_the_rigid_motion(blender, tmp_path, mode):
    ob = _stiff_box(mode)
    basis0 = np.array(ob.matrix_basis)
    res = addon("export").export_scene(bpy.context)
    (body,) = res.scene.bodies
    assert body.role == "stiff" and body.animation is None        # not keyframed: a free body
    motion = _rigid_motion(body.vertices)
    wb = addon("writeback")
    cache = wb.BodyCache(res.objects["crate"], "stiff", res.matrices["crate"], str(tmp_path / "cache"), FRAMES[0],
                         "PC2", rest=body.vertices)
    for i, f in enumerate(range(FRAMES[0], FRAMES[1] + 1)):
        cache.write(f, motion[i])
    cache.close()
    assert ob.modifiers.get("Clearance Cache") is None
    assert ob.animation_data is not None and ob.animation_data.action is not None
    for f in range(FRAMES[0], FRAMES[1] + 1):
        assert np.abs(world_positions(ob, f) - motion[f - FRAMES[0]]).max() < 1e-5, f
        m = np.array(ob.matrix_world)[:3, :3]
        assert np.allclose(np.linalg.norm(m, axis=0), [1.0, 2.0, 1.0], atol=1e-6)   # the object's own scale
    # between frames the keys interpolate a rotation, not a flip: the midpoint stays near the two frames
    bpy.context.scene.frame_set(4, subframe=0.5)
    mid = np.array(ob.matrix_world)[:3, 3]
    a, b = np.array(world_positions(ob, 4)).mean(0), np.array(world_positions(ob, 5)).mean(0)
    assert np.linalg.norm(mid - 0.5 * (a + b)) < 0.05
    wb.free_object(ob, str(tmp_path / "cache"))
    assert ob.animation_data is None or ob.animation_data.action is None
    assert np.abs(np.array(ob.matrix_basis) - basis0).max() < 1e-6
    assert "clearance_transform_action" not in ob


def test_keyframed_stiff_object_is_exported_as_prescribed(blender):
    ob = _stiff_box()
    ob.keyframe_insert("location", frame=1)
    ob.location.x += 1.0
    ob.keyframe_insert("location", frame=8)
    res = addon("export").export_scene(bpy.context)
    (body,) = res.scene.bodies
    assert body.animation is not None and body.animation.shape == (8, 8, 3)
    assert abs(float(body.animation[-1, :, 0].mean() - body.animation[0, :, 0].mean()) - 1.0) < 1e-5


def test_rebake_exports_the_start_transform_not_the_previous_bake(blender, tmp_path):
    ob = _stiff_box()
    res = addon("export").export_scene(bpy.context)
    (body,) = res.scene.bodies
    motion = _rigid_motion(body.vertices)
    wb = addon("writeback")
    cache = wb.BodyCache(ob, "stiff", res.matrices["crate"], str(tmp_path / "c"), FRAMES[0], "PC2", rest=body.vertices)
    for i, f in enumerate(range(FRAMES[0], FRAMES[1] + 1)):
        cache.write(f, motion[i])
    bpy.context.scene.frame_set(6)
    res2 = addon("export").export_scene(bpy.context)
    (body2,) = res2.scene.bodies
    assert body2.animation is None                            # its baked keys are not "keyframed"
    assert np.abs(body2.vertices - body.vertices).max() < 1e-6
    assert ob.animation_data.action is not None               # and the bake is still there afterwards


@pytest.mark.slow
@pytest.mark.parametrize("quality", ["ACCURATE", "FAST"])
def test_bake_stiff_cube_as_object_transform(blender, server, tmp_path, quality):
    """Role Stiff, Output Object Transform, both solver qualities (Fast: each affine body is one block of
    the block-descent sweep): a real bake through a server drops a tilted cube onto a plane; keyed
    transforms only, the cube never goes below the plane and ends resting on it."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 24
    box = cube("crate", size=0.2, location=(0, 0, 0.25))
    box.rotation_euler = (0.4, 0.2, 0.0)
    box.clearance.role = "STIFF"
    box.clearance.stiff_output = "TRANSFORM"
    floor = plane("floor", size=2.0)
    floor.clearance.role = "COLLIDER"
    s = scene.clearance
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    s.solver_quality = quality
    addon("preferences").get().timeout = 30.0
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    assert box.modifiers.get("Clearance Cache") is None
    assert box.animation_data is not None and box.animation_data.action is not None
    zs = [world_positions(box, f)[:, 2].min() for f in range(1, 25)]
    assert min(zs) > 0.0
    assert zs[-1] < 0.01
    R = np.array(box.matrix_world)[:3, :3]
    assert np.abs(R @ R.T - np.eye(3)).max() < 2e-3
