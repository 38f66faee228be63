"""Issue 20 item 9: the message a user gets names the real problem and its fix, in one line, in real
Blender. A zero Scale used to be reported as '12 faces have zero area ... Degenerate Dissolve', two
cubes sharing one edge as holes to fill, a joined object of two overlapping parts as 'Joined and Joined
intersect', and a too-stiff modulus under the internal name ``youngs_modulus``."""
import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, mesh_object

CUBE_V = [(x, y, z) for x in (0, 1) for y in (0, 1) for z in (0, 1)]
CUBE_F = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]


def _export_error() -> str:
    with pytest.raises(Exception) as info:
        addon("export").export_scene(bpy.context)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def test_zero_scale_is_named_as_a_zero_scale(blender):
    ob = cube("Flat")
    ob.clearance.role = "SOLID"
    ob.scale = (0.0, 0.0, 0.0)
    msg = _export_error()
    assert msg.startswith("Flat: the object has zero scale (Scale 0, 0, 0)"), msg
    assert "set a non-zero Scale" in msg and "Ctrl+A > Scale" in msg and "Degenerate" not in msg
    ob.scale = (1.0, 1.0, 0.0)       # one axis is enough: a cloth flattened to a line too
    ob.clearance.role = "CLOTH"
    assert "zero scale (Scale 1, 1, 0)" in _export_error()


def test_zero_scale_of_a_parent_is_named(blender):
    parent = bpy.data.objects.new("Rig", None)
    bpy.context.scene.collection.objects.link(parent)
    parent.scale = (1.0, 0.0, 1.0)
    ob = cube("Child")
    ob.parent = parent
    ob.clearance.role = "SOLID"
    bpy.context.view_layer.update()
    msg = _export_error()
    assert msg.startswith("Child: the object is flattened to zero size by its transform") and "parent" in msg


def test_two_cubes_sharing_one_edge_are_a_non_manifold_edge_not_a_hole(blender):
    # the second cube touches the first along the edge x = 1, z = 1 (vertices 5 and 7 shared)
    verts = CUBE_V + [(x + 1, y, z + 1) for x, y, z in CUBE_V]
    faces = CUBE_F + [tuple(i + 8 for i in f) for f in CUBE_F]
    ob = mesh_object("Pair", verts, faces)
    bpy.ops.object.select_all(action="DESELECT")
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    bpy.ops.mesh.select_all(action="SELECT")
    bpy.ops.mesh.remove_doubles(threshold=1e-6)     # merge the shared corners: one edge of 4 faces
    bpy.ops.object.mode_set(mode="OBJECT")
    assert len(ob.data.vertices) == 14
    ob.clearance.role = "SOLID"
    msg = _export_error()
    assert msg.startswith("Pair: 1 edge is shared by 4 faces (non-manifold"), msg
    assert "Fill the holes" not in msg and "Select > All by Trait > Non Manifold" in msg


def test_a_hole_is_still_a_hole(blender):
    ob = mesh_object("Box", CUBE_V, CUBE_F[:-1])
    ob.clearance.role = "SOLID"
    msg = _export_error()
    assert "needs a closed surface, but 4 edges are open" in msg and "Fill the holes" in msg


def test_a_modulus_above_the_servers_limit_cannot_be_typed(blender):
    """The field's range is the server's: 1e15 is clamped to 1e13, which a scene accepts."""
    from protocol.scene import MATERIAL_RANGES, SETTINGS_RANGES
    ob = cube("Stiff")
    ob.clearance.role = "SOLID"
    ob.clearance.youngs_modulus = 1e15
    assert ob.clearance.youngs_modulus == pytest.approx(1e13)
    addon("export").export_scene(bpy.context)        # accepted: no refusal at Bake
    ob.clearance.youngs_modulus = 1e5
    # every field the server range-checks is bounded the same way in the panel
    for props, ranges in ((ob.clearance, MATERIAL_RANGES), (bpy.context.scene.clearance, SETTINGS_RANGES)):
        for name, rng in ranges.items():
            p = props.bl_rna.properties.get(name)
            if p is None or name.startswith("debug"):
                continue
            assert rng.contains(float(p.hard_min)) or (rng.lo_open and p.hard_min > rng.lo), (name, p.hard_min)
            assert rng.contains(float(p.hard_max)), (name, p.hard_max, rng)


def test_a_refused_value_is_named_by_its_panel_label(blender):
    """A scene that reaches the server check with a value outside the range (another client, or a
    value the panel cannot express) is refused naming the panel's label, never the protocol name."""
    import dataclasses
    from protocol.scene import MATERIAL_LABELS
    ob = cube("Jelly")
    ob.clearance.role = "SOLID"
    scene = addon("export").export_scene(bpy.context).scene
    b = scene.bodies[0]
    bad = dataclasses.replace(scene, bodies=(dataclasses.replace(
        b, material=dataclasses.replace(b.material, youngs_modulus=1e15)),))
    with pytest.raises(Exception) as info:
        bad.validate()
    assert str(info.value).startswith("Jelly: Young's Modulus (stiffness) must be")
    # every label names the panel's field (its name without the unit)
    for name, label in MATERIAL_LABELS.items():
        p = ob.clearance.bl_rna.properties.get(name)
        if p is not None:
            assert label.startswith(p.name.split(" (")[0]), (name, label, p.name)


def test_a_joined_object_of_two_overlapping_parts_is_named_once(blender, server, tmp_path):
    """Real bpy and server: two overlapping cubes joined into one object (Ctrl+J) used to be reported
    as 'Joined and Joined intersect at the start frame'."""
    import bmesh
    me = bpy.data.meshes.new("Joined")
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=0.4)
    bmesh.ops.translate(bm, vec=(0.0, 0.0, 0.5), verts=bm.verts[:])
    second = bmesh.ops.create_cube(bm, size=0.4)["verts"]
    bmesh.ops.translate(bm, vec=(0.15, 0.1, 0.6), verts=second)
    bm.to_mesh(me)
    bm.free()
    ob = bpy.data.objects.new("Joined", me)
    bpy.context.scene.collection.objects.link(ob)
    ob.clearance.role = "SOLID"
    s = bpy.context.scene.clearance
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 3
    addon("preferences").get().timeout = 600.0     # a cold kernel cache compiles the contact checks first
    with pytest.raises(RuntimeError) as info:
        bpy.ops.clearance.bake()
    msg = str(info.value)
    assert "Joined intersects itself (at (" in msg and "two of its parts overlap" in msg, msg
    assert "P > By Loose Parts" in msg and "Joined and Joined" not in msg
    assert s.last_error.startswith("Joined") or "Joined intersects itself" in s.last_error
