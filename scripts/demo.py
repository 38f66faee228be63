"""The README's main job: build a small scene in Blender, bake it with Clearance, save, render.

Runs headless in the bpy module (Blender 5.0.1 as a Python module, installed by scripts/setup.sh):

    .venv/bin/python scripts/demo.py [--scene default|sand|presets|wind|garment|cape] [--out out/demo] [--frames 48]
                                     [--no-render]

The default scene (IPC): a cloth sheet falling onto a sphere and a floor, and a soft jelly cube
dropped beside it. ``--scene sand`` (MPM): a box of sand (about 8 000 particles, 1 cm spacing)
dropped on a tilted ramp; it slides down and spreads on the floor, rendered as spheres (with the
emitter's material) by the particle object's Geometry Nodes (output in out/demo_sand unless
``--out`` is given). ``--scene presets`` (IPC): five 20 cm cubes, one per solid material preset
(rubber, jelly, flesh, foam, and wood as a Stiff body), applied from the preset menu's operator and
dropped on the floor: the jelly slumps under its own weight, the wood does not (out/demo_presets).
``--scene wind`` (IPC, Accurate): a flag pinned along a pole in a keyed Wind with Turbulence gusts (Air
Drag) and a pressurised cushion dropped beside it (out/demo_wind). ``--scene garment`` (IPC, Accurate): a
skirt sewn from two flat panels (loose-edge side seams) around a cone-shaped mannequin (out/demo_garment).
``--scene cape`` (IPC, Accurate): a cape attached (Attach To) to a Stiff crate thrown off a ledge-height
start (out/demo_cape). The add-on is enabled from this checkout the way a user would (a local extensions repository),
``bpy.ops.clearance.bake()`` runs the same operator an artist presses (blocking in background mode;
it starts a local solver server by itself), then the file is saved as ``clearance_demo.blend``
(its animation lives in ``clearance_cache/clearance_demo/*.pc2`` beside it, played by Mesh Cache modifiers, so it
opens and renders without the add-on) and a few frames are rendered to PNG with Cycles on the CPU.
Prints a summary: bake seconds, per-object lowest point, and the rendered files.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def enable_addon() -> None:
    """Enable the add-on from the checkout through a local extensions repository."""
    import addon_utils
    import bpy
    repo = tempfile.mkdtemp(prefix="clearance_demo_repo_")
    os.symlink(os.path.join(ROOT, "blender_addon"), os.path.join(repo, "clearance"))
    bpy.context.preferences.extensions.repos.new(name="Clearance", module="clearance_demo",
                                                 custom_directory=repo, source="USER")
    if addon_utils.enable("bl_ext.clearance_demo.clearance", default_set=True) is None:
        raise SystemExit("demo: the Clearance add-on did not enable")


def _link(name: str, mesh) -> "bpy.types.Object":
    import bpy
    ob = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(ob)
    return ob


def _bm_object(name: str, build, location=(0.0, 0.0, 0.0), rotation=(0.0, 0.0, 0.0)):
    import bmesh
    import bpy
    me = bpy.data.meshes.new(name)
    bm = bmesh.new()
    build(bm)
    bm.to_mesh(me)
    bm.free()
    ob = _link(name, me)
    ob.location = location
    ob.rotation_euler = rotation
    return ob


def _new_scene(frames: int) -> "bpy.types.Scene":
    """An empty factory scene of ``frames`` frames at 24 fps, the add-on enabled."""
    import bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)
    enable_addon()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps = 24
    return scene


def build_scene(frames: int) -> dict:
    """Floor + sphere colliders, a 24x24-quad cloth above the sphere, a soft cube beside it."""
    import bmesh
    scene = _new_scene(frames)

    floor = _bm_object("Floor", lambda bm: bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=1.5))
    sphere = _bm_object("Ball", lambda bm: bmesh.ops.create_uvsphere(bm, u_segments=24, v_segments=12, radius=0.25),
                        location=(0.45, 0.0, 0.26))
    cloth = _bm_object("Cloth", lambda bm: bmesh.ops.create_grid(bm, x_segments=24, y_segments=24, size=0.4),
                       location=(0.45, 0.0, 0.75))
    jelly = _bm_object("Jelly", lambda bm: bmesh.ops.create_cube(bm, size=0.3),
                       location=(-0.45, 0.0, 0.6), rotation=(math.radians(25), math.radians(15), 0.0))
    for ob in (sphere, cloth, jelly):
        for p in ob.data.polygons:
            p.use_smooth = ob is not jelly

    floor.clearance.role = "COLLIDER"
    sphere.clearance.role = "COLLIDER"
    cloth.clearance.role = "CLOTH"
    cloth.clearance.density = 200.0          # kg/m^3 with 1 mm thickness: 0.2 kg/m^2
    cloth.clearance.youngs_modulus = 1.0e6
    cloth.clearance.thickness = 0.002
    cloth.clearance.bending_stiffness = 1.0e-5
    jelly.clearance.role = "SOLID"
    jelly.clearance.youngs_modulus = 3.0e4
    jelly.clearance.density = 1000.0
    s = scene.clearance
    s.contact_gap = 2.0e-3
    s.friction = 0.4
    s.cache_folder = "//clearance_cache/"
    _materials(floor, sphere, cloth, jelly)
    _camera_and_light()
    return {"floor": floor, "sphere": sphere, "cloth": cloth, "jelly": jelly}


def build_sand_scene(frames: int) -> dict:
    """MPM: a 20 cm box of sand above a 25 degree ramp, both ramp and floor closed slabs (colliders)."""
    import bmesh
    scene = _new_scene(frames)

    # Closed slabs at least three grid cells thick (dx = 2 cm): MPM gives closed colliders an inside,
    # while an open sheet is only a one-cell shell that fast grains can cross.
    floor = _bm_object("Floor", lambda bm: bmesh.ops.create_cube(bm, size=1.0), location=(0.1, 0.0, -0.04))
    floor.scale = (1.4, 1.0, 0.08)         # top face at z = 0
    ramp = _bm_object("Ramp", lambda bm: bmesh.ops.create_cube(bm, size=1.0), location=(-0.1, 0.0, 0.3),
                      rotation=(0.0, math.radians(25.0), 0.0))
    ramp.scale = (0.9, 0.5, 0.06)          # its low end (+x) is about 10 cm above the floor
    sand = _bm_object("Sand", lambda bm: bmesh.ops.create_cube(bm, size=0.2), location=(-0.3, 0.0, 0.64))
    for ob, mu in ((floor, 0.6), (ramp, 0.4)):
        ob.clearance.role = "COLLIDER"
        ob.clearance.friction = mu
    sand.clearance.role = "GRANULAR"
    sand.clearance.mpm_material = "sand"   # applies the preset: 1600 kg/m^3, E 3.5e5 Pa, 30 degrees
    sand.clearance.particle_spacing = 0.01
    s = scene.clearance
    s.backend = "AUTO"                     # -> MPM, the scene has a granular object
    s.friction = 0.6
    s.cache_folder = "//clearance_cache/"
    floor.data.materials.append(_material("FloorMat", (0.55, 0.55, 0.58)))
    ramp.data.materials.append(_material("RampMat", (0.45, 0.3, 0.2)))
    sand.data.materials.append(_material("SandMat", (0.76, 0.6, 0.36)))  # the particles render with it
    _camera_and_light(location=(0.35, -2.3, 1.25), target=(0.05, 0.0, 0.18))
    return {"floor": floor, "ramp": ramp, "sand": sand}


def build_presets_scene(frames: int) -> dict:
    """Floor + one 20 cm cube per solid preset (protocol/solid_presets.py), 5 cm above the floor, each
    set through the add-on's Apply Material Preset operator, with its name written in front of it."""
    import bmesh
    import bpy
    scene = _new_scene(frames)
    from protocol.solid_presets import SOLID_PRESETS   # importable once the add-on is enabled
    floor = _bm_object("Floor", lambda bm: bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=3.0))
    floor.clearance.role = "COLLIDER"
    floor.data.materials.append(_material("FloorMat", (0.55, 0.55, 0.58)))
    colours = {"rubber": (0.08, 0.08, 0.09), "jelly": (0.85, 0.15, 0.2), "flesh": (0.9, 0.62, 0.5),
               "foam": (0.95, 0.85, 0.35), "wood": (0.55, 0.36, 0.18)}
    objects = {"floor": floor}
    for i, name in enumerate(SOLID_PRESETS):
        x = 0.42 * (i - (len(SOLID_PRESETS) - 1) / 2)
        ob = _bm_object(name.capitalize(), _subdivided_cube, location=(x, 0.0, 0.15))
        ob.clearance.role = "STIFF" if name == "wood" else "SOLID"
        with bpy.context.temp_override(object=ob, active_object=ob):
            bpy.ops.clearance.solid_preset(preset=name)
        ob.data.materials.append(_material(f"{name}Mat", colours.get(name, (0.5, 0.5, 0.5))))
        label = bpy.data.objects.new(f"{name}_label", bpy.data.curves.new(f"{name}_label", "FONT"))
        label.data.body, label.data.align_x, label.data.size = name, "CENTER", 0.07
        label.location, label.rotation_euler = (x, -0.2, 0.001), (math.radians(20), 0.0, 0.0)
        label.data.materials.append(_material("LabelMat", (0.05, 0.05, 0.05)))
        scene.collection.objects.link(label)
        objects[name] = ob
    s = scene.clearance
    s.friction = 0.5
    # Accurate: Fast's fixed sweep budget leaves the stiff rubber cube 3.5 mm shorter at rest (measured,
    # 36 frames) where its E gives 0.14 mm; the soft presets agree in both.
    s.solver_quality = "ACCURATE"
    s.cache_folder = "//clearance_cache/"
    _camera_and_light(location=(0.0, -3.1, 1.15), target=(0.0, 0.0, 0.08))
    return objects


