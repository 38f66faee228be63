"""Collision shapes of stiff objects in real Blender (protocol 1.6): the panel offers them and states the
guarantee for the shapes; the export sends the Box in the object's own axes, the Proxy Object's mesh in world
space, Convex Hull and Sphere by name; a Proxy that does not cover the object is warned about by name; and a
real bake through a server: a subdivided, turned cube with a Box shape lands on a plane, never below it, and
comes back as a rigid motion of its own vertices."""
import math

import bmesh
import bpy
import numpy as np
import pytest

import panel_text
from conftest import addon
from helpers import cube, plane, world_positions
from protocol.rigid import affine_fit
from protocol.scene import SceneError


def _crate(size=0.2, location=(0.0, 0.0, 0.3), cuts=0):
    ob = cube("crate", size=size, location=location)
    if cuts:
        bm = bmesh.new()
        bm.from_mesh(ob.data)
        bmesh.ops.subdivide_edges(bm, edges=bm.edges[:], cuts=cuts, use_grid_fill=True)
        bm.to_mesh(ob.data)
        bm.free()
    ob.rotation_euler = (0.3, 0.0, math.pi / 5)
    ob.clearance.role = "STIFF"
    return ob


def test_panel_offers_the_shapes_and_states_the_guarantee(blender):
    ob = _crate()
    bpy.context.view_layer.objects.active = ob
    with bpy.context.temp_override(object=ob):
        text = "\n".join(panel_text.draw_panels(bpy.context))
    assert "Collision Shape              [Mesh v]" in text and "No intersection between collision shapes" not in text
    ob.clearance.collision_shape = "PROXY"
    with bpy.context.temp_override(object=ob):
        text = "\n".join(panel_text.draw_panels(bpy.context))
    assert "[Proxy Object v]" in text and "Proxy Object" in text
    assert "No intersection between collision shapes" in text


def test_export_box_hull_sphere_and_proxy(blender):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    ob = _crate()
    ob.scale = (1.0, 2.0, 1.0)
    ob.clearance.collision_shape = "BOX"
    (body,) = addon("export").export_scene(bpy.context).scene.bodies
    assert body.collision_shape == "box" and body.shape_vertices.shape == (8, 3)
    # the box of a cube in its own axes is the cube itself: every corner is one of the object's vertices
    d = np.linalg.norm(body.shape_vertices[:, None] - body.vertices[None], axis=2)
    assert d.min(axis=1).max() < 1e-6
    for shape in ("CONVEX_HULL", "SPHERE"):
        ob.clearance.collision_shape = shape
        (body,) = addon("export").export_scene(bpy.context).scene.bodies
        assert body.collision_shape == shape.lower() and body.shape_vertices is None
    ob.clearance.collision_shape = "PROXY"
    with pytest.raises(SceneError) as e:
        addon("export").export_scene(bpy.context)
    assert e.value.obj == "crate" and "Proxy Object" in str(e.value)
    small = cube("proxy", size=0.1, location=(0.0, 0.0, 0.3))
    ob.clearance.collision_proxy = small
    res = addon("export").export_scene(bpy.context)
    (body,) = res.scene.bodies
    assert body.collision_shape == "proxy" and body.shape_vertices.shape == (8, 3)
    assert len(res.warnings) == 1 and res.warnings[0].startswith("crate: 8 of 8 vertices lie outside")
    small.scale = (6.0, 6.0, 6.0)            # 0.6 m: covers the turned 0.2 x 0.4 x 0.2 m crate
    assert addon("export").export_scene(bpy.context).warnings == []


def test_bake_box_shape_through_a_server(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    ob = _crate(cuts=3)            # 98 vertices, contact on its 8-vertex Box
    ob.clearance.collision_shape = "BOX"
    floor = plane("floor", size=2.0)
    floor.clearance.role = "COLLIDER"
    s = scene.clearance
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0
    # a second crate on a Proxy Object too small to cover it: baked, with the warning naming it
    other = cube("loose", size=0.2, location=(0.6, 0.0, 0.3))
    other.clearance.role = "STIFF"
    other.clearance.collision_shape = "PROXY"
    other.clearance.collision_proxy = cube("loose_proxy", size=0.1, location=(0.6, 0.0, 0.3))
    rest = world_positions(ob, 1)
    assert len(rest) == 98
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    assert s.last_warning.startswith("loose: 8 of 8 vertices lie outside its collision shape (proxy)"), s.last_warning
    zs = []
    for f in range(1, 13):
        x = world_positions(ob, f)
        zs.append(x[:, 2].min())
        A, c, p = affine_fit(rest, x)
        assert np.abs(x - ((rest - c) @ A.T + p)).max() < 1e-5      # the mesh follows its shape rigidly
        assert np.linalg.norm(A @ A.T - np.eye(3)) < 2e-3
    assert min(zs) > 0.0 and zs[-1] < 0.003
