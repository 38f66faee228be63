"""Wind, air drag and pressure from Blender to the solver and back, in real Blender (bpy 5.0.1).

Sheets of 0.5 m hang from their pinned top edge in one Wind field blowing across them (+y, strength keyed
from 0 at frame 1 to STRENGTH at frame 12; the export must follow the keys).

* Physics: Clearance's membrane of areal density rho_A in a steady wind u with normal air drag k settles,
  straight, at tan(theta) = k u / (rho_A g) from the vertical: there the wind's normal push k u cos(theta)
  balances gravity's normal component rho_A g sin(theta) everywhere on the sheet. A light sheet (0.2 kg/m^2,
  field weight 0.01, so u = 2 m/s) settles within 3 s and is checked against it.
* Blender's own cloth on an identical sheet in the same wind, same run, at Blender's default vertex mass
  (0.3 kg; lighter Blender cloth flutters erratically in this wind, sometimes swinging against it) next to a
  Clearance sheet of the same mass per vertex: both swing like pendulums, so the mean angle of the last
  two seconds is compared and reported.

A closed cushion with keyed Pressure inflates as membrane theory says; the Preview solver refuses Air Drag by name.
"""
import math

import bpy
import numpy as np

from conftest import addon
from helpers import make_linear, mesh_object, world_positions

N = 8           # quads per side
SIZE = 0.5      # m
THICK = 1e-3    # m
STRENGTH = 200.0   # Blender wind strength = Clearance air speed, m/s (times the field weight)
FRAMES = 72
HEAVY_VERTEX_MASS = 0.3  # kg, Blender's default cloth vertex mass


def hanging_sheet(name: str, x0: float):
    """An N x N-quad sheet in the xz-plane (normal +-y) whose top edge (z = 1) is in vertex group 'pin'."""
    t = np.linspace(0.0, SIZE, N + 1)
    xs, zs = np.meshgrid(t - SIZE / 2, 1.0 - t, indexing="xy")
    verts = np.stack([xs.ravel() + x0, np.zeros(xs.size), zs.ravel()], axis=1)
    i, j = np.meshgrid(np.arange(N), np.arange(N), indexing="xy")
    a = (j * (N + 1) + i).ravel()
    quads = np.stack([a, a + 1, a + N + 2, a + N + 1], axis=1)
    ob = mesh_object(name, verts, quads)
    ob.vertex_groups.new(name="pin").add(list(range(N + 1)), 1.0, "REPLACE")
    return ob


def wind_field(strength_keys):
    bpy.ops.object.effector_add(type="WIND", location=(0.0, -1.0, 0.5), rotation=(-math.pi / 2, 0.0, 0.0))
    wind = bpy.context.object                            # local +Z -> world +y
    wind.name = "Wind"
    wind.field.shape = "PLANE"
    for f, s in strength_keys:
        wind.field.strength = s
        wind.keyframe_insert("field.strength", frame=f)
    make_linear(wind)
    return wind