def _subdivided_cube(bm) -> None:
    """A 20 cm cube whose faces are 3x3 quads, so the soft ones can bulge."""
    import bmesh
    bmesh.ops.create_cube(bm, size=0.2)
    bmesh.ops.subdivide_edges(bm, edges=bm.edges[:], cuts=2, use_grid_fill=True)


def heights(objects: dict, frames: list, names) -> dict:
    """Height (top minus bottom, m) of each named object at the given frames (from the baked playback)."""
    return {objects[n].name: [float(z.max() - z.min()) for z in _world_z(objects[n], frames)] for n in names}


def sand_summary(objects: dict, frames: list) -> dict:
    """Particles of the baked sand at the given frames: lowest z and mean x (how far it slid)."""
    import bpy
    import numpy as np
    parts = bpy.data.objects[f"{objects['sand'].name}_particles"]
    out = {"lowest z": [], "mean x": []}
    for f in frames:
        bpy.context.scene.frame_set(f)
        ev = parts.evaluated_get(bpy.context.evaluated_depsgraph_get())
        geometry = ev.evaluated_geometry()
        pc = geometry.pointcloud
        co = np.empty(len(pc.points) * 3, np.float32)
        pc.attributes["position"].data.foreach_get("vector", co)
        co = co.reshape(-1, 3)
        out["lowest z"].append(float(co[:, 2].min()))
        out["mean x"].append(float(co[:, 0].mean()))
    return out


