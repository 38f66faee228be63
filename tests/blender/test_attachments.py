"""Attachments from the panel to the bake, in real Blender (bpy 5.0.1): a cloth strip whose edge lies on the side
of a Stiff crate, the edge in vertex group 'attach', Attach To = the crate. The crate is thrown sideways at
1 m/s and falls; the strip's attached edge must travel with the crate's face (the same displacement, to a
fraction of a millimetre) while the whole thing falls with g (both start at rest vertically, so after t the
drop is g t^2 / 2 plus implicit Euler's h g t / 2). The export carries the object name and the group's
vertices; the Preview solver refuses the attachment naming the strip."""
import bpy
import numpy as np

from conftest import addon
from helpers import cube, mesh_object, world_positions

FRAMES = 13


def crate_and_strip():
    crate = cube("Crate", 0.2)
    c = crate.clearance
    c.role, c.density = "STIFF", 500.0
    c.initial_velocity = (0.0, 1.0, 0.0)
    nx, ny = 6, 2
    xs, ys = np.meshgrid(np.linspace(0.1, 0.22, nx + 1), np.linspace(-0.02, 0.02, ny + 1), indexing="xy")
    verts = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1)
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="xy")
    a = (j * (nx + 1) + i).ravel()
    strip = mesh_object("Strip", verts, np.stack([a, a + 1, a + nx + 2, a + nx + 1], axis=1))
    edge = [k for k in range(len(verts)) if abs(verts[k, 0] - 0.1) < 1e-9]
    strip.vertex_groups.new(name="attach").add(edge, 1.0, "REPLACE")
    s = strip.clearance
    s.role = "CLOTH"
    s.density, s.thickness, s.youngs_modulus, s.bending_stiffness = 200.0, 1e-3, 1e5, 1e-6
    s.attach_to, s.attach_group = crate, "attach"
    return crate, strip, edge


def _settings(scene, server, tmp_path, quality="ACCURATE"):
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.render.fps = 24
    s = scene.clearance
    s.backend, s.solver_quality = "ipc", quality
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0


def test_the_panels_attachment_reaches_the_bake_and_the_strip_rides_the_crate(blender, server, tmp_path):
    scene = bpy.context.scene
    crate, strip, edge = crate_and_strip()
    _settings(scene, server, tmp_path)
    poll = addon("properties").attachable
    assert poll(strip.clearance, crate) and not poll(strip.clearance, strip)   # the menu never offers itself
    ex = addon("export").export_scene(bpy.context)
    body = {b.name: b for b in ex.scene.bodies}["Strip"]
    assert body.attach_to == "Crate"
    np.testing.assert_array_equal(np.sort(body.attach_indices), edge)
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=300) == bs.DONE, session.error
    c0, c1 = world_positions(crate, 1), world_positions(crate, FRAMES)
    s0, s1 = world_positions(strip, 1), world_positions(strip, FRAMES)
    d_crate = (c1 - c0).mean(axis=0)
    d_edge = (s1[edge] - s0[edge]).mean(axis=0)
    t, h = (FRAMES - 1) / 24.0, 1.0 / 24.0
    drop = 9.81 * t * t / 2 + 9.81 * h * t / 2            # implicit Euler from rest
    print(f"\ncrate moved {d_crate}, attached edge {d_edge}; drop {-d_crate[2]:.4f} m (implicit Euler {drop:.4f})")
    assert np.abs(d_edge - d_crate).max() < 5e-4
    assert abs(d_crate[1] - 0.5 * 1.0) < 0.02            # thrown at 1 m/s for 0.5 s (the strip is 1/4000 of it)
    assert abs(-d_crate[2] / drop - 1.0) < 0.01
    assert np.all(s1[:, 0] > c1[:, 0].max() - 1e-3)       # the strip still sticks out of the crate's +x face


def test_preview_refuses_the_attachment_naming_the_strip(blender, server, tmp_path):
    scene = bpy.context.scene
    crate_and_strip()
    _settings(scene, server, tmp_path, "FAST")
    ex = addon("export").export_scene(bpy.context)
    bs = addon("bake_session")
    session = bs.BakeSession(scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=120) != bs.DONE
    assert "Strip" in session.error and "Attach To" in session.error
