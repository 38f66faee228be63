"""Air Drag on a Stiff object from the panel, in real Blender (bpy 5.0.1): a 0.2 m cube of 50 kg/m^3 with Air
Drag 20 Pa·s/m dropped from 5 m falls at the drag law's rho a g / (2 k) = 2.4525 m/s after 2 s (8 time
constants; its top and bottom faces feel the air, the sides are edge-on)."""
import bpy
import numpy as np

from conftest import addon
from helpers import cube, world_positions


def test_a_stiff_cube_with_air_drag_falls_at_the_drag_laws_speed(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 49
    scene.render.fps = 24
    ob = cube("Crate", 0.2, location=(0.0, 0.0, 5.0))
    c = ob.clearance
    c.role, c.density, c.air_drag = "STIFF", 50.0, 20.0
    s = scene.clearance
    s.backend, s.solver_quality = "ipc", "ACCURATE"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0
    ex = addon("export").export_scene(bpy.context)
    assert ex.scene.bodies[0].material.air_drag == 20.0
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=300) == bs.DONE, session.error
    v = (world_positions(ob, 48)[:, 2].mean() - world_positions(ob, 49)[:, 2].mean()) * 24.0
    vt = 50.0 * 0.2 * 9.81 / (2 * 20.0)
    print(f"\nstiff cube with Air Drag 20: {v:.4f} m/s after 2 s, drag law {vt:.4f} m/s")
    assert abs(v / vt - 1.0) < 0.005
