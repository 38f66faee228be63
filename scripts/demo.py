"""The README's main job: build a small scene in Blender, bake it with Clearance, save, render.

Runs headless in the bpy module (Blender 5.0.1 as a Python module, installed by scripts/setup.sh):

    .venv/bin/python scripts/demo.py [--out out/demo] [--frames 48] [--no-render]

The scene: a cloth sheet falling onto a sphere and a floor, and a soft jelly cube dropped beside
it. The add-on is enabled from this checkout the way a user would (a local extensions repository),
``bpy.ops.clearance.bake()`` runs the same operator an artist presses (blocking in background mode;
it starts a local solver server by itself), then the file is saved as ``clearance_demo.blend``
(its animation lives in ``clearance_cache/*.pc2`` beside it, played by Mesh Cache modifiers, so it
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


def build_scene(frames: int) -> dict:
    """Floor + sphere colliders, a 24x24-quad cloth above the sphere, a soft cube beside it."""
    import bmesh
    import bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)
    enable_addon()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps = 24

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


def _camera_and_light() -> None:
    import bpy
    from mathutils import Vector
    scene = bpy.context.scene
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    cam.location = (0.0, -2.6, 1.35)
    direction = Vector((0.0, 0.0, 0.3)) - cam.location
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


def lowest_points(objects: dict, frames: list) -> dict:
    """Lowest world z of each simulated object at the given frames (from the baked playback)."""
    import bpy
    import numpy as np
    out = {}
    scene = bpy.context.scene
    for name in ("cloth", "jelly"):
        ob = objects[name]
        zs = []
        for f in frames:
            scene.frame_set(f)
            ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
            me = ev.to_mesh()
            co = np.empty(len(me.vertices) * 3, np.float32)
            me.vertices.foreach_get("co", co)
            m = np.array(ev.matrix_world)
            ev.to_mesh_clear()
            world = co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
            zs.append(float(world[:, 2].min()))
        out[ob.name] = zs
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "demo"))
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--no-render", action="store_true")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)

    import bpy
    objects = build_scene(args.frames)
    blend = os.path.join(out, "clearance_demo.blend")
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
