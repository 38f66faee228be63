"""Material presets in Properties > Physics > Clearance > Material: an "Apply Fabric Preset" menu for
cloth (silk, cotton, denim, leather, rubber sheet: the calibrated table in protocol/cloth_presets.py, Cusick
drape measured in docs/solver.md) and an "Apply Material Preset" menu for solid and stiff objects (rubber,
jelly, flesh, foam, wood: real moduli from the sources in protocol/solid_presets.py and docs/solver.md).
A preset fills the material fields; they stay editable afterwards."""
from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from protocol.cloth_presets import CLOTH_PRESETS
from protocol.solid_presets import SOLID_PRESETS


def _items(table: dict, labels: dict) -> list:
    """EnumProperty items (identifier, label, description) of a preset table."""
    return [(k, labels.get(k, k.capitalize()), desc) for k, (desc, _fields) in table.items()]


class _ApplyPreset:
    """Shared body of the preset operators: ``table`` maps a preset to (description, fields);
    ``roles`` are the object roles whose material panel shows the menu."""

    bl_options = {"REGISTER", "UNDO"}
    table: dict = {}
    roles: tuple = ()
    menu_text = ""

    @classmethod
    def poll(cls, context) -> bool:
        ob = context.object
        return ob is not None and hasattr(ob, "clearance") and ob.clearance.role in cls.roles

    def execute(self, context):
        c = context.object.clearance
        description, fields = self.table[self.preset]
        for key, value in fields.items():
            setattr(c, key, value)
        self.report({"INFO"}, f"{context.object.name}: {description}")
        return {"FINISHED"}


class CLEARANCE_OT_cloth_preset(_ApplyPreset, bpy.types.Operator):
    """Set this cloth's material to a calibrated fabric (density, thickness, stiffness, bending, friction)"""

    bl_idname = "clearance.cloth_preset"
    bl_label = "Cloth Preset"
    table = CLOTH_PRESETS
    roles = ("CLOTH",)
    menu_text = "Apply Fabric Preset"

    preset: EnumProperty(name="Preset", items=_items(CLOTH_PRESETS, {"rubber": "Rubber Sheet"}))


class CLEARANCE_OT_solid_preset(_ApplyPreset, bpy.types.Operator):
    """Set this object's material to a real one (density, Young's modulus, Poisson ratio, friction)"""

    bl_idname = "clearance.solid_preset"
    bl_label = "Material Preset"
    table = SOLID_PRESETS
    roles = ("SOLID", "STIFF")
    menu_text = "Apply Material Preset"

    preset: EnumProperty(name="Preset", items=_items(SOLID_PRESETS, {"jelly": "Jelly (Gelatin)",
                                                                     "flesh": "Flesh (Soft Tissue)",
                                                                     "wood": "Wood (Stiff)"}))


_operators = (CLEARANCE_OT_cloth_preset, CLEARANCE_OT_solid_preset)


def draw_preset_menu(panel, context) -> None:
    """Appended to the Material panel: the preset menu of the object's role, if it has one."""
    ob = context.object
    if ob is None or not hasattr(ob, "clearance"):
        return
    for op in _operators:
        if ob.clearance.role in op.roles:
            panel.layout.operator_menu_enum(op.bl_idname, "preset", text=op.menu_text, icon="PRESET")


def register() -> None:
    from . import ui
    for op in _operators:
        bpy.utils.register_class(op)
    ui.CLEARANCE_PT_material.append(draw_preset_menu)


def unregister() -> None:
    from . import ui
    ui.CLEARANCE_PT_material.remove(draw_preset_menu)
    for op in reversed(_operators):
        bpy.utils.unregister_class(op)