def build_wind_scene(frames: int) -> dict:
    """Issue 21's features: a flag pinned along a pole in a Wind (keyed from calm to 6 m/s over the first
    half second) plus a little Turbulence, with Air Drag; a cushion (closed ico-sphere cloth with a
    Pressure of 300 Pa) dropped on the floor beside it. Accurate solver (the features need it)."""
    import bmesh
    import bpy
    scene = _new_scene(frames)
    floor = _bm_object("Floor", lambda bm: bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=2.0))
    floor.clearance.role = "COLLIDER"
    floor.data.materials.append(_material("FloorMat", (0.55, 0.55, 0.58)))
    pole = _bm_object("Pole", lambda bm: bmesh.ops.create_cone(bm, cap_ends=True, segments=12, radius1=0.015,
                                                                radius2=0.015, depth=1.4),
                      location=(-0.5, 0.0, 0.7))
    pole.clearance.role = "COLLIDER"
    pole.data.materials.append(_material("PoleMat", (0.15, 0.15, 0.15)))
    flag = _bm_object("Flag", lambda bm: bmesh.ops.create_grid(bm, x_segments=18, y_segments=12, size=0.5),
                      location=(-0.025, 0.0, 1.05), rotation=(math.radians(90), 0.0, 0.0))
    flag.scale = (0.9, 0.6, 1.0)       # 0.9 x 0.6 m
    bpy.context.view_layer.update()
    with bpy.context.temp_override(object=flag, active_object=flag, selected_editable_objects=[flag]):
        bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    left = [v.index for v in flag.data.vertices if v.co.x < -0.449]
    flag.vertex_groups.new(name="pole").add(left, 1.0, "REPLACE")
    c = flag.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 150.0, 1e-3, 2e5, 2e-6
    c.air_drag, c.pin_group = 1.0, "pole"
    flag.data.materials.append(_material("FlagMat", (0.85, 0.25, 0.15)))
    for p in flag.data.polygons:
        p.use_smooth = True
    cushion = _bm_object("Cushion", lambda bm: bmesh.ops.create_icosphere(bm, subdivisions=3, radius=0.18),
                         location=(0.55, 0.3, 0.22))
    cushion.scale = (1.0, 1.0, 0.6)
    bpy.context.view_layer.update()
    with bpy.context.temp_override(object=cushion, active_object=cushion, selected_editable_objects=[cushion]):
        bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    c = cushion.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 300.0, 1e-3, 1e6, 1e-5
    c.pressure, c.air_drag = 300.0, 0.5
    c.field_weights = (0.0, 0.0, 0.0, 0.0)      # the wind is for the flag
    cushion.data.materials.append(_material("CushionMat", (0.25, 0.45, 0.8)))
    for p in cushion.data.polygons:
        p.use_smooth = True
    bpy.ops.object.effector_add(type="WIND", location=(-1.2, -0.2, 0.8), rotation=(0.0, math.radians(90), math.radians(20)))
    wind = bpy.context.object
    wind.name = "Wind"
    for f, s in ((1, 0.0), (12, 6.0)):
        wind.field.strength = s
        wind.keyframe_insert("field.strength", frame=f)
    bpy.ops.object.effector_add(type="TURBULENCE", location=(0.0, 0.0, 1.0))
    turb = bpy.context.object
    turb.name = "Gusts"
    turb.field.strength, turb.field.size, turb.field.seed = 1.5, 0.4, 1   # Blender seeds new fields at random
    s = scene.clearance
    s.solver_quality = "ACCURATE"
    s.contact_gap = 2.0e-3
    s.cache_folder = "//clearance_cache/"
    _camera_and_light(location=(0.2, -3.6, 1.4), target=(0.0, 0.0, 0.72))
    return {"floor": floor, "flag": flag, "cushion": cushion}


