"""Export Scene (.clrscene): write the scene a Bake would send to a file, for a machine without Blender.

A TD exports from the panel (Clearance Bake > Server > Export Scene) or from a farm script
(``scripts/bake_blend.py FILE.blend --export scene.clrscene``), copies the file to any node with the
solver, and runs ``clearance-server bake scene.clrscene --out DIR`` there: the same scene, built by
the same :func:`export.export_scene` and checked by the same validation as a Bake, so the node
refuses nothing the Bake would accept and bakes the same frames.
"""
from __future__ import annotations

import os

import bpy
from bpy.props import StringProperty

from protocol.scene import SceneError
from protocol.scenefile import EXTENSION, save_scene

from .export import export_scene

# Blender 4.5+ warns about "//" in path properties unless they declare blend-relative support.
_BLEND_RELATIVE = {"PATH_SUPPORTS_BLEND_RELATIVE"} if bpy.app.version >= (4, 5, 0) else set()


def default_path(context: bpy.types.Context) -> str:
    """``<blend name>.clrscene`` beside the saved .blend, else ``<scene name>.clrscene`` in the working folder."""
    blend = bpy.data.filepath
    if blend:
        return os.path.splitext(blend)[0] + EXTENSION
    return os.path.abspath(bpy.path.clean_name(context.scene.name) + EXTENSION)


def write_scene_file(context: bpy.types.Context, path: str) -> tuple:
    """Export the context's scene to ``path`` (``//`` is beside the .blend; the extension is added
    when missing). Returns (absolute path, Scene). Raises SceneError (the Bake's own refusals) or
    OSError (the file cannot be written)."""
    if path.startswith("//") and not bpy.data.filepath:
        raise SceneError(f"The path {path} is relative to the .blend file, which is not saved: save it first or "
                         "choose an absolute path.", "", "filepath")
    path = os.path.abspath(bpy.path.abspath(path))
    if not path.lower().endswith(EXTENSION):
        path += EXTENSION
    scene = export_scene(context).scene
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_scene(path, scene)
    return path, scene


class CLEARANCE_OT_export_scene(bpy.types.Operator):
    """Write the scene a Bake would send to a .clrscene file, to bake it with `clearance-server bake` on a
    machine without Blender"""

    bl_idname = "clearance.export_scene"
    bl_label = "Export Scene (.clrscene)"
    bl_options = {"REGISTER"}

    filepath: StringProperty(name="File Path", subtype="FILE_PATH", options=_BLEND_RELATIVE,
                             description="Where to write the scene file (.clrscene)")
    filter_glob: StringProperty(default="*" + EXTENSION, options={"HIDDEN"})

    @classmethod
    def poll(cls, context) -> bool:
        return context.scene is not None and hasattr(context.scene, "clearance")

    def invoke(self, context, event) -> set:
        if not self.filepath:
            self.filepath = default_path(context)
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}

    def execute(self, context) -> set:
        try:
            path, scene = write_scene_file(context, self.filepath or default_path(context))
        except SceneError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        except OSError as exc:
            self.report({"ERROR"}, f"Cannot write the scene file {self.filepath}: {exc.strerror or exc}; choose "
                                   "another folder")
            return {"CANCELLED"}
        s = scene.settings
        self.report({"INFO"}, f"Exported {len(scene.bodies)} objects, frames {s.frame_start}-{s.frame_end}, to "
                              f"{path}; bake it with: clearance-server bake {path} --out DIR")
        return {"FINISHED"}


def register() -> None:
    bpy.utils.register_class(CLEARANCE_OT_export_scene)


def unregister() -> None:
    bpy.utils.unregister_class(CLEARANCE_OT_export_scene)
