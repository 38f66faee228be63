"""Load Farm Bake: play the output folder of ``clearance-server bake`` as if this .blend had baked it.

A TD exports the scene (Export Scene (.clrscene)), a node without Blender bakes it with
``clearance-server bake shot.clrscene --out DIR``, and DIR comes back. Because the exported scene carries each
object's world matrix per frame (protocol 1.7, ``Body.world_matrices``), DIR is laid out like the add-on's own
cache folder: ``<object>.pc2`` files in the object's space of each frame beside the server's cache in
``DIR/server/`` (protocol/cache_layout.py). This operator checks that DIR was baked from this very scene (the
scene hash in ``DIR/server/scene.json`` against the hash of what a Bake would send now) and then sets up what a
finished Bake leaves: the Mesh Cache modifiers reading DIR's files, the particle objects of granular bodies,
shape keys (Output: Shape Keys) and the keyed transforms of stiff objects whose Output is Object Transform.
DIR becomes the scene's Cache Folder, so Free Bake and Resume act on it as after a Bake. The .pc2 files are read,
never rewritten; nothing but the folder's ``clearance_blend.json`` (which .blend plays it) is written.
"""
from __future__ import annotations

import hashlib
import json
import os

import bpy
from bpy.props import StringProperty

from protocol.cache_layout import SCENE_JSON, SERVER_DIR, pc2_file_name
from protocol.pc2 import read_pc2
from protocol.scene import SceneError
from protocol.scenefile import scene_bytes

from .export import export_scene
from .writeback import DEFAULT_CACHE_FOLDER, BodyCache, blend_relative, cache_dir, check_cache_paths, claim_cache_dir, free_object


def _folder(directory: str) -> str:
    """Absolute folder of ``directory`` (``//`` is beside the saved .blend)."""
    if directory.startswith("//") and not bpy.data.filepath:
        raise SceneError(f"Load Farm Bake: the folder {directory} is relative to the .blend file, which is not saved: "
                         "save it first or choose an absolute folder.", "", "directory")
    return os.path.normpath(os.path.abspath(bpy.path.abspath(directory)))


def baked_hash(folder: str) -> str:
    """The scene hash recorded in ``folder``/server/scene.json; SceneError naming the file when it is missing or
    damaged."""
    path = os.path.join(folder, SERVER_DIR, SCENE_JSON)
    if not os.path.isfile(path):
        old = os.path.join(folder, SCENE_JSON)
        why = (f"{folder} holds a world-space farm bake (its scene file had no world matrices): export the scene "
               "again from this add-on and bake it on the farm again") if os.path.isfile(old) else (
               f"{folder} is not the --out folder of a finished clearance-server bake: choose that folder")
        raise SceneError(f"Load Farm Bake: {path} does not exist; {why}", "", "directory")
    try:
        with open(path, encoding="utf-8") as f:
            digest = json.load(f).get("scene_hash", "")
    except (OSError, ValueError, AttributeError) as exc:
        raise SceneError(f"Load Farm Bake: {path} cannot be read ({exc}); bake the scene on the farm again", "",
                         "directory") from None
    if not isinstance(digest, str) or not digest:
        raise SceneError(f"Load Farm Bake: {path} has no scene hash; bake the scene on the farm again", "", "directory")
    return digest


