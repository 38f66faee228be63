"""Panels in Properties > Physics, laid out like Blender's own Cloth panel: the object's role
on top, then its material (only the fields the role uses), and a scene-level Bake panel with
the bake buttons, progress, the last error and the local server's status."""
from __future__ import annotations

import bpy

from protocol.scene import PREVIEW_ERROR

from . import preferences, server_process, solver_launch

MATERIAL_FIELDS = {
    "SOLID": ("density", "youngs_modulus", "poisson_ratio", "model", "element", "friction", "damping", "air_drag"),
    "CLOTH": ("density", "youngs_modulus", "poisson_ratio", "thickness", "bending_stiffness", "friction", "damping",
              "air_drag", "pressure", "sewing"),
    "ROD": ("density", "youngs_modulus", "thickness", "bending_stiffness", "friction", "damping", "air_drag"),
    "STIFF": ("density", "youngs_modulus", "friction", "air_drag"),
    "GRANULAR": ("mpm_material", "density", "youngs_modulus", "poisson_ratio", "particle_spacing"),
    "COLLIDER": ("friction", "thickness"),
}
MPM_EXTRA = {"sand": ("friction_angle", "grain_size"), "water": ("viscosity",), "mud": ("viscosity", "yield_stress")}
PINNED_ROLES = {"SOLID", "CLOTH", "ROD", "STIFF"}
ATTACHING_ROLES = {"SOLID", "CLOTH", "ROD"}
"""Roles whose vertices can hang on another object (Attach To, protocol Body.attach_to)."""


class ClearancePanelBase:
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"


class CLEARANCE_PT_object(ClearancePanelBase, bpy.types.Panel):
    bl_label = "Clearance"

    @classmethod
    def poll(cls, context) -> bool:
        return context.object is not None and hasattr(context.object, "clearance")

    def draw(self, context) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.prop(context.object.clearance, "role")


class CLEARANCE_PT_material(ClearancePanelBase, bpy.types.Panel):
    bl_label = "Material"
    bl_parent_id = "CLEARANCE_PT_object"

    @classmethod
    def poll(cls, context) -> bool:
        ob = context.object
        return ob is not None and hasattr(ob, "clearance") and ob.clearance.role != "NONE"

    def draw(self, context) -> None:
        layout = self.layout
        layout.use_property_split = True
        c = context.object.clearance
        col = layout.column()
        for name in MATERIAL_FIELDS[c.role]:
            col.prop(c, name)
        if c.role == "GRANULAR":
            for name in MPM_EXTRA.get(c.mpm_material, ()):
                col.prop(c, name)
        if c.role in ("CLOTH", "SOLID", "ROD"):
            layout.prop(c, "field_weights", text="Field Weights (Wind, Force, Vortex, Turbulence)")
        if c.role != "COLLIDER":
            layout.prop(c, "initial_velocity")
        if c.role == "STIFF":
            layout.prop(c, "stiff_output")
            layout.prop(c, "collision_shape")
            if c.collision_shape == "PROXY":
                layout.prop(c, "collision_proxy")
            if c.collision_shape != "MESH":
                col = layout.column(align=True)
                col.label(text="No intersection between collision shapes", icon="CHECKMARK")
                col.label(text="The mesh follows its shape rigidly", icon="BLANK1")


class CLEARANCE_PT_pins(ClearancePanelBase, bpy.types.Panel):
    bl_label = "Pins & Attachment"
    bl_parent_id = "CLEARANCE_PT_object"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context) -> bool:
        ob = context.object
        return ob is not None and hasattr(ob, "clearance") and ob.clearance.role in PINNED_ROLES

    def draw(self, context) -> None:
        layout = self.layout
        layout.use_property_split = True
        ob = context.object
        layout.prop_search(ob.clearance, "pin_group", ob, "vertex_groups", text="Pin Group")
        row = layout.row()
        row.enabled = bool(ob.clearance.pin_group)
        row.prop(ob.clearance, "pin_follows")
        if ob.clearance.role in ATTACHING_ROLES:
            layout.prop(ob.clearance, "attach_to")
            row = layout.row()
            row.enabled = ob.clearance.attach_to is not None
            row.prop_search(ob.clearance, "attach_group", ob, "vertex_groups", text="Attach Group")


class CLEARANCE_PT_maps(ClearancePanelBase, bpy.types.Panel):
    bl_label = "Vertex Group Maps"
    bl_parent_id = "CLEARANCE_PT_object"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context) -> bool:
        ob = context.object
        return ob is not None and hasattr(ob, "clearance") and ob.clearance.role == "CLOTH"

    def draw(self, context) -> None:
        layout = self.layout
        layout.use_property_split = True
        ob = context.object
        c = ob.clearance
        for group, factor in (("stiffness_group", "stiffness_group_factor"), ("bending_group", "bending_group_factor"),
                              ("mass_group", "mass_group_factor")):
            layout.prop_search(c, group, ob, "vertex_groups")
            row = layout.row()
            row.enabled = bool(getattr(c, group))
            row.prop(c, factor)
        layout.prop(c, "shrink")
        layout.prop_search(c, "shrink_group", ob, "vertex_groups")