def angle_from_vertical(p: np.ndarray) -> float:
    """Degrees between the vertical and the line from the top edge's middle to the bottom edge's middle
    (positive: swung towards +y, downwind)."""
    top, bottom = p[N // 2], p[N * (N + 1) + N // 2]
    d = bottom - top
    return math.degrees(math.atan2(d[1], -d[2]))


def _cloth(ob, density, modulus, weights):
    c = ob.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = density, THICK, modulus, 1e-6
    c.air_drag = 1.0
    c.pin_group = "pin"
    c.field_weights = weights


def test_wind_swings_hanging_sheets_to_the_drag_laws_angle_and_as_far_as_blender_cloth(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.render.fps = 24
    wind_field([(1, 0.0), (12, STRENGTH)])
    light = hanging_sheet("light", 0.0)
    _cloth(light, 200.0, 1e5, (0.01, 1.0, 1.0, 1.0))
    heavy = hanging_sheet("heavy", 1.0)
    rho_heavy = HEAVY_VERTEX_MASS * (N + 1) ** 2 / (SIZE * SIZE)        # kg/m^2, same mass per vertex on average
    _cloth(heavy, rho_heavy / THICK, 1e8, (1.0, 1.0, 1.0, 1.0))
    s = scene.clearance
    s.backend, s.solver_quality = "ipc", "ACCURATE"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0

    ex = addon("export").export_scene(bpy.context)
    (ff,) = ex.scene.force_fields
    assert ff.kind == "wind" and ff.shape == "plane" and ff.strength.shape == (FRAMES,)
    np.testing.assert_allclose(ff.strength[:12], np.linspace(0.0, STRENGTH, 12), atol=1e-4)   # the keys, per frame
    assert np.allclose(ff.matrix[0][:3, 2], (0.0, 1.0, 0.0), atol=1e-6)
    b = {x.name: x for x in ex.scene.bodies}
    assert b["light"].material.air_drag == 1.0 and np.allclose(b["light"].field_weights, (0.01, 1.0, 1.0, 1.0))

    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=120) == bs.DONE, session.error
    theta = angle_from_vertical(world_positions(light, FRAMES))
    theory = math.degrees(math.atan(1.0 * STRENGTH * b["light"].field_weights[0] / (200.0 * THICK * 9.81)))
    tail = range(FRAMES - 47, FRAMES + 1)
    ours = [angle_from_vertical(world_positions(heavy, f)) for f in tail]

    # Blender's own cloth: the same sheet and pins at the default vertex mass, in the same wind, stepped frame by frame.
    ref = hanging_sheet("blender_cloth", 2.0)
    mod = ref.modifiers.new("Cloth", "CLOTH")
    cs = mod.settings
    cs.mass = HEAVY_VERTEX_MASS
    cs.vertex_group_mass = "pin"
    cs.effector_weights.wind = 1.0
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, FRAMES
    theirs = []
    for f in range(1, FRAMES + 1):
        p = world_positions(ref, f)
        if f in tail:
            theirs.append(angle_from_vertical(p))
    heavy_theory = math.degrees(math.atan(1.0 * STRENGTH / (rho_heavy * 9.81)))
    print(f"\nlight sheet (0.2 kg/m^2, air drag 1 Pa s/m, wind 2 m/s): settled at {theta:.2f} deg, drag law "
          f"{theory:.2f} deg\nheavy sheets (vertex mass {HEAVY_VERTEX_MASS} kg, wind strength {STRENGTH:g}), mean angle of "
          f"frames {tail[0]}-{tail[-1]}: Clearance {np.mean(ours):.2f} deg (range {min(ours):.1f}..{max(ours):.1f}, "
          f"steady drag law {heavy_theory:.2f}), Blender cloth {np.mean(theirs):.2f} deg (range "
          f"{min(theirs):.1f}..{max(theirs):.1f}; air viscosity {cs.air_damping:g})")
    assert abs(theta - theory) < 0.05 * theory
    assert np.mean(theirs) > 1.0 and 0.8 < np.mean(ours) / np.mean(theirs) < 1.25


def test_pressure_inflates_a_closed_cushion(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 8
    scene.render.fps = 8
    bpy.ops.mesh.primitive_ico_sphere_add(subdivisions=3, radius=0.5, location=(0.0, 0.0, 1.0))
    ball = bpy.context.object
    c = ball.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.poisson_ratio, c.bending_stiffness = 200.0, 1e-3, 1e6, 0.3, 0.0
    for f, p in ((1, 0.0), (4, 20.0)):          # keyed: the cushion inflates over three frames
        c.pressure = p
        ball.keyframe_insert("clearance.pressure", frame=f)
    make_linear(ball)
    s = scene.clearance
    s.backend, s.solver_quality, s.newton_tol = "ipc", "ACCURATE", 1e-5
    s.use_scene_gravity = False
    s.gravity = (0.0, 0.0, 0.0)
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0
    ex = addon("export").export_scene(bpy.context)
    np.testing.assert_allclose(ex.scene.bodies[0].pressure_samples, [0, 20 / 3, 40 / 3, 20, 20, 20, 20, 20], atol=1e-4)
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=120) == bs.DONE, session.error
    r0 = np.linalg.norm(world_positions(ball, 1) - (0, 0, 1), axis=1).mean()
    r1 = np.linalg.norm(world_positions(ball, 8) - (0, 0, 1), axis=1).mean()
    theory = 20.0 * 0.5 * 0.7 / (2 * 1e6 * 1e-3)
    print(f"\ncushion dR/R {r1 / r0 - 1:.5f}, membrane theory {theory:.5f}")
    assert abs((r1 / r0 - 1) / theory - 1) < 0.10


def test_fast_solver_refuses_air_drag_naming_the_object(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    sheet = hanging_sheet("sheet", 0.0)
    sheet.clearance.role = "CLOTH"
    sheet.clearance.air_drag = 0.5
    s = scene.clearance
    s.backend, s.solver_quality = "ipc", "FAST"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    ex = addon("export").export_scene(bpy.context)
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=60) != bs.DONE
    assert "sheet" in session.error and "needs the Converged solver" in session.error


def test_vertex_group_maps_are_exported_and_shrink_shrinks(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 13
    sheet = hanging_sheet("sheet", 0.0)
    right = [i for i in range((N + 1) ** 2) if i % (N + 1) > N // 2]
    sheet.vertex_groups.new(name="stiff").add(right, 0.5, "REPLACE")
    sheet.vertex_groups.new(name="hem").add(list(range(N * (N + 1), (N + 1) ** 2)), 1.0, "REPLACE")
    c = sheet.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 200.0, 1e-3, 1e5, 1e-6
    c.stiffness_group, c.stiffness_group_factor = "stiff", 10.0
    c.mass_group, c.mass_group_factor = "hem", 3.0
    c.shrink = 0.2                                   # no Shrink Group: everywhere
    s = scene.clearance
    s.backend, s.solver_quality = "ipc", "ACCURATE"
    s.use_scene_gravity, s.gravity = False, (0.0, 0.0, 0.0)
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0
    ex = addon("export").export_scene(bpy.context)
    vs = ex.scene.bodies[0].vertex_scales
    expect_stiff = np.ones((N + 1) ** 2)
    expect_stiff[right] = 1.0 + 0.5 * 9.0
    np.testing.assert_allclose(vs[:, 0], expect_stiff, atol=1e-6)
    assert np.allclose(vs[:, 1], 1.0) and np.allclose(vs[N * (N + 1):, 2], 3.0) and np.allclose(vs[:N * (N + 1), 2], 1.0)
    assert np.allclose(vs[:, 3], 0.8)
    assert sheet.modifiers.get("Clearance Pin Weights (temporary)") is None      # the probe is gone again
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=120) == bs.DONE, session.error
    p0, p1 = world_positions(sheet, 1), world_positions(sheet, 13)
    ratio = np.ptp(p1[:, 0]) / np.ptp(p0[:, 0])
    print(f"\nshrink 0.2 everywhere: width {ratio:.4f} of the original")
    assert abs(ratio - 0.8) < 0.005


def test_sewing_closes_a_seam_of_loose_edges(blender, server, tmp_path):
    """Two panels of one mesh joined by loose edges (Blender's sewing convention) close to the contact gap."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 25
    t = np.linspace(0.0, 0.3, 5)
    xs, ys = np.meshgrid(t, t, indexing="xy")
    panel = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1)
    verts = np.concatenate([panel - (0.35, 0, 0), panel + (0.05, 0, 0)])     # facing edges 10 cm apart
    i, j = np.meshgrid(np.arange(4), np.arange(4), indexing="xy")
    a = (j * 5 + i).ravel()
    quads = np.stack([a, a + 1, a + 6, a + 5], axis=1)
    faces = np.concatenate([quads, quads + 25])
    seams = [(5 * r + 4, 25 + 5 * r) for r in range(5)]                       # right edge of one, left of the other
    me = bpy.data.meshes.new("garment")
    me.from_pydata([tuple(v) for v in verts], seams, [tuple(f) for f in faces])
    me.update()
    ob = bpy.data.objects.new("garment", me)
    scene.collection.objects.link(ob)
    c = ob.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 200.0, 1e-3, 1e5, 1e-5
    c.sewing, c.air_drag = 20.0, 1.0
    s = scene.clearance
    s.backend, s.solver_quality = "ipc", "ACCURATE"
    s.use_scene_gravity, s.gravity = False, (0.0, 0.0, 0.0)
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0
    ex = addon("export").export_scene(bpy.context)
    assert ex.scene.bodies[0].material.sewing == 20.0 and len(ex.scene.bodies[0].edges) > 5
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=120) == bs.DONE, session.error
    p = world_positions(ob, 25)
    gap = max(float(np.linalg.norm(p[u] - p[v])) for u, v in seams)
    print(f"\nseam gap after 1 s: {gap * 1000:.2f} mm (10 cm at the start)")
    assert gap < 2.5e-3 and all(p[u, 0] < p[v, 0] for u, v in seams)
