"""The solid's Element (Linear / Quadratic tetrahedra, Material.element) in real Blender: the
property, its row on the Solid material panel, the exported material, a bake of a quadratic cube
through a real server (Accurate), and the Fast solver's refusal naming the object."""
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, plane
from test_addon_solver_quality import _RecordingLayout


def _scene(tmp_path, server):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 6
    box = cube("jelly", size=0.2, location=(0, 0, 0.13))   # 3 cm above the floor
    box.clearance.role = "SOLID"
    box.clearance.youngs_modulus = 1.0e5
    box.clearance.element = "quadratic"
    plane("floor", size=2.0).clearance.role = "COLLIDER"
    s = scene.clearance
    s.solver_quality = "ACCURATE"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 60.0
    return scene, box


def test_property_defaults_to_linear_and_matches_the_protocol(blender):
    prop = bpy.types.Object.bl_rna.properties["clearance"].fixed_type.properties["element"]
    assert prop.type == "ENUM" and prop.default == "linear"
    items = {i.identifier: i for i in prop.enum_items}
    from protocol.scene import ELEMENTS
    assert tuple(items) == ELEMENTS
    assert "Converged solver only" in items["quadratic"].description


def _draw_material_panel(log):
    """The panel's own draw() (Blender wraps it when the presets menu is appended to it)."""
    draw = bpy.types.CLEARANCE_PT_material.draw
    own = getattr(draw, "_draw_funcs", [draw])[0]
    own(type("P", (), {"layout": _RecordingLayout(log)})(), bpy.context)


def test_solid_panel_shows_element_after_the_model_and_export_sends_it(blender):
    ob = cube("box")
    ob.clearance.role = "SOLID"
    bpy.context.view_layer.objects.active = ob
    log = []
    _draw_material_panel(log)
    names = [n for n, _, _ in log]
    assert names[names.index("model") + 1] == "element"
    ob.clearance.role = "CLOTH"
    log.clear()
    _draw_material_panel(log)
    assert "element" not in [n for n, _, _ in log]
    ob.clearance.role = "SOLID"
    export = addon("export")
    assert export.material_of(ob).element == "linear"
    ob.clearance.element = "quadratic"
    m = export.material_of(ob)
    assert m.element == "quadratic"
    m.validate(ob.name)


def test_bake_of_a_quadratic_cube_and_the_fast_refusal(blender, server, tmp_path):
    scene, box = _scene(tmp_path, server)
    assert bpy.ops.clearance.bake() == {"FINISHED"}, scene.clearance.last_error
    from protocol.pc2 import read_pc2
    local, _, _ = read_pc2(os.path.join(str(tmp_path / "cache"), "jelly.pc2"))
    z = local[:, :, 2] + 0.13                     # object-local -> world (translation only)
    assert z.shape == (6, 8)                       # the artist's 8 vertices, not the mid-edge nodes
    assert z.min() > 0.0 and z[-1].min() < 0.03 - 1e-3   # fell, never below the floor
    scene.clearance.solver_quality = "FAST"
    scene.clearance.cache_folder = str(tmp_path / "cache_fast")
    with pytest.raises(RuntimeError):
        bpy.ops.clearance.bake()
    err = scene.clearance.last_error
    assert "jelly" in err and "Converged" in err, err