def build_garment_scene(frames: int) -> dict:
    """A garment sewn from flat panels: two 0.6 x 0.35 m rectangles, one in front of and one behind a
    cone-shaped mannequin (a collider, wider at the hips, with a sphere for a head), joined along both side
    edges by loose edges (Blender's sewing convention). Sewing pulls the side seams shut, the panels wrap
    around the mannequin into a skirt that slides down the cone until it fits. Accurate solver."""
    import bmesh
    import bpy
    import numpy as np
    scene = _new_scene(frames)
    floor = _bm_object("Floor", lambda bm: bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=1.2))
    floor.clearance.role = "COLLIDER"
    floor.data.materials.append(_material("FloorMat", (0.55, 0.55, 0.58)))
    body = _bm_object("Mannequin", lambda bm: bmesh.ops.create_cone(bm, cap_ends=True, segments=32, radius1=0.22,
                                                                     radius2=0.12, depth=0.9),
                      location=(0.0, 0.0, 0.45))
    body.clearance.role = "COLLIDER"
    body.data.materials.append(_material("BodyMat", (0.8, 0.7, 0.6)))
    for p in body.data.polygons:
        p.use_smooth = True
    head = _bm_object("Head", lambda bm: bmesh.ops.create_uvsphere(bm, u_segments=24, v_segments=12, radius=0.1),
                      location=(0.0, 0.0, 1.0))
    head.clearance.role = "COLLIDER"
    head.data.materials.append(_material("HeadMat", (0.8, 0.7, 0.6)))
    for p in head.data.polygons:
        p.use_smooth = True
    nx, nz, width, height, gap = 12, 7, 0.6, 0.35, 0.25
    xs, zs = np.meshgrid(np.linspace(-width / 2, width / 2, nx + 1), np.linspace(0.45, 0.45 + height, nz + 1),
                         indexing="xy")
    panel = np.stack([xs.ravel(), np.zeros(xs.size), zs.ravel()], axis=1)
    front, back = panel + (0.0, -gap, 0.0), panel + (0.0, gap, 0.0)
    verts = np.concatenate([front, back])
    i, j = np.meshgrid(np.arange(nx), np.arange(nz), indexing="xy")
    a = (j * (nx + 1) + i).ravel()
    quads = np.stack([a, a + 1, a + nx + 2, a + nx + 1], axis=1)
    faces = np.concatenate([quads, quads[:, ::-1] + len(front)])      # both panels' normals face outwards
    n = len(front)
    rows = np.arange(nz + 1) * (nx + 1)
    seams = [(r, n + r) for r in rows] + [(r + nx, n + r + nx) for r in rows]    # left and right side seams
    me = bpy.data.meshes.new("Skirt")
    me.from_pydata([tuple(v) for v in verts], seams, [tuple(f) for f in faces])
    me.update()
    skirt = _link("Skirt", me)
    c = skirt.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 200.0, 1e-3, 2e5, 5e-6
    c.sewing, c.air_drag, c.friction = 60.0, 0.5, 0.4
    skirt.data.materials.append(_material("SkirtMat", (0.55, 0.2, 0.6)))
    for p in skirt.data.polygons:
        p.use_smooth = True
    s = scene.clearance
    s.solver_quality = "ACCURATE"
    s.cache_folder = "//clearance_cache/"
    _camera_and_light(location=(1.3, -2.9, 1.05), target=(0.0, 0.0, 0.45))
    return {"floor": floor, "mannequin": body, "skirt": skirt}