def load_farm_bake(context: bpy.types.Context, directory: str) -> tuple:
    """Attach the farm bake in ``directory`` to the context's scene. Returns (folder, number of objects, frames).

    Raises SceneError (one line naming the file and the fix) when the folder was baked from another scene (the
    scene hash differs: another export, other settings, or ``--frames`` / another ``--solver-quality`` on the
    node), when a .pc2 file is missing or incomplete, or when another .blend plays from the folder."""
    scene = context.scene
    folder = _folder(directory)
    recorded = baked_hash(folder)
    export = export_scene(context)
    digest = hashlib.sha256(scene_bytes(export.scene)).hexdigest()
    if digest != recorded:
        raise SceneError(f"Load Farm Bake: {os.path.join(folder, SERVER_DIR, SCENE_JSON)} was baked from another "
                         f"scene (hash {recorded[:12]}, this scene {digest[:12]}): the objects, their animation or the "
                         "bake settings changed since the export, or the node baked with --frames or another "
                         "--solver-quality; export and bake again to load.", "", "directory")
    s = export.scene.settings
    bodies = export.scene.simulated()
    check_cache_paths(bodies)
    frames = {}
    for b in bodies:
        path = os.path.join(folder, pc2_file_name(b.name, b.role))
        try:
            samples, start, _ = read_pc2(path)
        except (OSError, ValueError) as exc:
            raise SceneError(f"Load Farm Bake: {path} (the cache of {b.name}) cannot be read ({exc}); finish the "
                             "farm bake (clearance-server bake ... --resume) and copy the whole folder", b.name,
                             "directory") from None
        if int(round(start)) != s.frame_start or samples.shape[0] != s.n_frames:
            raise SceneError(f"Load Farm Bake: {path} holds {samples.shape[0]} frames from {start:g}, the bake "
                             f"{s.n_frames} from {s.frame_start}; finish the farm bake and copy the whole folder",
                             b.name, "directory")
        frames[b.name] = samples
    claim_cache_dir(folder)
    for obj in export.objects.values():
        free_object(obj, None)   # the previous bake's modifiers, keys and particles; no file is removed
    for b in bodies:
        cache = BodyCache(export.objects[b.name], b.role, export.matrices[b.name], folder, s.frame_start,
                          scene.clearance.output, resume=True, radius=0.5 * b.material.particle_spacing,
                          rest=b.vertices, prescribed=b.animation is not None)
        cache.load(frames[b.name])
    st = scene.clearance
    try:
        same = os.path.normcase(os.path.realpath(cache_dir(scene))) == os.path.normcase(os.path.realpath(folder))
    except SceneError:
        same = False
    if not same:
        rel = blend_relative(folder)
        default = rel.replace("\\", "/").rstrip("/") == DEFAULT_CACHE_FOLDER.rstrip("/")
        st.cache_folder = (folder if default else rel) + os.sep   # the default would mean <folder>/<blend name>
    st.frames_baked, st.progress, st.last_error, st.last_warning = s.n_frames, 1.0, "", ""
    st.status = f"Loaded the farm bake of frames {s.frame_start}–{s.frame_end} from {folder}"
    return folder, len(bodies), s.n_frames


class CLEARANCE_OT_load_farm_bake(bpy.types.Operator):
    """Play the output folder of `clearance-server bake` (a farm bake of this scene's exported .clrscene) as a
    finished Bake: Mesh Cache modifiers, particles, shape keys or keyed transforms"""

    bl_idname = "clearance.load_farm_bake"
    bl_label = "Load Farm Bake"
    bl_options = {"REGISTER", "UNDO"}

    directory: StringProperty(name="Folder", subtype="DIR_PATH",
                              description="The --out folder of clearance-server bake (default: the Cache Folder)")

    @classmethod
    def poll(cls, context) -> bool:
        return context.scene is not None and hasattr(context.scene, "clearance") and not context.scene.clearance.is_baking

    def _default(self, context) -> str:
        try:
            return cache_dir(context.scene)
        except SceneError:
            return ""

    def invoke(self, context, event) -> set:
        if not self.directory:
            self.directory = self._default(context)
        context.window_manager.fileselect_add(self)
        return {"RUNNING_MODAL"}

    def execute(self, context) -> set:
        directory = self.directory or self._default(context)
        if not directory:
            self.report({"ERROR"}, "Load Farm Bake: no folder given and the Cache Folder is relative to an unsaved "
                                   ".blend; choose the farm's --out folder")
            return {"CANCELLED"}
        try:
            folder, n, frames = load_farm_bake(context, directory)
        except SceneError as exc:
            context.scene.clearance.last_error = str(exc)
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        except OSError as exc:
            text = f"Load Farm Bake: cannot use {directory}: {exc.strerror or exc}; choose the farm's --out folder"
            context.scene.clearance.last_error = text
            self.report({"ERROR"}, text)
            return {"CANCELLED"}
        self.report({"INFO"}, f"Loaded the farm bake of {n} objects, {frames} frames, from {folder}")
        return {"FINISHED"}


def register() -> None:
    bpy.utils.register_class(CLEARANCE_OT_load_farm_bake)


def unregister() -> None:
    bpy.utils.unregister_class(CLEARANCE_OT_load_farm_bake)
