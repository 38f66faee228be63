"""Export: evaluated meshes in world space, triangles, pins through modifiers, animated colliders."""
import math

import bpy
import numpy as np
from mathutils import Matrix

from conftest import addon
from helpers import cube, linear_keys, make_linear, plane


def _tri_areas(v, t):
    return 0.5 * np.linalg.norm(np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]), axis=1)


def test_transformed_modified_mesh_in_world_space(blender):
    ob = plane("sheet", size=2.0, location=(1.0, 2.0, 3.0))
    ob.rotation_euler = (math.pi / 2, 0.0, 0.0)
    ob.scale = (2.0, 1.0, 1.0)
    arr = ob.modifiers.new("array", "ARRAY")
    arr.count = 2
    arr.use_merge_vertices = True
    ob.clearance.role = "CLOTH"
    res = addon("export").export_scene(bpy.context)
    (body,) = res.scene.bodies
    assert body.role == "cloth" and body.vertices.dtype == np.float64 and body.triangles.dtype == np.int32
    # Local grid after the Array modifier: x in {-1, 1, 3}, y in {-1, 1}, z = 0 (6 merged vertices).
    local = np.array([(x, y, 0.0, 1.0) for x in (-1, 1, 3) for y in (-1, 1)])
    m = np.array(Matrix.LocRotScale((1, 2, 3), ob.rotation_euler.to_quaternion(), (2, 1, 1)))
    expected = (local @ m.T)[:, :3]
    got = body.vertices
    assert got.shape == (6, 3) and body.triangles.shape == (4, 3)
    d = np.linalg.norm(got[:, None, :] - expected[None, :, :], axis=2)
    assert d.min(axis=1).max() < 1e-6 and d.min(axis=0).max() < 1e-6  # same point sets
    # World area: local 4 m x 2 m scaled by 2 along x.
    assert abs(_tri_areas(got, body.triangles).sum() - 16.0) < 1e-9
    assert body.edges.shape == (7, 2)


def test_pins_through_subdivision_and_settings(blender):
    ob = cube("box", size=2.0, location=(0, 0, 1.0))
    top = [v.index for v in ob.data.vertices if v.co.z > 0]
    ob.vertex_groups.new(name="pin").add(top, 1.0, "REPLACE")
    sub = ob.modifiers.new("sub", "SUBSURF")
    sub.subdivision_type = "SIMPLE"
    sub.levels = 1
    ob.clearance.role = "SOLID"
    ob.clearance.pin_group = "pin"
    ob.clearance.youngs_modulus = 2.5e5
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end, scene.frame_current = 3, 7, 5
    scene.clearance.contact_gap = 0.004
    res = addon("export").export_scene(bpy.context)
    (body,) = res.scene.bodies
    assert body.vertices.shape == (26, 3)
    top_verts = np.nonzero(np.isclose(body.vertices[:, 2], 2.0))[0]
    assert top_verts.size == 9  # corners, edge midpoints and centre of the top face
    assert np.array_equal(np.sort(body.pin_indices), top_verts)
    assert body.pin_targets is None
    s = res.scene.settings
    assert (s.frame_start, s.frame_end, s.backend) == (3, 7, "ipc") and abs(s.contact_gap - 0.004) < 1e-9
    assert s.gravity == tuple(float(g) for g in scene.gravity)
    assert body.material.youngs_modulus == 2.5e5
    # The scene is left as it was: frame, modifiers, node groups.
    assert scene.frame_current == 5
    assert [m.name for m in ob.modifiers] == ["sub"]
    assert not [g for g in bpy.data.node_groups if g.name.startswith(".clearance")]


