"""Results -> Blender: .pc2 point caches read by Mesh Cache modifiers, or shape keys.

Where the cache sits in the modifier stack. The positions the solver returns are those of the
*evaluated* mesh (every modifier applied), so the cache must replace what the modifiers did:
the Mesh Cache modifier ("Clearance Cache") goes LAST in the stack, pinned there
(``use_pin_to_last`` where Blender has it), in Overwrite mode. The modifiers above it keep
running (so topology stays what was exported) but their positions are overwritten. In shape
key mode the keys live on the original mesh, below every modifier, so the baked modifiers
are switched off instead (and switched back on by Free Bake); that mode therefore needs
modifiers that do not change the vertex count.

Space. The cache stores object-local coordinates: the world positions of frame f times the
inverse of the object's world matrix at frame f (sampled by the export). Playback multiplies
by that same matrix again, so the object shows exactly the solver's world positions even if
its transform is animated or parented.

Frames. Sample 0 of each cache is the start frame (the initial positions), sample k is frame
start + k; the Mesh Cache modifier's ``frame_start`` is set to the bake's start frame so that
Blender frame f plays cached frame f. Shape-key mode keys one key per frame (value 1 on its
frame, 0 on the neighbours, linear), which blends correctly on subframes.

Stiff bodies may instead come back as object animation (the object's "Output: Object Transform"):
each frame's positions are an affine image of the start positions (affine body dynamics), so the
world matrix M_f = T(p) R T(-c) M_0 (protocol/rigid.py; R from the polar decomposition of the fitted
A) is keyed as location / rotation / scale on a new action; no cache file, no modifier. The previous
action and the start transform are kept in ID properties and restored by Free Bake. A keyframed stiff
object is a prescribed body that follows its own animation: nothing is keyed for it.

Granular bodies come back as particles: a vertex-only mesh object "<name>_particles" with a
float "radius" point attribute, a Mesh Cache modifier, and a Geometry Nodes modifier (Mesh to
Points, then the emitter's material) after it so it renders as spheres without the add-on.
"""
from __future__ import annotations

import os
from typing import Optional

import bpy
import numpy as np

from protocol.cache_layout import (FRAMES_DIR, SERVER_DIR, STATE_DIR, is_own_file, particle_object_name,
                                   pc2_file_name, pc2_stem, to_local)
from protocol.pc2 import HEADER_SIZE, PC2Writer, read_pc2
from protocol.rigid import rigid_world_matrix
from protocol.scene import SceneError

CACHE_MODIFIER = "Clearance Cache"
PARTICLE_MODIFIER = "Clearance Particles"
PARTICLE_GROUP = "Clearance Particles"
PARTICLE_MATERIAL_INPUT = "Material"
KEY_PREFIX = "clearance_"
DISABLED_PROP = _DISABLED = "clearance_disabled_modifiers"   # ID property: modifiers switched off by shape-key mode
_MADE_BASIS = "clearance_made_basis"         # ID property: the Basis key was added by the bake
_HIDDEN = "clearance_hidden_source"          # ID property on a granular source: (hide_render, display_type)
TRANSFORM_ACTION = "clearance_transform_action"  # ID property: name of the action a transform bake keyed
_PREV_ACTION = "clearance_prev_action"       # ID property: the action the object had before ("" if none)
_REST_BASIS = "clearance_rest_basis"         # ID property: matrix_basis (16 floats, row-major) before the bake
_REST_PROPS = "clearance_rest_transform"     # ID property: location, rotations and scale (17 floats) before the bake
TRANSFORM_PROPS = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale")
"""The transform properties a transform bake keys, stored and given back exactly (matrix_basis alone is not:
setting it decomposes the matrix again, a few float32 ulps off, which changed the exported scene and its hash)."""


