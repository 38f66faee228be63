"""Solid material presets in real Blender: the Material panel's "Apply Material Preset" menu (operator
clearance.solid_preset) sets the real moduli of protocol/solid_presets.py on a solid or stiff object, the
export sends them, and a bake with each preset runs through a real server and lands the cube on the floor.
The physics of each preset's E and nu (a column's sag under its own weight) is checked on the server side:
tests/ipc/test_solid_presets.py."""
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import apply_preset_and_check, cube, plane

from protocol.pc2 import read_pc2
from protocol.solid_presets import SOLID_PRESETS

ROLE = {"wood": "STIFF"}   # wood is a stiff body; the soft presets are volumetric solids


@pytest.mark.parametrize("name", list(SOLID_PRESETS))
def test_preset_sets_material_and_export_sends_it(blender, name):
    ob = cube("block", size=0.2)
    ob.clearance.role = ROLE.get(name, "SOLID")
    apply_preset_and_check(ob, "solid_preset", name, SOLID_PRESETS[name][1], addon("export").export_scene)


@pytest.mark.slow
def test_a_bake_with_every_preset_runs(blender, server, tmp_path):
    """One cube per preset, side by side, 2 mm above the floor, baked together for 4 frames (26 s on the
    loaded 2-core machine, hence slow)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    floor = plane("floor", size=4.0)
    floor.clearance.role = "COLLIDER"
    for i, name in enumerate(SOLID_PRESETS):
        ob = cube(name, size=0.2, location=(0.5 * i - 1.0, 0, 0.102))
        ob.clearance.role = ROLE.get(name, "SOLID")
        bpy.context.view_layer.objects.active = ob
        assert bpy.ops.clearance.solid_preset(preset=name) == {"FINISHED"}
    settings = scene.clearance
    settings.server_address, settings.cache_folder = server.address, str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0
    assert bpy.ops.clearance.bake() == {"FINISHED"}, settings.last_error
    height = {}
    for name in SOLID_PRESETS:
        local, start, _ = read_pc2(os.path.join(str(tmp_path / "cache"), f"{name}.pc2"))
        z = local[:, :, 2] + 0.102      # object-local -> world (translation only)
        assert start == 1 and z.shape == (4, 8) and np.isfinite(local).all(), name
        assert z.min() > 0.0, name      # never through the floor
        height[name] = z[-1].max() - z[-1].min()
    # E = 5 kPa sags under its own weight where E = 1.5 MPa and 10 GPa keep their 0.2 m
    assert height["jelly"] < height["rubber"] - 1e-3 and abs(height["wood"] - 0.2) < 1e-4, height


def test_preset_menu_for_solid_and_stiff_only(blender):
    ob = cube("block", size=0.2)
    bpy.context.view_layer.objects.active = ob
    for role, shown in (("SOLID", True), ("STIFF", True), ("CLOTH", False), ("GRANULAR", False)):
        ob.clearance.role = role
        assert bpy.ops.clearance.solid_preset.poll() is shown, role
        assert bpy.ops.clearance.cloth_preset.poll() is (role == "CLOTH"), role
    items = bpy.ops.clearance.solid_preset.get_rna_type().properties["preset"].enum_items
    assert [i.identifier for i in items] == list(SOLID_PRESETS)
    assert addon("material_presets").draw_preset_menu in bpy.types.CLEARANCE_PT_material._dyn_ui_initialize()