def build_cape_scene(frames: int) -> dict:
    """An attachment: a cape whose top row hangs on the back of a Stiff crate (Attach To + Attach Group), 3 mm
    off its face, the crate thrown forwards and up; the cape trails in the air (Air Drag 1) and lands with it.
    Accurate solver."""
    import bmesh
    import bpy
    import numpy as np
    scene = _new_scene(frames)
    floor = _bm_object("Floor", lambda bm: bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=2.0))
    floor.clearance.role = "COLLIDER"
    floor.data.materials.append(_material("FloorMat", (0.55, 0.55, 0.58)))
    crate = _bm_object("Crate", lambda bm: bmesh.ops.create_cube(bm, size=0.3), location=(-0.6, 0.0, 0.9))
    c = crate.clearance
    c.role, c.density, c.friction = "STIFF", 300.0, 0.5
    c.initial_velocity = (1.6, 0.0, 1.0)
    crate.data.materials.append(_material("CrateMat", (0.6, 0.42, 0.25)))
    nx, nz, w, h = 12, 14, 0.28, 0.5
    xs, zs = np.meshgrid(np.linspace(-w / 2, w / 2, nx + 1), np.linspace(1.02 - h, 1.02, nz + 1), indexing="xy")
    verts = np.stack([np.full(xs.size, -0.753), xs.ravel(), zs.ravel()], axis=1)     # behind the crate's flight
    i, j = np.meshgrid(np.arange(nx), np.arange(nz), indexing="xy")
    a = (j * (nx + 1) + i).ravel()
    me = bpy.data.meshes.new("Cape")
    me.from_pydata([tuple(v) for v in verts], [], [tuple(q) for q in np.stack([a, a + 1, a + nx + 2, a + nx + 1], 1)])
    me.update()
    cape = _link("Cape", me)
    cape.vertex_groups.new(name="collar").add(list(range(nz * (nx + 1), (nz + 1) * (nx + 1))), 1.0, "REPLACE")
    c = cape.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 250.0, 1e-3, 2e5, 5e-6
    c.air_drag, c.friction = 1.0, 0.5
    c.attach_to, c.attach_group = crate, "collar"
    cape.data.materials.append(_material("CapeMat", (0.75, 0.1, 0.15)))
    for p in cape.data.polygons:
        p.use_smooth = True
    s = scene.clearance
    s.solver_quality = "ACCURATE"
    s.cache_folder = "//clearance_cache/"
    _camera_and_light(location=(1.9, -2.4, 1.5), target=(-0.15, 0.0, 0.55))
    return {"floor": floor, "crate": crate, "cape": cape}


