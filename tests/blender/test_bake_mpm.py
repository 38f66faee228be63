"""Sand (MPM) poured onto a keyframed floor, baked from Blender through a real server subprocess.

The sand comes back as particles: the point object "<name>_particles" with a "radius" attribute,
its .pc2 read by a Mesh Cache modifier and turned into points (spheres when rendered, with the
emitter's material) by the Geometry Nodes modifier after it. Checks at playback: the particle count never changes, the
evaluated points are exactly the .pc2 samples (which are exactly what the server cached), no
particle is ever below the moving floor, and the sand actually fell onto it.
"""
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, make_linear, plane, world_positions


def _sand_on_moving_floor(tmp_path, server, frames: int, spacing: float, size: float):
    """A sand cube of edge ``size`` whose bottom is 0.15 m above a 1 m floor that slides +x and
    rises 2 cm over the bake (linear keys). Returns (sand, floor)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    floor = plane("floor", size=1.0)
    floor.clearance.role = "COLLIDER"
    floor.location = (-0.05, 0.0, 0.0)
    floor.keyframe_insert("location", frame=1)
    floor.location = (0.05, 0.0, 0.02)
    floor.keyframe_insert("location", frame=frames)
    make_linear(floor)
    sand = cube("sand", size=size, location=(0.0, 0.0, 0.15 + size / 2))
    sand.clearance.role = "GRANULAR"
    sand.clearance.mpm_material = "sand"
    sand.clearance.particle_spacing = spacing
    sand.data.materials.append(bpy.data.materials.new("SandMat"))  # the particles render with it
    s = scene.clearance
    s.backend = "AUTO"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0
    return sand, floor


def _evaluated_points(ob, frame: int):
    """(positions (n, 3), radii (n,), material names) of the point cloud the Geometry Nodes modifier makes."""
    bpy.context.scene.frame_set(frame)
    ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
    if not hasattr(ev, "evaluated_geometry"):   # bpy 4.2 LTS (tests/blender/test_blender_lts.py)
        pytest.skip(f"Blender {bpy.app.version_string} cannot read an evaluated point cloud from Python "
                    "(no Object.evaluated_geometry); the bake itself ran")
    geometry = ev.evaluated_geometry()   # keep it alive: the point cloud belongs to it
    pc = geometry.pointcloud
    assert pc is not None, "the particle object does not evaluate to points"
    n = len(pc.points)
    pos = np.empty(n * 3, np.float32)
    pc.attributes["position"].data.foreach_get("vector", pos)
    rad = np.empty(n, np.float32)
    pc.attributes["radius"].data.foreach_get("value", rad)
    m = np.array(ev.matrix_world)
    materials = [mat.name for mat in pc.materials if mat is not None]
    return pos.reshape(n, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3], rad, materials


def _bake_and_check(tmp_path, server, frames, spacing, size):
    sand, floor = _sand_on_moving_floor(tmp_path, server, frames, spacing, size)
    ex = addon("export").export_scene(bpy.context)
    assert ex.scene.settings.backend == "mpm"          # Auto picks MPM for a granular object
    floor_z = {f: float(world_positions(floor, f)[:, 2].mean()) for f in range(1, frames + 1)}
    assert floor_z[frames] - floor_z[1] == pytest.approx(0.02, abs=1e-6)  # the collider really moves

    assert bpy.ops.clearance.bake() == {"FINISHED"}, bpy.context.scene.clearance.last_error
    s = bpy.context.scene.clearance
    assert s.last_error == "" and s.frames_baked == frames

    parts = bpy.data.objects.get("sand_particles")
    assert parts is not None and parts.type == "MESH"
    n = len(parts.data.vertices)
    assert 0.5 * (size / spacing) ** 3 <= n <= 1.5 * (size / spacing) ** 3
    radius = np.empty(n, np.float32)
    parts.data.attributes["radius"].data.foreach_get("value", radius)
    assert np.allclose(radius, 0.5 * spacing)
    mods = [m.type for m in parts.modifiers]
    assert mods == ["MESH_CACHE", "NODES"]             # cache deforms the vertices, then points
    assert sand.hide_render and sand.display_type == "WIRE"

    from protocol.pc2 import read_pc2
    path = os.path.join(str(tmp_path / "cache"), "sand_particles.pc2")
    cached, start, _ = read_pc2(path)
    assert cached.shape == (frames, n, 3) and start == 1.0
    assert bpy.path.abspath(parts.modifiers[0].filepath) == path

    # The .pc2 holds exactly what the server computed (its own frame cache, written before streaming).
    for f in (1, frames // 2, frames):
        with np.load(os.path.join(str(tmp_path / "cache"), "server", "frames", f"frame_{f:05d}.npz")) as z:
            names = list(z["names"])
            assert np.array_equal(cached[f - 1], z[f"p{names.index('sand')}"])

    # Playback: constant count, points equal to the cache, spheres of the particle radius, above the floor.
    for f in range(1, frames + 1):
        pos, rad, materials = _evaluated_points(parts, f)
        assert pos.shape == (n, 3), f
        assert materials == ["SandMat"], f              # the emitter's material
        assert np.abs(pos - cached[f - 1]).max() < 1e-6, f
        assert np.allclose(rad, 0.5 * spacing), f
        assert pos[:, 2].min() >= floor_z[f] - 1e-6, (f, pos[:, 2].min(), floor_z[f])
    # It fell onto the floor and rests there, up to MPM's collider gap of about one cell (dx = 2 spacings).
    gap_start = cached[0][:, 2].min() - floor_z[1]
    gap_end = cached[-1][:, 2].min() - floor_z[frames]
    assert gap_start > 0.14 and gap_end < 1.5 * (2 * spacing) and gap_end < gap_start - 0.05
    return cached


def test_sand_poured_on_moving_floor_small(blender, server, tmp_path):
    frames = 8
    _bake_and_check(tmp_path, server, frames, spacing=0.03, size=0.12)


@pytest.mark.slow
def test_sand_poured_on_moving_floor_fine(blender, server, tmp_path):
    frames = 24
    cached = _bake_and_check(tmp_path, server, frames, spacing=0.01, size=0.15)
    # After one second the sand has slumped into a heap wider than the cube it started as.
    spread = np.ptp(cached[-1][:, 0]) - np.ptp(cached[0][:, 0])
    assert spread > 0.02


def test_sand_sliding_off_the_floor_falls_on(blender, server, tmp_path):
    """Issue 10: sand pushed over the edge of the only collider falls on (the automatic open
    domain) instead of stopping in mid-air on an invisible wall; the particle count stays constant
    and the frame stats count the particles that left the domain."""
    import json
    frames, spacing, edge = 12, 0.03, 0.25
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    floor = plane("floor", size=2 * edge)
    floor.clearance.role = "COLLIDER"
    sand = cube("sand", size=0.12, location=(0.12, 0.0, 0.14))   # above the plane's one-cell slab
    sand.clearance.role = "GRANULAR"
    sand.clearance.mpm_material = "sand"
    sand.clearance.particle_spacing = spacing
    sand.clearance.initial_velocity = (2.5, 0.0, 0.0)
    s = scene.clearance
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0
    assert s.mpm_domain == "AUTO"
    ex = addon("export").export_scene(bpy.context)
    assert ex.scene.settings.mpm_domain == "auto"
    assert ex.scene.bodies[[b.name for b in ex.scene.bodies].index("sand")].material.grain_size == pytest.approx(1e-3)

    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    assert s.last_error == "" and s.frames_baked == frames
    from protocol.pc2 import read_pc2
    cached, _, _ = read_pc2(os.path.join(str(tmp_path / "cache"), "sand_particles.pc2"))
    n = cached.shape[1]
    assert cached.shape == (frames, n, 3)
    parts = bpy.data.objects["sand_particles"]
    pos, _, _ = _evaluated_points(parts, frames)
    assert pos.shape == (n, 3)                          # playback keeps every point
    last, prev = cached[-1], cached[-2]
    moved = np.linalg.norm(last - prev, axis=1)
    on_floor = (last[:, 0] < edge + 0.1) & (last[:, 2] > -1e-6) & (last[:, 2] < 0.2)
    fell = last[:, 2] < -0.05
    assert fell.sum() > 0.1 * n                         # a good part went over the edge ...
    assert np.all(on_floor | fell)                      # ... and nothing hangs in between
    assert np.all(last[fell, 2] < prev[fell, 2] - 0.5 * 9.81 * 0.3 / 24)  # still falling (> 0.3 s of g)
    assert np.all(moved[~on_floor] > 0.01)
    with open(os.path.join(str(tmp_path / "cache"), "server", "stats.json")) as f:
        rows = json.load(f)["frames"]
    left = [r.get("left_domain") for r in rows]
    assert left[-1] > 0 and left[-1] <= fell.sum()


def test_box_domain_is_exported_as_walls(blender):
    scene = bpy.context.scene
    floor = plane("floor", size=1.0)
    floor.clearance.role = "COLLIDER"
    sand = cube("sand", size=0.1, location=(0.0, 0.0, 0.2))
    sand.clearance.role = "GRANULAR"
    s = scene.clearance
    s.mpm_domain = "BOX"
    s.domain_min, s.domain_max = (-0.5, -0.4, -0.1), (0.5, 0.4, 0.6)
    st = addon("export").export_scene(bpy.context).scene.settings
    assert st.mpm_domain == "box"
    assert st.domain_min == pytest.approx((-0.5, -0.4, -0.1)) and st.domain_max == pytest.approx((0.5, 0.4, 0.6))