def restore_rest_transform(obj: bpy.types.Object) -> None:
    """Give ``obj`` back the transform it had before its transform bake: the exact property values when the bake
    stored them, else (a bake by an older add-on) its matrix_basis."""
    props = list(obj.get(_REST_PROPS, []))
    if len(props) == 17:
        i = 0
        for p in TRANSFORM_PROPS:
            n = len(getattr(obj, p))
            setattr(obj, p, props[i:i + n])
            i += n
        return
    from mathutils import Matrix
    b = list(obj.get(_REST_BASIS, []))
    if len(b) == 16:
        obj.matrix_basis = Matrix([b[0:4], b[4:8], b[8:12], b[12:16]])


def begin_transform_bake(obj: bpy.types.Object) -> None:
    """Prepare ``obj`` for keyed transforms: remember its action and start transform, detach the action
    (the bake's keys go to a new one). Idempotent while a transform bake is in place."""
    if TRANSFORM_ACTION in obj:
        return
    ad = obj.animation_data
    obj[_PREV_ACTION] = ad.action.name if (ad is not None and ad.action is not None) else ""
    obj[_REST_BASIS] = [float(v) for row in obj.matrix_basis for v in row]
    obj[_REST_PROPS] = [float(v) for p in TRANSFORM_PROPS for v in getattr(obj, p)]
    if ad is not None:
        ad.action = None
    obj[TRANSFORM_ACTION] = ""


def key_transform(obj: bpy.types.Object, frame: int, world: np.ndarray) -> None:
    """Key location, rotation (in the object's rotation mode, continuous with the previous key) and
    scale so that the object's world matrix at ``frame`` is ``world`` (4, 4). Parented objects use
    their parent's current world matrix (a parent animated during the bake is not supported)."""
    from mathutils import Matrix
    M = Matrix([list(map(float, r)) for r in np.asarray(world, np.float64)])
    if obj.parent is not None:
        M = (obj.parent.matrix_world @ obj.matrix_parent_inverse).inverted() @ M
    loc, quat, scale = M.decompose()
    obj.location = loc
    obj.scale = scale
    mode = obj.rotation_mode
    if mode == "QUATERNION":
        if quat.dot(obj.rotation_quaternion) < 0.0:
            quat.negate()
        obj.rotation_quaternion = quat
        path = "rotation_quaternion"
    elif mode == "AXIS_ANGLE":
        axis, angle = quat.to_axis_angle()
        obj.rotation_axis_angle = (angle, *axis)
        path = "rotation_axis_angle"
    else:
        obj.rotation_euler = quat.to_euler(mode, obj.rotation_euler)
        path = "rotation_euler"
    for p in ("location", path, "scale"):
        obj.keyframe_insert(p, frame=frame, group="Clearance")
    if obj.animation_data is not None and obj.animation_data.action is not None:
        obj[TRANSFORM_ACTION] = obj.animation_data.action.name


def free_transform_bake(obj: bpy.types.Object) -> None:
    """Undo a transform bake: remove its action, give back the previous one and the start transform."""
    if TRANSFORM_ACTION not in obj:
        return
    from mathutils import Matrix
    ad = obj.animation_data
    act = bpy.data.actions.get(obj[TRANSFORM_ACTION]) if obj[TRANSFORM_ACTION] else None
    if ad is not None:
        ad.action = None
    if act is not None:
        bpy.data.actions.remove(act)
    prev = bpy.data.actions.get(obj.get(_PREV_ACTION, "")) if obj.get(_PREV_ACTION) else None
    if prev is not None:
        obj.animation_data_create().action = prev
    restore_rest_transform(obj)
    for k in (TRANSFORM_ACTION, _PREV_ACTION, _REST_BASIS, _REST_PROPS):
        obj.pop(k, None)


DEFAULT_CACHE_FOLDER = "//clearance_cache/"
"""The Cache Folder's default. It stands for ``//clearance_cache/<blend name>/``: each .blend of a
folder gets its own caches (two files sharing one folder used to overwrite each other's .pc2)."""

OWNER_FILE = "clearance_blend.json"
"""In a cache folder: which .blend baked into it (:func:`claim_cache_dir`)."""