def test_deforming_animated_collider_sampled_every_frame(blender):
    linear_keys()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 5
    body = cube("box", size=1.0, location=(0, 0, 2.0))
    body.clearance.role = "SOLID"
    col = plane("floor", size=4.0)
    col.clearance.role = "COLLIDER"
    col.shape_key_add(name="Basis")
    bump = col.shape_key_add(name="bump")
    bump.data[0].co.z = 1.0          # vertex 0 rises by the key's value
    bump.value = 0.0
    bump.keyframe_insert("value", frame=1)
    bump.value = 1.0
    bump.keyframe_insert("value", frame=5)
    col.location.x = 0.0
    col.keyframe_insert("location", index=0, frame=1)
    col.location.x = 2.0
    col.keyframe_insert("location", index=0, frame=5)
    make_linear(col)
    make_linear(col.data.shape_keys)
    scene.frame_set(1)
    res = addon("export").export_scene(bpy.context)
    floor = next(b for b in res.scene.bodies if b.name == "floor")
    assert floor.role == "collider" and floor.animation.shape == (5, 4, 3)
    base = np.array([(-2, -2, 0), (2, -2, 0), (2, 2, 0), (-2, 2, 0)], float)
    for i in range(5):
        t = i / 4.0
        want = base + [2.0 * t, 0.0, 0.0]
        want[0, 2] = t
        assert np.abs(floor.animation[i] - want).max() < 1e-6, i
    box = next(b for b in res.scene.bodies if b.name == "box")
    assert box.animation is None  # simulated bodies send their start state only (IPC)
    assert np.allclose(res.matrices["floor"][:, 0, 3], [0.0, 0.5, 1.0, 1.5, 2.0])


def test_pass_through_backend_sends_every_bodys_motion(blender):
    linear_keys()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    ob = cube("box")
    ob.clearance.role = "SOLID"
    ob.location.z = 0.0
    ob.keyframe_insert("location", index=2, frame=1)
    ob.location.z = 1.0
    ob.keyframe_insert("location", index=2, frame=3)
    make_linear(ob)
    scene.clearance.backend = "none"
    res = addon("export").export_scene(bpy.context)
    (b,) = res.scene.bodies
    assert b.animation.shape == (3, 8, 3)
    assert np.allclose(b.animation[:, :, 2].mean(axis=1), [0.0, 0.5, 1.0], atol=1e-6)


def test_granular_scene_picks_mpm_with_a_domain(blender):
    ob = cube("sand", size=0.5, location=(0, 0, 1))
    ob.clearance.role = "GRANULAR"
    res = addon("export").export_scene(bpy.context)
    s = res.scene.settings
    assert s.backend == "mpm"
    lo, hi = np.array(s.domain_min), np.array(s.domain_max)
    assert (lo < [-0.25, -0.25, 0.75]).all() and (hi > [0.25, 0.25, 1.25]).all()



def test_the_same_mesh_exports_the_same_triangles_whatever_blenders_face_order(blender):
    """bmesh.ops.create_uvsphere lists the same faces in a different order from one call (or process) to
    the next, and the bake depended on it (issue 23: three demo bakes, three drapes). The export sorts
    triangles and edges, so the same mesh listed in another order exports the same arrays."""
    import bmesh

    def link(name, me):
        ob = bpy.data.objects.new(name, me)
        bpy.context.scene.collection.objects.link(ob)
        ob.clearance.role = "CLOTH"
        return ob

    me = bpy.data.meshes.new("a")
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=24, v_segments=12, radius=0.25)
    bm.to_mesh(me)
    bm.free()
    a = link("a", me)
    rng = np.random.default_rng(3)
    faces = [list(p.vertices) for p in me.polygons]
    faces = [faces[k] for k in rng.permutation(len(faces))]   # the same faces listed in another order
    other = bpy.data.meshes.new("b")
    other.from_pydata([tuple(v.co) for v in me.vertices], [], faces)
    link("b", other)
    bodies = {bd.name: bd for bd in addon("export").export_scene(bpy.context).scene.bodies}
    ta, tb = bodies["a"].triangles, bodies["b"].triangles
    assert np.array_equal(ta, tb) and np.array_equal(bodies["a"].edges, bodies["b"].edges)
    # the same faces with their orientation: each exported triangle is a rotation of one of Blender's
    a.data.calc_loop_triangles()
    loops = {tuple(np.roll(t, -int(np.argmin(t))).tolist()) for t in (np.array(lt.vertices) for lt in a.data.loop_triangles)}
    assert {tuple(t) for t in ta.tolist()} == loops