def skirt_summary(objects: dict, frames: list) -> dict:
    """Seam gap (m, largest distance between a seam's two vertices) and lowest z of the skirt per frame."""
    import numpy as np
    ob = objects["skirt"]
    seams = np.array([e.vertices[:] for e in ob.data.edges if e.is_loose]) if hasattr(ob.data.edges[0], "is_loose") \
        else None
    out = {"lowest z": [float(z.min()) for z in _world_z(ob, frames)]}
    if seams is not None and len(seams):
        out["widest seam"] = [float(np.linalg.norm(p[seams[:, 0]] - p[seams[:, 1]], axis=1).max())
                              for p in _world_positions(ob, frames)]
    return out


def _world_positions(ob, frames: list) -> list:
    import bpy
    import numpy as np
    out = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        me = ev.to_mesh()
        co = np.empty(len(me.vertices) * 3, np.float32)
        me.vertices.foreach_get("co", co)
        m = np.array(ev.matrix_world)
        ev.to_mesh_clear()
        out.append(co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3])
    return out


def _material(name: str, rgb) -> "bpy.types.Material":
    import bpy
    m = bpy.data.materials.new(name)
    m.diffuse_color = (*rgb, 1.0)
    m.use_nodes = True
    bsdf = m.node_tree.nodes.get("Principled BSDF")
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = (*rgb, 1.0)
        bsdf.inputs["Roughness"].default_value = 0.6
    return m


def _materials(floor, sphere, cloth, jelly) -> None:
    for ob, name, rgb in ((floor, "FloorMat", (0.55, 0.55, 0.58)), (sphere, "BallMat", (0.2, 0.35, 0.8)),
                          (cloth, "ClothMat", (0.85, 0.3, 0.2)), (jelly, "JellyMat", (0.3, 0.8, 0.35))):
        ob.data.materials.append(_material(name, rgb))


def _camera_and_light(location=(0.0, -2.6, 1.35), target=(0.0, 0.0, 0.3)) -> None:
    import bpy
    from mathutils import Vector
    scene = bpy.context.scene
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    cam.location = location
    direction = Vector(target) - cam.location
    cam.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()
    scene.camera = cam
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", "SUN"))
    sun.data.energy = 3.0
    sun.rotation_euler = (math.radians(40), math.radians(10), math.radians(30))
    scene.collection.objects.link(sun)
    world = bpy.data.worlds.new("World")
    world.color = (0.6, 0.65, 0.7)
    scene.world = world


def render(out_dir: str, frames: list) -> list:
    """Render the given frames with Cycles on the CPU (small and quick) to PNG files."""
    import bpy
    scene = bpy.context.scene
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = 16
    scene.render.resolution_x, scene.render.resolution_y = 480, 270
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"
    paths = []
    for f in frames:
        scene.frame_set(f)
        scene.render.filepath = os.path.join(out_dir, f"frame_{f:04d}.png")
        bpy.ops.render.render(write_still=True)
        paths.append(scene.render.filepath)
    return paths


