"""A keyframed Shrink from the panel to the bake, in real Blender (bpy 5.0.1): Shrink keyed 0 at frame 1 and
0.2 at frame 13 (linear) on a free sheet in zero gravity is exported per frame (shrink_samples) and the baked
sheet's width follows 1 - Shrink: 0.9 at frame 7, 0.8 at frame 13."""
import bpy
import numpy as np

from conftest import addon
from helpers import make_linear, mesh_object, world_positions

N = 6


def test_keyed_shrink_is_exported_and_followed(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 13
    scene.render.fps = 24
    t = np.linspace(-0.25, 0.25, N + 1)
    xs, ys = np.meshgrid(t, t, indexing="xy")
    verts = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1)
    i, j = np.meshgrid(np.arange(N), np.arange(N), indexing="xy")
    a = (j * (N + 1) + i).ravel()
    sheet = mesh_object("sheet", verts, np.stack([a, a + 1, a + N + 2, a + N + 1], axis=1))
    c = sheet.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 200.0, 1e-3, 1e5, 1e-6
    for f, v in ((1, 0.0), (13, 0.2)):
        c.shrink = v
        sheet.keyframe_insert("clearance.shrink", frame=f)
    make_linear(sheet)
    s = scene.clearance
    s.backend, s.solver_quality = "ipc", "ACCURATE"
    s.use_scene_gravity, s.gravity = False, (0.0, 0.0, 0.0)
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0
    ex = addon("export").export_scene(bpy.context)
    body = ex.scene.bodies[0]
    np.testing.assert_allclose(body.shrink_samples, np.linspace(0.0, 0.2, 13), atol=1e-6)
    assert body.shrink_weights is None
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=300) == bs.DONE, session.error
    w0 = np.ptp(world_positions(sheet, 1)[:, 0])
    r7, r13 = (np.ptp(world_positions(sheet, f)[:, 0]) / w0 for f in (7, 13))
    print(f"\nkeyed Shrink: width {r7:.4f} at frame 7 (0.9), {r13:.4f} at frame 13 (0.8)")
    assert abs(r7 - 0.9) < 0.003 and abs(r13 - 0.8) < 0.003