def cache_dir(scene: bpy.types.Scene) -> str:
    """Absolute cache folder of ``scene``: the Cache Folder, or for the default
    ``//clearance_cache/`` the sub-folder named after the .blend file (``shot.blend`` ->
    ``//clearance_cache/shot/``). SceneError, one line naming the folder and the fix, when it is
    relative to an unsaved .blend, or when it (or a folder above it) is a file."""
    folder = scene.clearance.cache_folder or DEFAULT_CACHE_FOLDER
    if folder.startswith("//") and not bpy.data.filepath:
        raise SceneError("The cache folder is relative to the .blend file (//), but the file is not saved yet: "
                         "save the .blend or choose an absolute Cache Folder.", "", "cache_folder")
    path = os.path.normpath(bpy.path.abspath(folder))
    if folder.replace("\\", "/").rstrip("/") == DEFAULT_CACHE_FOLDER.rstrip("/") and bpy.data.filepath:
        stem = os.path.splitext(os.path.basename(bpy.data.filepath))[0]
        path = os.path.join(path, bpy.path.clean_name(stem) if stem else "untitled")
    probe = path
    while probe and not os.path.lexists(probe):   # the nearest existing folder must be a folder
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if probe and os.path.lexists(probe) and not os.path.isdir(probe):
        raise SceneError(f"The Cache Folder {path} cannot be used: {probe} is a file, not a folder; choose a folder "
                         "(Physics > Clearance Bake > Settings > Cache Folder).", "", "cache_folder")
    return path