def lowest_points(objects: dict, frames: list, names=("cloth", "jelly")) -> dict:
    """Lowest world z of each simulated object at the given frames (from the baked playback)."""
    return {objects[n].name: [float(z.min()) for z in _world_z(objects[n], frames)] for n in names}


def _world_z(ob, frames: list) -> list:
    """World z of every evaluated vertex of ``ob`` at each frame."""
    return [p[:, 2] for p in _world_positions(ob, frames)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scene", choices=("default", "sand", "presets", "wind", "garment", "cape"), default="default",
                    help="default: cloth + soft cube (IPC); sand: sand on a ramp (MPM); presets: a cube per solid "
                         "material preset (IPC); wind: a flag in Wind and Turbulence and a pressurised cushion "
                         "(IPC, Accurate); garment: a skirt sewn from two flat panels around a mannequin "
                         "(IPC, Accurate); cape: a cape attached to a thrown stiff crate (IPC, Accurate)")
    ap.add_argument("--out", default=None, help="output folder (default out/demo, or out/demo_<scene>)")
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--no-render", action="store_true")
    args = ap.parse_args(argv)
    sand = args.scene == "sand"
    out = os.path.abspath(args.out or os.path.join(ROOT, "out", "demo" if args.scene == "default" else
                                                   f"demo_{args.scene}"))
    os.makedirs(out, exist_ok=True)

    import bpy
    build = {"default": build_scene, "sand": build_sand_scene, "presets": build_presets_scene,
             "wind": build_wind_scene, "garment": build_garment_scene, "cape": build_cape_scene}[args.scene]
    objects = build(args.frames)
    blend = os.path.join(out, "clearance_demo.blend" if args.scene == "default" else
                         f"clearance_demo_{args.scene}.blend")
    bpy.ops.wm.save_as_mainfile(filepath=blend)   # "//clearance_cache/" now resolves beside it
    t0 = time.perf_counter()
    result = bpy.ops.clearance.bake()
    seconds = time.perf_counter() - t0
    s = bpy.context.scene.clearance
    if result != {"FINISHED"}:
        print(f"demo: bake failed: {s.last_error}", file=sys.stderr)
        return 1
    bpy.ops.wm.save_mainfile()
    print(f"demo: baked {s.frames_baked} frames in {seconds:.1f} s -> {blend}")
    check = [1, args.frames // 2, args.frames]
    if sand:
        for what, values in sand_summary(objects, check).items():
            print(f"demo: sand particles: {what} at frames {check}: " + ", ".join(f"{v:.3f} m" for v in values))
    elif args.scene == "presets":
        for name, hs in heights(objects, check, [n for n in objects if n != "floor"]).items():
            print(f"demo: {name}: height at frames {check}: " + ", ".join(f"{h * 1000:.1f} mm" for h in hs))
    elif args.scene == "garment":
        for what, values in skirt_summary(objects, check).items():
            print(f"demo: skirt: {what} at frames {check}: " + ", ".join(f"{v * 1000:.1f} mm" for v in values))
    elif args.scene == "cape":
        for name, zs in lowest_points(objects, check, ("crate", "cape")).items():
            print(f"demo: {name}: lowest z at frames {check}: " + ", ".join(f"{z:.3f} m" for z in zs))
    elif args.scene == "wind":
        for name, zs in lowest_points(objects, check, ("flag", "cushion")).items():
            print(f"demo: {name}: lowest z at frames {check}: " + ", ".join(f"{z:.3f} m" for z in zs))
    else:
        for name, zs in lowest_points(objects, check).items():
            print(f"demo: {name}: lowest z at frames {check}: " + ", ".join(f"{z:.3f} m" for z in zs))
    if not args.no_render:
        t0 = time.perf_counter()
        for p in render(out, check):
            print(f"demo: rendered {p}")
        print(f"demo: rendering took {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
