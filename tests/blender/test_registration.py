"""Registering, unregistering and registering the add-on again leaves Blender clean."""
import bpy

import addon_env


def _handler_counts() -> dict:
    h = bpy.app.handlers
    return {n: len(getattr(h, n)) for n in dir(h) if not n.startswith("_") and isinstance(getattr(h, n), list)}


def test_register_unregister_register_is_clean(blender):
    assert hasattr(bpy.types.Object, "clearance") and hasattr(bpy.types.Scene, "clearance")
    assert hasattr(bpy.types, "CLEARANCE_OT_bake") and hasattr(bpy.types, "CLEARANCE_PT_bake")
    handlers = _handler_counts()

    addon_env.disable()
    assert not hasattr(bpy.types.Object, "clearance")
    assert not hasattr(bpy.types.Scene, "clearance")
    for name in ("CLEARANCE_OT_bake", "CLEARANCE_OT_free_bake", "CLEARANCE_PT_bake", "CLEARANCE_PT_object",
                 "ClearancePreferences", "ClearanceObjectSettings"):
        assert not hasattr(bpy.types, name), name
    assert _handler_counts() == handlers

    addon_env.enable()
    assert _handler_counts() == handlers
    ob = bpy.data.objects.new("probe", bpy.data.meshes.new("probe"))
    ob.clearance.role = "CLOTH"
    ob.clearance.thickness = 0.002
    assert ob.clearance.role == "CLOTH" and abs(ob.clearance.thickness - 0.002) < 1e-9
    assert bpy.context.scene.clearance.cache_folder == "//clearance_cache/"
    assert bpy.context.scene.clearance.output == "PC2"


def test_mpm_material_preset_applies(blender):
    ob = bpy.data.objects.new("sand", bpy.data.meshes.new("sand"))
    ob.clearance.role = "GRANULAR"
    ob.clearance.mpm_material = "snow"
    assert ob.clearance.density == 400.0
    ob.clearance.mpm_material = "water"
    assert ob.clearance.density == 1000.0 and ob.clearance.viscosity > 0