class CLEARANCE_PT_bake(ClearancePanelBase, bpy.types.Panel):
    bl_label = "Clearance Bake"

    @classmethod
    def poll(cls, context) -> bool:
        return context.scene is not None and hasattr(context.scene, "clearance")

    def draw(self, context) -> None:
        layout = self.layout
        s = context.scene.clearance
        row = layout.row(align=True)
        if s.is_baking:
            row.operator("clearance.cancel", icon="CANCEL")
        else:
            row.operator("clearance.bake", icon="PHYSICS").resume = False
            row.operator("clearance.bake", text="Resume", icon="PLAY").resume = True
            row.operator("clearance.free_bake", icon="TRASH")
        setup = solver_launch.current_setup()
        if setup is not None and setup.poll() and not s.is_baking:   # Install Solver running
            layout.progress(factor=setup.fraction, text=setup.status_text())
        elif s.is_baking or s.status:
            layout.progress(factor=s.progress, text=s.status or "")
        if s.last_error:
            box = layout.box()
            for i, line in enumerate(preferences.wrap_lines(s.last_error, 60)):
                box.label(text=line, icon="ERROR" if i == 0 else "BLANK1")
        if s.last_warning and not s.is_baking:   # frames that did not converge (bake_session.py)
            box = layout.box()
            for i, line in enumerate(preferences.wrap_lines(s.last_warning, 60)):
                box.label(text=line, icon="INFO" if i == 0 else "BLANK1")


class CLEARANCE_PT_bake_settings(ClearancePanelBase, bpy.types.Panel):
    bl_label = "Settings"
    bl_parent_id = "CLEARANCE_PT_bake"

    def draw(self, context) -> None:
        layout = self.layout
        layout.use_property_split = True
        s = context.scene.clearance
        layout.prop(s, "use_scene_range")
        col = layout.column(align=True)
        col.enabled = not s.use_scene_range
        col.prop(s, "frame_start")
        col.prop(s, "frame_end")
        layout.prop(s, "substeps")
        row = layout.row()
        row.active = s.backend in ("AUTO", "ipc")   # MPM and pass-through ignore it
        row.prop(s, "solver_quality", expand=True)
        if s.backend in ("AUTO", "ipc"):
            col = layout.column(align=True)
            if s.solver_quality == "FAST":
                col.label(text="Preview: steps are not converged", icon="ERROR")
                col.label(text=f"Measured: {PREVIEW_ERROR.split(' (')[0]} from converged", icon="BLANK1")
            else:
                col.label(text="Every step converged to Newton Tolerance", icon="CHECKMARK")
            col.label(text="No intersection, no inverted element", icon="BLANK1")
        row = layout.row()
        row.active = s.backend in ("AUTO", "ipc")
        row.prop(s, "integrator")
        row = layout.row()
        row.active = s.backend in ("AUTO", "ipc")
        row.prop(s, "use_force_fields")
        layout.prop(s, "use_scene_gravity")
        if not s.use_scene_gravity:
            layout.prop(s, "gravity")
        layout.prop(s, "contact_gap")
        layout.prop(s, "friction")
        layout.prop(s, "newton_tol")
        row = layout.row()
        row.active = s.backend in ("AUTO", "ipc")   # the IPC solver's budget a step: MPM and pass-through ignore it
        row.prop(s, "max_newton_iterations")
        layout.prop(s, "backend")
        if s.backend in ("AUTO", "mpm"):
            layout.prop(s, "mpm_domain")
            if s.mpm_domain == "BOX":
                col = layout.column(align=True)
                col.prop(s, "domain_min")
                col.prop(s, "domain_max")
        layout.prop(s, "output")
        layout.prop(s, "cache_folder")


class CLEARANCE_PT_server(ClearancePanelBase, bpy.types.Panel):
    bl_label = "Server"
    bl_parent_id = "CLEARANCE_PT_bake"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.prop(context.scene.clearance, "server_address", text="Address Override")
        server = server_process.local_server()
        row = layout.row()
        if server is not None:
            row.label(text=f"Local server: {server.address}", icon="CHECKMARK")
            row.operator("clearance.server_stop", text="", icon="X")
        else:
            row.label(text="Local server: not running", icon="RADIOBUT_OFF")
            row.operator("clearance.server_start", text="", icon="PLAY")
        prefs = preferences.get(context)
        if prefs is not None and prefs.server_mode == "EMBEDDED":
            preferences.draw_install_status(layout, prefs, width=60, full=False)
        # bake on a machine without Blender: the scene a Bake would send, for `clearance-server bake`
        layout.operator("clearance.export_scene", icon="EXPORT")
        # ... and play what that machine baked (its --out folder), as a finished Bake
        layout.operator("clearance.load_farm_bake", icon="IMPORT")


_classes = (CLEARANCE_PT_object, CLEARANCE_PT_material, CLEARANCE_PT_pins, CLEARANCE_PT_maps, CLEARANCE_PT_bake,
            CLEARANCE_PT_bake_settings, CLEARANCE_PT_server)


def register() -> None:
    for c in _classes:
        bpy.utils.register_class(c)


def unregister() -> None:
    for c in reversed(_classes):
        bpy.utils.unregister_class(c)