def _same_file(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def claim_cache_dir(folder: str, claim: bool = True) -> None:
    """Make ``folder`` this .blend's cache folder, or refuse when another .blend baked into it.

    The folder records the .blend that bakes into it (``clearance_blend.json``, its path relative
    to the folder, so a project moved as a whole keeps working). A bake that finds another
    .blend recorded there, and that file still exists, is refused with a SceneError naming both
    files: its .pc2 files are what that other file plays. A recorded file that no longer exists
    (renamed or deleted) gives the folder to this one. Nothing is checked for an unsaved .blend
    (it can only use an absolute folder, and has no name to record). ``claim=False`` only checks
    (Free Bake must not remove another file's caches either)."""
    import json
    blend = bpy.data.filepath
    if not blend:
        return
    marker = os.path.join(folder, OWNER_FILE)
    if os.path.isfile(marker) and not os.path.islink(marker):
        try:
            with open(marker, encoding="utf-8") as f:
                recorded = json.load(f).get("blend", "")
        except (OSError, ValueError, AttributeError):
            recorded = ""
        if isinstance(recorded, str) and recorded:
            other = os.path.normpath(os.path.join(folder, recorded))
            if not _same_file(other, blend) and os.path.isfile(other):
                raise SceneError(f"The Cache Folder {folder} holds the bake of {other}, which plays its caches from "
                                 f"there; baking {blend} into it would overwrite them. Choose another Cache Folder "
                                 f"for {os.path.basename(blend)} (the default //clearance_cache/ gives each .blend "
                                 "its own).", "", "cache_folder")
    if not claim:
        return
    os.makedirs(folder, exist_ok=True)
    data = json.dumps({"blend": os.path.relpath(blend, folder)}).encode()
    tmp = f"{marker}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, marker)


def pc2_path(folder: str, name: str) -> str:
    """The .pc2 file of the body ``name`` inside ``folder`` (stem from :func:`pc2_stem`)."""
    return os.path.join(folder, pc2_stem(name) + ".pc2")


def cache_file_names(bodies) -> dict:
    """object name -> .pc2 file name for ``bodies`` (protocol Bodies: ``name``, ``role``).

    A granular body writes the cache of its particle object ("<name>_particles").
    """
    return {b.name: pc2_file_name(b.name, b.role) for b in bodies}


def check_cache_paths(bodies) -> None:
    """Raise SceneError when two simulated objects would write the same .pc2 file.

    :func:`pc2_stem` keeps different names apart exactly; what remains is a case-insensitive
    file system (Windows, macOS), where "Cube.pc2" and "cube.pc2" are one file, and an object
    named like another's particle object ("Sand" granular beside a "Sand_particles" object).
    """
    seen: dict = {}
    for name, fname in cache_file_names(bodies).items():
        key = fname.casefold()
        if key in seen:
            other = seen[key]
            raise SceneError(f"{other!r} and {name!r} would write the same cache file {fname!r} "
                             "(file names ignore case on Windows and macOS): rename one of them",
                             name, "name")
        seen[key] = name


def blend_relative(path: str) -> str:
    """``//``-relative path when the .blend is saved (the bake survives moving the project)."""
    if bpy.data.filepath:
        try:
            return bpy.path.relpath(path)
        except ValueError:  # another drive on Windows
            return path
    return path


# --------------------------------------------------------------------------------------------
# Mesh Cache modifier


def attach_mesh_cache(obj: bpy.types.Object, path: str, frame_start: int, last: bool = True) -> bpy.types.Modifier:
    """Add (or update) the "Clearance Cache" Mesh Cache modifier reading ``path`` from ``frame_start``."""
    mod = obj.modifiers.get(CACHE_MODIFIER)
    if mod is None or mod.type != "MESH_CACHE":
        mod = obj.modifiers.new(CACHE_MODIFIER, "MESH_CACHE")
    mod.cache_format = "PC2"
    mod.filepath = blend_relative(path)
    mod.deform_mode = "OVERWRITE"
    mod.time_mode = "FRAME"
    mod.play_mode = "SCENE"
    mod.frame_start = float(frame_start)
    mod.frame_scale = 1.0
    mod.interpolation = "LINEAR"
    mod.forward_axis = "POS_Y"
    mod.up_axis = "POS_Z"
    if isinstance(mod.flip_axis, set):   # Blender 4.2-4.x: an enum flag set; 5.0: one boolean per axis
        mod.flip_axis = set()
    else:
        mod.flip_axis = (False, False, False)
    if last:
        move_to_end(obj, mod)
        if hasattr(mod, "use_pin_to_last"):
            mod.use_pin_to_last = True
    return mod


def move_to_end(obj: bpy.types.Object, mod: bpy.types.Modifier) -> None:
    """Move ``mod`` to the bottom of the stack (no operator, works in background mode)."""
    idx = list(obj.modifiers).index(mod)
    last = len(obj.modifiers) - 1
    if idx != last:
        obj.modifiers.move(idx, last)


# --------------------------------------------------------------------------------------------
# Shape keys


def _key_name(frame: int) -> str:
    return f"{KEY_PREFIX}{frame:05d}"


def _channelbag(key: bpy.types.Key):
    """F-curve container of the shape-key datablock's action: the slot channelbag in Blender
    4.4+ (slotted actions, Action.fcurves removed in 5.0), the action itself before."""
    ad = key.animation_data or key.animation_data_create()
    if ad.action is None:
        ad.action = bpy.data.actions.new(f"{key.name}Action")
    action = ad.action
    try:
        from bpy_extras.anim_utils import action_ensure_channelbag_for_slot
    except ImportError:
        return action  # Blender 4.2/4.3: fcurves live on the action
    if ad.action_slot is None:
        slot = action.slots.new(id_type="KEY", name=key.name)
        ad.action_slot = slot
    return action_ensure_channelbag_for_slot(action, ad.action_slot)


def disable_baked_modifiers(obj: bpy.types.Object) -> None:
    """Switch off the modifiers whose effect the shape keys now hold; remembered for Free Bake."""
    names = [m.name for m in obj.modifiers if (m.show_viewport or m.show_render) and m.name != CACHE_MODIFIER]
    if _DISABLED in obj:
        names = sorted(set(names) | set(obj[_DISABLED]))
    for n in names:
        m = obj.modifiers.get(n)
        if m is not None:
            m.show_viewport = m.show_render = False
    obj[_DISABLED] = names


def write_shape_key(obj: bpy.types.Object, frame: int, local: np.ndarray) -> None:
    """Store ``local`` (n, 3) as the shape key of ``frame``, keyed 0 / 1 / 0 around it."""
    me = obj.data
    n = len(me.vertices)
    if local.shape != (n, 3):
        raise SceneError(f"{obj.name}: the solver returned {local.shape[0]} positions but the mesh has {n} vertices; "
                         f"shape-key output needs modifiers that keep the vertex count (use Point Cache output)",
                         obj.name, "positions")
    if me.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
        obj[_MADE_BASIS] = True
    name = _key_name(frame)
    kb = me.shape_keys.key_blocks.get(name) or obj.shape_key_add(name=name, from_mix=False)
    kb.data.foreach_set("co", np.ascontiguousarray(local, np.float32).ravel())
    kb.value = 0.0
    bag = _channelbag(me.shape_keys)
    path = f'key_blocks["{name}"].value'
    fc = bag.fcurves.find(path)
    if fc is not None:
        bag.fcurves.remove(fc)
    fc = bag.fcurves.new(path)
    fc.keyframe_points.add(3)
    fc.keyframe_points.foreach_set("co", np.array([frame - 1, 0.0, frame, 1.0, frame + 1, 0.0], np.float32))
    fc.keyframe_points.foreach_set("interpolation", np.full(3, bpy.types.Keyframe.bl_rna.properties[
        "interpolation"].enum_items["LINEAR"].value, np.int32))
    fc.update()
    me.update()


def remove_shape_keys(obj: bpy.types.Object) -> None:
    """Remove the bake's keys, their F-curves, and the Basis when the bake added it."""
    key = obj.data.shape_keys if obj.type == "MESH" else None
    if key is None:
        return
    names = [kb.name for kb in key.key_blocks if kb.name.startswith(KEY_PREFIX)]
    if key.animation_data and key.animation_data.action:
        bag = _channelbag(key)
        for fc in [fc for fc in bag.fcurves if fc.data_path.startswith(f'key_blocks["{KEY_PREFIX}')]:
            bag.fcurves.remove(fc)
    for n in names:
        obj.shape_key_remove(key.key_blocks[n])
    if obj.get(_MADE_BASIS) and obj.data.shape_keys and len(obj.data.shape_keys.key_blocks) == 1:
        obj.shape_key_remove(obj.data.shape_keys.key_blocks[0])
    obj.pop(_MADE_BASIS, None)


# --------------------------------------------------------------------------------------------
# Particles (granular bodies)


def particle_node_group() -> bpy.types.NodeTree:
    """Geometry Nodes: vertices -> points with the "radius" attribute as radius (renders as spheres),
    then the "Material" input set on the points (Mesh to Points drops the mesh's materials)."""
    ng = bpy.data.node_groups.get(PARTICLE_GROUP)
    if ng is not None:
        return ng
    ng = bpy.data.node_groups.new(PARTICLE_GROUP, "GeometryNodeTree")
    ng.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    ng.interface.new_socket(PARTICLE_MATERIAL_INPUT, in_out="INPUT", socket_type="NodeSocketMaterial")
    ng.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    gin, gout = ng.nodes.new("NodeGroupInput"), ng.nodes.new("NodeGroupOutput")
    to_points = ng.nodes.new("GeometryNodeMeshToPoints")
    radius = ng.nodes.new("GeometryNodeInputNamedAttribute")
    radius.data_type = "FLOAT"
    radius.inputs["Name"].default_value = "radius"
    set_mat = ng.nodes.new("GeometryNodeSetMaterial")
    ng.links.new(gin.outputs[0], to_points.inputs["Mesh"])
    ng.links.new(radius.outputs["Attribute"], to_points.inputs["Radius"])
    ng.links.new(to_points.outputs["Points"], set_mat.inputs["Geometry"])
    ng.links.new(gin.outputs[PARTICLE_MATERIAL_INPUT], set_mat.inputs["Material"])
    ng.links.new(set_mat.outputs["Geometry"], gout.inputs[0])
    gin.location, radius.location, to_points.location = (-400, 0), (-400, -150), (-150, 0)
    set_mat.location, gout.location = (50, 0), (250, 0)
    return ng


def set_particle_material(particles: bpy.types.Object, material: Optional[bpy.types.Material]) -> None:
    """Render the points with ``material`` (the emitter's): the Geometry Nodes modifier's input."""
    mod = particles.modifiers.get(PARTICLE_MODIFIER)
    item = mod.node_group.interface.items_tree.get(PARTICLE_MATERIAL_INPUT) if mod and mod.node_group else None
    if item is not None:  # a group from an older add-on version has no such input
        mod[item.identifier] = material


def ensure_particle_object(source: bpy.types.Object, positions: np.ndarray, radius: float) -> bpy.types.Object:
    """The "<name>_particles" object (world = local) with ``positions`` as its rest vertices."""
    name = particle_object_name(source.name)
    ob = bpy.data.objects.get(name)
    n = positions.shape[0]
    if ob is not None and (ob.type != "MESH" or len(ob.data.vertices) != n):
        remove_particle_object(source.name)
        ob = None
    if ob is None:
        me = bpy.data.meshes.new(name)
        me.vertices.add(n)
        ob = bpy.data.objects.new(name, me)
        for coll in source.users_collection:
            coll.objects.link(ob)
        attr = me.attributes.new("radius", "FLOAT", "POINT")
        attr.data.foreach_set("value", np.full(n, radius, np.float32))
        gn = ob.modifiers.new(PARTICLE_MODIFIER, "NODES")
        gn.node_group = particle_node_group()
    set_particle_material(ob, source.active_material)
    ob.data.vertices.foreach_set("co", np.ascontiguousarray(positions, np.float32).ravel())
    ob.data.update()
    if _HIDDEN not in source:  # the emitter mesh is replaced by its particles in renders
        source[_HIDDEN] = {"hide_render": int(source.hide_render), "display_type": source.display_type}
        source.hide_render = True
        source.display_type = "WIRE"
    return ob


def remove_particle_object(source_name: str) -> None:
    ob = bpy.data.objects.get(particle_object_name(source_name))
    if ob is not None:
        me = ob.data
        bpy.data.objects.remove(ob)
        if me is not None and me.users == 0:
            bpy.data.meshes.remove(me)


# --------------------------------------------------------------------------------------------
# One body's cache


class BodyCache:
    """Receives one body's frames (world space) and writes them to Blender as they arrive.

    ``mode`` is "PC2" or "SHAPE_KEYS"; granular bodies always use PC2 on their particle object.
    ``resume`` keeps the frames already in an existing cache file.
    """

    def __init__(self, obj: bpy.types.Object, role: str, matrices: np.ndarray, folder: str,
                 frame_start: int, mode: str = "PC2", resume: bool = False, radius: float = 0.01,
                 rest: Optional[np.ndarray] = None, prescribed: bool = False):
        self.obj = obj
        self.name = obj.name
        self.role = role
        self.particles = role == "granular"
        self.mode = "PC2" if self.particles else mode
        if role == "stiff" and getattr(getattr(obj, "clearance", None), "stiff_output", "PC2") == "TRANSFORM":
            # keyed object transforms; a keyframed (prescribed) stiff body already plays its own motion
            self.mode = "NONE" if prescribed else "TRANSFORM"
        self.rest = None if rest is None else np.asarray(rest, np.float64)  # world positions at the start
        m = np.asarray(matrices, np.float64).reshape(-1, 4, 4)
        self.matrices = np.eye(4)[None] if self.particles else m  # (F, 4, 4) world matrix per frame
        self.frame_start = int(frame_start)
        self.path = pc2_path(folder, self.name if not self.particles else particle_object_name(self.name))
        self.radius = float(radius)
        self.resume = resume
        self.writer: Optional[PC2Writer] = None
        self.frames_done = 0            # samples in the cache (start frame included)
        self.target: Optional[bpy.types.Object] = None if self.particles else obj

    def _open(self, n_points: int) -> None:
        """Create the writer; on resume re-append the frames already on disk (same point count)."""
        kept = None
        if self.resume and os.path.isfile(self.path):
            try:
                frames, start, _ = read_pc2(self.path)
                if frames.shape[1] == n_points and int(round(start)) == self.frame_start:
                    kept = frames
            except ValueError:
                kept = None
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.writer = PC2Writer(self.path, n_points, start_frame=float(self.frame_start))
        for f in (kept if kept is not None else ()):
            self.writer.append(f)
        self.frames_done = self.writer.n_samples

    def _overwrite(self, index: int, local: np.ndarray) -> None:
        """Replace sample ``index`` in place (a frame the server sends again, e.g. after resume)."""
        n = self.writer.n_points
        with open(self.path, "r+b") as f:
            f.seek(HEADER_SIZE + index * n * 12)
            f.write(np.ascontiguousarray(local, "<f4").tobytes())

    def write_initial(self, frame_start: int, world: np.ndarray) -> None:
        """Store the start frame unless a resumed cache already holds it."""
        if self.mode in ("TRANSFORM", "NONE"):
            self.write(frame_start, world)
            return
        if self.mode == "PC2" and self.writer is None:
            self._open(world.shape[0])
        if self.frames_done == 0 or self.mode == "SHAPE_KEYS":
            self.write(frame_start, world)

    def write(self, frame: int, world: np.ndarray) -> None:
        """Store the body's world positions (n, 3) of Blender frame ``frame``."""
        index = frame - self.frame_start
        if index < 0:
            raise ValueError(f"{self.name}: frame {frame} is before the bake's start {self.frame_start}")
        if self.mode == "NONE":
            return
        if self.mode == "TRANSFORM":
            if self.rest is None and index == 0:
                self.rest = np.asarray(world, np.float64).copy()
            begin_transform_bake(self.obj)
            M = self.matrices[0] if index == 0 else rigid_world_matrix(self.rest, world, self.matrices[0])
            key_transform(self.obj, frame, M)
            self.frames_done = max(self.frames_done, index + 1)
            return
        local = to_local(world, self.matrices[min(index, len(self.matrices) - 1)])
        if self.mode == "SHAPE_KEYS":
            if self.frames_done == 0:
                disable_baked_modifiers(self.obj)
            write_shape_key(self.obj, frame, local)
            self.frames_done = max(self.frames_done, index + 1)
            return
        if self.writer is None:
            if self.particles:
                self.target = ensure_particle_object(self.obj, local, self.radius)
            self._open(local.shape[0])
        if local.shape[0] != self.writer.n_points:
            raise SceneError(f"{self.name}: frame {frame} has {local.shape[0]} points, the cache {self.writer.n_points}",
                             self.name, "positions")
        if index < self.frames_done:
            self._overwrite(index, local)
        else:
            while self.frames_done < index:  # particles first seen after the start: held still before
                self.writer.append(local)
                self.frames_done += 1
            self.writer.append(local)
            self.frames_done += 1
        if self.target.modifiers.get(CACHE_MODIFIER) is None:
            mod = attach_mesh_cache(self.target, self.path, self.frame_start, last=not self.particles)
            if self.particles:  # deform the vertices before Mesh to Points turns them into points
                self.target.modifiers.move(list(self.target.modifiers).index(mod), 0)

    def load(self, frames: np.ndarray) -> None:
        """Set the body up from a finished bake's cache file ``self.path`` (Load Farm Bake), exactly as a Bake
        that wrote it leaves it: ``frames`` (F, n, 3) float32 are its samples (object space; particles: world),
        sample k being frame ``frame_start + k``. PC2: the Mesh Cache modifier reads the file as it is (nothing
        is written); particles: the particle object, then its modifier; shape keys: one key per frame from the
        samples; Object Transform: the samples back in world space through this frame's matrix, keyed as a Bake
        keys them (the same rigid fit, from float32 object-space positions instead of float32 world ones)."""
        if self.mode == "NONE":
            return
        if self.mode == "TRANSFORM":
            for k, local in enumerate(frames):
                m = self.matrices[min(k, len(self.matrices) - 1)]
                self.write(self.frame_start + k, np.asarray(local, np.float64) @ m[:3, :3].T + m[:3, 3])
            return
        if self.mode == "SHAPE_KEYS":
            disable_baked_modifiers(self.obj)
            for k, local in enumerate(frames):
                write_shape_key(self.obj, self.frame_start + k, local)
            self.frames_done = len(frames)
            return
        if self.particles:
            self.target = ensure_particle_object(self.obj, frames[0], self.radius)
        mod = attach_mesh_cache(self.target, self.path, self.frame_start, last=not self.particles)
        if self.particles:  # deform the vertices before Mesh to Points turns them into points
            self.target.modifiers.move(list(self.target.modifiers).index(mod), 0)
        self.frames_done = len(frames)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


# --------------------------------------------------------------------------------------------
# Free bake


def free_object(obj: bpy.types.Object, folder: Optional[str]) -> None:
    """Remove what a bake added to ``obj``: cache modifier, shape keys, particle object, files."""
    mod = obj.modifiers.get(CACHE_MODIFIER)
    old_file = None
    if mod is not None:
        # A bake by an older add-on may have named the file differently (before pc2_stem):
        # remove the file the modifier reads too, but only a .pc2 inside the cache folder.
        old_file = os.path.normpath(bpy.path.abspath(mod.filepath)) if mod.filepath else None
        obj.modifiers.remove(mod)
    free_transform_bake(obj)
    if obj.type == "MESH":
        remove_shape_keys(obj)
    for n in obj.get(_DISABLED, []):
        m = obj.modifiers.get(n)
        if m is not None:
            m.show_viewport = m.show_render = True
    obj.pop(_DISABLED, None)
    remove_particle_object(obj.name)
    if _HIDDEN in obj:
        saved = obj[_HIDDEN]
        obj.hide_render, obj.display_type = bool(saved["hide_render"]), saved["display_type"]
        del obj[_HIDDEN]
    if folder:
        own = [pc2_path(folder, obj.name), pc2_path(folder, particle_object_name(obj.name))]
        if old_file and old_file.endswith(".pc2") and os.path.dirname(old_file) == os.path.normpath(folder):
            own.append(old_file)
        for p in own:
            if os.path.isfile(p):
                os.remove(p)


def free_server_cache(folder: str) -> list:
    """Remove the server's frame/state cache in ``folder``/server (so the next bake starts from scratch),
    and only the files the server writes there (protocol.cache_layout): anything else a user put
    in it stays, and so do the folders that still hold something. Symbolic links are never
    followed nor removed. Returns the paths it left (empty when the whole cache is gone)."""
    path = os.path.join(folder, SERVER_DIR)
    if os.path.islink(path) or not os.path.isdir(path):
        return []
    for sub in (FRAMES_DIR, STATE_DIR, ""):
        d = os.path.join(path, sub) if sub else path
        if sub and (os.path.islink(d) or not os.path.isdir(d)):
            continue
        with os.scandir(d) as it:
            for e in list(it):
                if is_own_file(sub, e.name) and e.is_file(follow_symlinks=False):
                    try:
                        os.remove(e.path)
                    except FileNotFoundError:
                        pass
        if sub:
            _remove_if_empty(d)
    _remove_if_empty(path)
    left = []
    for dirpath, dirs, files in os.walk(path):
        left += [os.path.join(dirpath, n) for n in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]]
    return sorted(left)


def _remove_if_empty(folder: str) -> None:
    try:
        os.rmdir(folder)
    except OSError:   # not empty (a user's file), or already gone
        pass
