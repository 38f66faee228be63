"""Cloth material presets in Properties > Physics > Clearance > Material (role Cloth): a "Preset" menu
that fills density, thickness, Young's modulus, Poisson ratio, bending stiffness and friction from the
calibrated table in protocol/cloth_presets.py (silk, cotton, denim, leather, rubber sheet; sources and
measured Cusick drape in docs/solver.md). The fields stay editable afterwards."""
from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from protocol.cloth_presets import CLOTH_PRESETS

PRESET_ITEMS = [(k, k.capitalize() if k != "rubber" else "Rubber Sheet", desc)
                for k, (desc, _fields) in CLOTH_PRESETS.items()]


class CLEARANCE_OT_cloth_preset(bpy.types.Operator):
    """Set this cloth's material to a calibrated fabric (density, thickness, stiffness, bending, friction)"""

    bl_idname = "clearance.cloth_preset"
    bl_label = "Cloth Preset"
    bl_options = {"REGISTER", "UNDO"}

    preset: EnumProperty(name="Preset", items=PRESET_ITEMS)

    @classmethod
    def poll(cls, context) -> bool:
        ob = context.object
        return ob is not None and hasattr(ob, "clearance") and ob.clearance.role == "CLOTH"

    def execute(self, context):
        c = context.object.clearance
        for key, value in CLOTH_PRESETS[self.preset][1].items():
            setattr(c, key, value)
        self.report({"INFO"}, f"{context.object.name}: {CLOTH_PRESETS[self.preset][0]}")
        return {"FINISHED"}


def draw_preset_menu(panel, context) -> None:
    """Appended to the Material panel: the preset menu for cloth objects."""
    ob = context.object
    if ob is not None and hasattr(ob, "clearance") and ob.clearance.role == "CLOTH":
        panel.layout.operator_menu_enum("clearance.cloth_preset", "preset", text="Apply Fabric Preset",
                                        icon="PRESET")


def register() -> None:
    from . import ui
    bpy.utils.register_class(CLEARANCE_OT_cloth_preset)
    ui.CLEARANCE_PT_material.append(draw_preset_menu)


def unregister() -> None:
    from . import ui
    ui.CLEARANCE_PT_material.remove(draw_preset_menu)
    bpy.utils.unregister_class(CLEARANCE_OT_cloth_preset)
