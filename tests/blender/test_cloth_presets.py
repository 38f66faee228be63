"""Cloth fabric presets in real Blender: the Material panel's "Apply Fabric Preset" menu (operator
clearance.cloth_preset) sets the calibrated values of protocol/cloth_presets.py on a cloth object, the
export sends them to the solver, and the menu is drawn only for cloth."""
import bpy
import pytest

from conftest import addon
from helpers import apply_preset_and_check, plane

from protocol.cloth_presets import CLOTH_PRESETS


@pytest.mark.parametrize("name", list(CLOTH_PRESETS))
def test_preset_sets_material_and_export_sends_it(blender, name):
    ob = plane("sheet", size=0.3)
    ob.clearance.role = "CLOTH"
    apply_preset_and_check(ob, "cloth_preset", name, CLOTH_PRESETS[name][1], addon("export").export_scene)


def test_preset_menu_only_for_cloth(blender):
    ob = plane("sheet", size=0.3)
    bpy.context.view_layer.objects.active = ob
    ob.clearance.role = "SOLID"
    assert not bpy.ops.clearance.cloth_preset.poll()
    ob.clearance.role = "CLOTH"
    assert bpy.ops.clearance.cloth_preset.poll()
    panel = bpy.types.CLEARANCE_PT_material
    assert addon("material_presets").draw_preset_menu in panel._dyn_ui_initialize()
    items = bpy.ops.clearance.cloth_preset.get_rna_type().properties["preset"].enum_items
    assert [i.identifier for i in items] == list(CLOTH_PRESETS)
