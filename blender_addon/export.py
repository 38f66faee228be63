"""Blender -> protocol.scene.Scene: the evaluated meshes of every object with a Clearance role.

Geometry is read from the dependency graph (modifiers, shape keys and parenting applied) and
moved to world space with one matrix product; every array is filled by ``foreach_get`` into
numpy (no Python loop over vertices). Colliders and following pins are sampled at every frame
of the bake range (``frame_set`` then a fresh evaluation), as the contract asks, and so is
every object's world matrix (write-back stores positions in the object's space of each frame; the
matrices of the simulated objects travel in the scene as ``Body.world_matrices``, so that
``clearance-server bake`` of an exported .clrscene writes the same object-space .pc2 files).
With the pass-through backend ("none") every body sends its whole per-frame motion, so the
bake reproduces the input animation exactly. The scene's Wind, Force, Vortex and Turbulence field objects (when
Scene.clearance.use_force_fields and the IPC backend) are sampled at every frame too: strength, flow
and world matrix, so keyframed fields are followed; each body sends its Field Weights.

Vertex-group weights do not survive to the evaluated mesh's Python API, so pins are read
through a temporary Geometry Nodes modifier that copies the group into a point attribute:
this works whatever modifiers precede it and stays loop-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import bpy
import numpy as np

from protocol.collision_shapes import box_shape, enclosure_warning
from protocol.rigid import polar_rotation
from protocol.scene import Body, ForceField, Material, Scene, SceneError, Settings

from .mesh_checks import volume_problem, zero_scale_problem
from .writeback import (CACHE_MODIFIER, DISABLED_PROP, KEY_PREFIX, TRANSFORM_ACTION, TRANSFORM_PROPS,
                        restore_rest_transform)

PIN_ATTR = "clearance_pin_weight"
ATTACH_ATTR = "clearance_attach_weight"
ATTACHING_ROLES = ("SOLID", "CLOTH", "ROD")
MAP_GROUPS = (("stiffness_group", "clearance_stiffness_weight"), ("bending_group", "clearance_bending_weight"),
              ("mass_group", "clearance_mass_weight"), ("shrink_group", "clearance_shrink_weight"))
"""Cloth vertex-group maps: the object setting naming the group and the point attribute it is copied into."""
MAP_ATTRS = tuple(a for _, a in MAP_GROUPS)
_PIN_MODIFIER = "Clearance Pin Weights (temporary)"
VOLUME_ROLES = ("solid", "stiff", "granular")


@dataclass
class MeshArrays:
    """World-space evaluated geometry of one object at one frame."""

    vertices: np.ndarray                  # (n, 3) float64, metres, world space
    triangles: np.ndarray                 # (m, 3) int32
    edges: np.ndarray                     # (k, 2) int32
    pin_weights: Optional[np.ndarray] = None  # (n,) float32 or None
    group_weights: dict = field(default_factory=dict)  # map attribute -> (n,) float32 (cloth vertex-group maps)


@dataclass
class ExportResult:
    """The scene to submit plus what write-back needs to map results onto Blender objects."""

    scene: Scene
    objects: dict = field(default_factory=dict)        # body name -> bpy Object
    matrices: dict = field(default_factory=dict)  # body name -> (F, 4, 4) float64 world matrix per frame
    warnings: list = field(default_factory=list)  # sentences naming an object (a collision shape not covering it)


def role_objects(scene: bpy.types.Scene) -> list:
    """Objects of ``scene`` with a Clearance role, sorted by name (stable body order)."""
    objs = [o for o in scene.objects if getattr(o, "clearance", None) is not None and o.clearance.role != "NONE"]
    return sorted(objs, key=lambda o: o.name)


def frame_range(scene: bpy.types.Scene) -> tuple:
    """(frame_start, frame_end) of the bake: the scene's range unless the settings override it."""
    s = scene.clearance
    if s.use_scene_range:
        return int(scene.frame_start), int(scene.frame_end)
    return int(s.frame_start), int(s.frame_end)


def world_matrix(obj_eval) -> np.ndarray:
    """The object's world matrix as a (4, 4) float64 array."""
    return np.array(obj_eval.matrix_world, dtype=np.float64)


def canonical_order(tris: np.ndarray, edges: np.ndarray) -> tuple:
    """Triangles and edges in an order that depends only on the mesh, not on how Blender listed it:
    each triangle rotated to start at its smallest vertex index (orientation kept), each edge as
    (low, high), then both sorted. Blender's face order is not stable: bmesh.ops.create_uvsphere lists
    the same faces in a different order on every call, and the solver's result depends on the order
    (contact pairs, summation order), so three demo bakes of one scene script gave three different
    drapes (issue 23). In canonical order the same mesh exports the same scene, bakes the same bytes
    and keeps its scene hash (Resume)."""
    t = np.asarray(tris, np.int32).reshape(-1, 3)
    if len(t):
        r = np.argmin(t, axis=1)[:, None]
        t = np.take_along_axis(t, (r + np.arange(3)) % 3, axis=1)
        t = t[np.lexsort((t[:, 2], t[:, 1], t[:, 0]))]
    e = np.sort(np.asarray(edges, np.int32).reshape(-1, 2), axis=1)
    if len(e):
        e = e[np.lexsort((e[:, 1], e[:, 0]))]
    return np.ascontiguousarray(t, np.int32), np.ascontiguousarray(e, np.int32)


def read_mesh(obj: bpy.types.Object, depsgraph, with_pins: bool = False) -> MeshArrays:
    """Evaluated mesh of ``obj`` in world space (float64 vertices, int32 triangles and edges)."""
    ob_eval = obj.evaluated_get(depsgraph)
    me = ob_eval.to_mesh()
    if me is None:
        raise SceneError(f"{obj.name}: a {obj.type.lower()} object has no mesh; give the role to a mesh, "
                         f"curve or text object", obj.name, "vertices")
    try:
        n = len(me.vertices)
        co = np.empty(n * 3, dtype=np.float32)
        me.vertices.foreach_get("co", co)
        m = world_matrix(ob_eval)
        verts = co.reshape(n, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]
        me.calc_loop_triangles()
        tris = np.empty(len(me.loop_triangles) * 3, dtype=np.int32)
        me.loop_triangles.foreach_get("vertices", tris)
        edges = np.empty(len(me.edges) * 2, dtype=np.int32)
        me.edges.foreach_get("vertices", edges)
        weights = None
        if with_pins and PIN_ATTR in me.attributes:
            weights = np.empty(n, dtype=np.float32)
            me.attributes[PIN_ATTR].data.foreach_get("value", weights)
        groups = {}
        for attr in MAP_ATTRS + (ATTACH_ATTR,) if with_pins else ():
            if attr in me.attributes:
                groups[attr] = np.empty(n, dtype=np.float32)
                me.attributes[attr].data.foreach_get("value", groups[attr])
        tris, edges = canonical_order(tris.reshape(-1, 3), edges.reshape(-1, 2))
        return MeshArrays(np.ascontiguousarray(verts), tris, edges, weights, groups)
    finally:
        ob_eval.to_mesh_clear()


def _pin_node_group(pairs: list) -> bpy.types.NodeTree:
    """A node group storing each vertex group of ``pairs`` ((group name, attribute name), ...) as a float
    point attribute (the pin group as PIN_ATTR, the cloth maps as MAP_ATTRS)."""
    ng = bpy.data.node_groups.new(".clearance_pins", "GeometryNodeTree")
    ng.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    ng.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    gin = ng.nodes.new("NodeGroupInput")
    gout = ng.nodes.new("NodeGroupOutput")
    geo = gin.outputs[0]
    for group_name, attr in pairs:
        named = ng.nodes.new("GeometryNodeInputNamedAttribute")
        named.data_type = "FLOAT"
        named.inputs["Name"].default_value = group_name
        store = ng.nodes.new("GeometryNodeStoreNamedAttribute")
        store.data_type = "FLOAT"
        store.domain = "POINT"
        store.inputs["Name"].default_value = attr
        ng.links.new(geo, store.inputs["Geometry"])
        ng.links.new(named.outputs["Attribute"], store.inputs["Value"])
        geo = store.outputs["Geometry"]
    ng.links.new(geo, gout.inputs[0])
    return ng


def _probe_pairs(o) -> list:
    """(vertex group, attribute) pairs to copy for object ``o``: its pin group and, for cloth, its map groups."""
    c = o.clearance
    pairs = [(c.pin_group, PIN_ATTR)] if c.pin_group else []
    if c.role in ATTACHING_ROLES and c.attach_to is not None and c.attach_group:
        pairs.append((c.attach_group, ATTACH_ATTR))
    if c.role == "CLOTH":
        pairs += [(getattr(c, prop), attr) for prop, attr in MAP_GROUPS if getattr(c, prop)]
    return pairs


class _PinProbes:
    """Context manager adding the temporary pin-weight modifier to objects with a pin group."""

    def __init__(self, objects: list):
        self.objects = [o for o in objects if _probe_pairs(o) and o.type == "MESH"]
        self.added = []

    def __enter__(self) -> "_PinProbes":
        for o in self.objects:
            for group, attr in _probe_pairs(o):
                if group not in o.vertex_groups:
                    what = {PIN_ATTR: "pin group", ATTACH_ATTR: "attach group"}.get(attr, "vertex group")
                    raise SceneError(f"{o.name}: {what} '{group}' does not exist; pick one of the "
                                     f"object's vertex groups or clear the field", o.name,
                                     {PIN_ATTR: "pin_indices", ATTACH_ATTR: "attach_indices"}.get(attr, "vertex_scales"))
            mod = o.modifiers.new(_PIN_MODIFIER, "NODES")
            mod.node_group = _pin_node_group(_probe_pairs(o))
            mod.show_in_editmode = False
            self.added.append((o, mod))
        return self

    def __exit__(self, *exc) -> None:
        for o, mod in self.added:
            ng = mod.node_group
            o.modifiers.remove(mod)
            if ng is not None:
                bpy.data.node_groups.remove(ng)
        self.added.clear()


class _InputsOnly:
    """Context manager showing the objects' inputs, not a previous bake: the Clearance Cache
    modifier and the bake's shape keys are muted, modifiers switched off by shape-key output
    are switched back on (so a re-bake or a resume exports exactly what the first bake did)."""

    def __init__(self, objects: list):
        self.objects = objects
        self.undo = []

    def __enter__(self) -> "_InputsOnly":
        for o in self.objects:
            if TRANSFORM_ACTION in o and o.animation_data is not None and o.animation_data.action is not None:
                # a stiff object's previous transform bake: export its start transform (exactly: the same scene
                # and hash as before that bake), not those keys
                act = o.animation_data.action
                for p in TRANSFORM_PROPS:
                    self.undo.append((o, p, tuple(getattr(o, p))))
                o.animation_data.action = None
                restore_rest_transform(o)
                self.undo.append((o.animation_data, "action", act))
            mod = o.modifiers.get(CACHE_MODIFIER)
            if mod is not None and mod.show_viewport:
                mod.show_viewport = False
                self.undo.append((mod, "show_viewport", True))
            for name in o.get(DISABLED_PROP, []):
                m = o.modifiers.get(name)
                if m is not None and not m.show_viewport:
                    m.show_viewport = True
                    self.undo.append((m, "show_viewport", False))
            keys = o.data.shape_keys if o.type == "MESH" else None
            for kb in keys.key_blocks if keys else ():
                if kb.name.startswith(KEY_PREFIX) and not kb.mute:
                    kb.mute = True
                    self.undo.append((kb, "mute", False))
        return self

    def __exit__(self, *exc) -> None:
        for owner, attr, value in reversed(self.undo):
            setattr(owner, attr, value)
        self.undo.clear()


def material_of(obj: bpy.types.Object) -> Material:
    """protocol Material from the object's settings (SI units)."""
    c = obj.clearance
    return Material(density=c.density, youngs_modulus=c.youngs_modulus, poisson_ratio=c.poisson_ratio,
                    model=c.model, friction=c.friction, thickness=c.thickness,
                    bending_stiffness=c.bending_stiffness, damping=c.damping, mpm_material=c.mpm_material,
                    friction_angle=c.friction_angle, particle_spacing=c.particle_spacing,
                    viscosity=c.viscosity, yield_stress=c.yield_stress, grain_size=c.grain_size,
                    element=c.element, air_drag=c.air_drag, pressure=c.pressure, sewing=c.sewing)


FIELD_KINDS = {"WIND": "wind", "FORCE": "force", "VORTEX": "vortex", "TURBULENCE": "turbulence"}
"""Blender field types sent to the solver (protocol FIELD_KINDS); other types are ignored."""
FIELD_SHAPES = {"POINT": "point", "PLANE": "plane", "LINE": "line"}


def field_objects(scene: bpy.types.Scene) -> list:
    """The scene's Wind, Force, Vortex and Turbulence field objects that are enabled in the viewport, sorted by name."""
    objs = [o for o in scene.objects if o.field is not None and o.field.type in FIELD_KINDS
            and not o.hide_viewport and o.visible_get()]
    for o in objs:
        if o.field.shape not in FIELD_SHAPES:
            raise SceneError(f"{o.name}: force field shape {o.field.shape.title()} is not supported; set the field's "
                             "Shape to Point, Line or Plane", o.name, "shape")
    return sorted(objs, key=lambda o: o.name)


def _field_sample(o, depsgraph) -> tuple:
    """(strength, flow, world matrix (4, 4)) of field object ``o`` at the current frame."""
    fd = o.field
    return float(fd.strength), float(fd.flow), world_matrix(o.evaluated_get(depsgraph))


def vertex_scales(o, mesh: MeshArrays) -> Optional[np.ndarray]:
    """(n, 4) per-vertex cloth maps (protocol VERTEX_SCALES) from the object's map groups: stiffness, bending
    and mass scale = 1 + w (factor - 1), rest size = 1 - w shrink (w = 1 everywhere for shrink without a group);
    None when every scale is 1."""
    c = o.clearance
    n = len(mesh.vertices)
    w = {attr: mesh.group_weights.get(attr, np.zeros(n, np.float32)).astype(np.float64) for _, attr in MAP_GROUPS}
    out = np.ones((n, 4))
    for col, (prop, attr), factor in zip(range(3), MAP_GROUPS, (c.stiffness_group_factor, c.bending_group_factor,
                                                                c.mass_group_factor)):
        if getattr(c, prop):
            out[:, col] = 1.0 + w[attr] * (float(factor) - 1.0)
    ws = w[MAP_GROUPS[3][1]] if c.shrink_group else np.ones(n)
    out[:, 3] = 1.0 - ws * float(c.shrink)
    return None if np.all(out == 1.0) else out


def collision_shape(o, mesh: MeshArrays, matrix: np.ndarray, depsgraph) -> tuple:
    """(collision_shape, shape_vertices, shape_triangles) of a stiff object (protocol 1.6): the Box in the
    object's own axes (as Bullet's Box), the Proxy Object's evaluated mesh in world space; Convex Hull and
    Sphere are built by the server from the vertices (None arrays). Call at the start frame."""
    kind = o.clearance.collision_shape.lower()
    if kind == "box":
        return (kind,) + box_shape(mesh.vertices, polar_rotation(matrix[:3, :3]))
    if kind == "proxy":
        p = o.clearance.collision_proxy
        if p is None:
            raise SceneError(f"{o.name}: Collision Shape is Proxy Object but no Proxy Object is set; pick a closed "
                             f"mesh (e.g. a decimated copy) in the object's Clearance panel", o.name, "shape_vertices")
        if p.name == o.name:
            raise SceneError(f"{o.name}: an object cannot be its own Proxy Object; use Collision Shape Mesh",
                             o.name, "shape_vertices")
        pm = read_mesh(p, depsgraph)
        msg = volume_problem(f"{o.name} (Proxy Object {p.name})", "stiff", pm.vertices, pm.triangles)
        if msg:
            raise SceneError(msg, o.name, "shape_triangles")
        return kind, pm.vertices, pm.triangles
    return kind, None, None


def attachment_of(o, mesh: MeshArrays) -> dict:
    """Body fields of object ``o``'s attachment: ``attach_to`` (the Attach To object's name) and
    ``attach_indices`` (the Attach Group's vertices of weight > 0.5); empty without one."""
    c = o.clearance
    if c.role not in ATTACHING_ROLES or c.attach_to is None:
        return {}
    w = mesh.group_weights.get(ATTACH_ATTR)
    idx = np.nonzero(w > 0.5)[0].astype(np.int32) if w is not None else np.zeros(0, np.int32)
    return {"attach_to": c.attach_to.name, "attach_indices": idx}


def keyed_shrink(o, mesh: MeshArrays, samples: Optional[np.ndarray]) -> dict:
    """Body fields of a cloth's keyframed Shrink: ``shrink_samples`` (F,) and ``shrink_weights`` (the Shrink
    Group's weights, None without a group); empty when Shrink is not keyed."""
    if samples is None:
        return {}
    c = o.clearance
    w = mesh.group_weights.get(MAP_GROUPS[3][1]) if c.shrink_group else None
    return {"shrink_samples": samples,
            "shrink_weights": None if w is None else np.clip(w.astype(np.float64), 0.0, 1.0)}


def _keyed(samples: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """Per-frame samples of a keyframable value, or None when it never changes (the material's value holds)."""
    if samples is None or np.all(samples == samples[0]):
        return None
    return np.ascontiguousarray(samples, np.float64)


def _force_field(o, strength: np.ndarray, flow: np.ndarray, matrix: np.ndarray) -> ForceField:
    fd = o.field
    kind = FIELD_KINDS[fd.type]
    return ForceField(name=o.name, kind=kind, strength=strength, matrix=matrix,
                      flow=flow if kind == "force" else np.zeros(0), shape=FIELD_SHAPES[fd.shape],
                      falloff_power=float(fd.falloff_power), use_min=bool(fd.use_min_distance),
                      distance_min=float(fd.distance_min), use_max=bool(fd.use_max_distance),
                      distance_max=float(fd.distance_max), size=max(float(fd.size), 1e-6), seed=int(fd.seed))


def settings_of(scene: bpy.types.Scene, roles: list, bounds: Optional[tuple] = None) -> Settings:
    """protocol Settings from ``Scene.clearance``; backend AUTO picks mpm for granular scenes.
    ``mpm_domain`` AUTO sends "auto" (the server sizes an open domain around bodies and colliders),
    BOX sends "box" with the artist's Domain Min / Max as walls.
    ``solver_quality`` (FAST / ACCURATE) is sent as "fast" / "accurate" whatever the backend
    (only IPC uses it), so the scene hash, and with it Resume, follows the artist's choice; ``integrator``
    (IMPLICIT_EULER / BDF2) likewise as "implicit_euler" / "bdf2"."""
    s = scene.clearance
    start, end = frame_range(scene)
    backend = s.backend if s.backend != "AUTO" else ("mpm" if "granular" in roles else "ipc")
    gravity = tuple(scene.gravity) if (s.use_scene_gravity and scene.use_gravity) else (
        (0.0, 0.0, 0.0) if s.use_scene_gravity else tuple(s.gravity))
    kw = dict(mpm_domain=s.mpm_domain.lower())
    if s.mpm_domain == "BOX":   # the artist's walled box
        kw.update(domain_min=tuple(float(x) for x in s.domain_min), domain_max=tuple(float(x) for x in s.domain_max))
    elif bounds is not None:    # not used by the automatic domain (the server sizes it); kept informative
        kw.update(domain_min=tuple(float(x) for x in bounds[0]), domain_max=tuple(float(x) for x in bounds[1]))
    return Settings(frame_start=start, frame_end=end, fps=scene.render.fps / scene.render.fps_base,
                    substeps=s.substeps, gravity=tuple(float(g) for g in gravity), contact_gap=s.contact_gap,
                    friction=s.friction, newton_tol=s.newton_tol, max_newton_iterations=s.max_newton_iterations,
                    backend=backend, solver_quality=s.solver_quality.lower(), integrator=s.integrator.lower(),
                    **kw)


def _domain(all_points: list) -> tuple:
    """MPM domain box: the bounding box of every exported point, padded by a quarter of its size."""
    pts = np.concatenate([p.reshape(-1, 3) for p in all_points])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = max(0.25 * float((hi - lo).max()), 0.1)
    return lo - pad, hi + pad


def export_scene(context: bpy.types.Context, scene: Optional[bpy.types.Scene] = None) -> ExportResult:
    """Build and validate the Scene for ``scene`` (default: the context's). Raises SceneError.

    The current frame is restored afterwards; the scene is left unmodified.
    """
    scene = scene or context.scene
    objs = role_objects(scene)
    if not objs:
        raise SceneError("No object has a Clearance role: select a mesh, open Properties > Physics > "
                         "Clearance and choose a role (Solid, Cloth, ... or Collider).", "", "bodies")
    start, end = frame_range(scene)
    if end <= start:
        raise SceneError(f"The bake range {start}..{end} is empty: the end frame must be after the start frame.",
                         "", "frame_end")
    frames = range(start, end + 1)
    original_frame, original_sub = scene.frame_current, scene.frame_subframe
    roles = {o.name: o.clearance.role.lower() for o in objs}
    backend = settings_of(scene, list(roles.values())).backend
    fobjs = field_objects(scene) if (scene.clearance.use_force_fields and backend == "ipc") else []
    fsamples = {o.name: (np.empty(len(frames)), np.empty(len(frames)), np.empty((len(frames), 4, 4)))
                for o in fobjs}
    pressures = {o.name: np.empty(len(frames)) for o in objs if roles[o.name] == "cloth"}   # Pa, keyed Pressure
    shrinks = {o.name: np.empty(len(frames)) for o in objs if roles[o.name] == "cloth"}      # keyed Shrink
    result = ExportResult(scene=None)  # type: ignore[arg-type]
    try:
        with _InputsOnly(objs), _PinProbes(objs):
            scene.frame_set(start)
            depsgraph = context.evaluated_depsgraph_get()
            rest = {o.name: read_mesh(o, depsgraph, with_pins=True) for o in objs}
            shapes = {o.name: collision_shape(o, rest[o.name], world_matrix(o.evaluated_get(depsgraph)), depsgraph)
                      for o in objs if roles[o.name] == "stiff" and o.clearance.collision_shape != "MESH"}
            pins = {}
            for o in objs:
                result.objects[o.name] = o
                w = rest[o.name].pin_weights
                pins[o.name] = (np.nonzero(w > 0.5)[0].astype(np.int32) if w is not None
                                else np.zeros(0, np.int32))
            # Whole-mesh samples: colliders and stiff objects (a keyframed stiff object is a prescribed
            # affine body; a static one sends no samples, below); every body for the pass-through backend.
            movers = [o for o in objs if roles[o.name] in ("collider", "stiff") or backend == "none"]
            followers = [o for o in objs if o not in movers and pins[o.name].size and o.clearance.pin_follows]
            samples = {o.name: np.empty((len(frames), len(rest[o.name].vertices), 3), np.float32) for o in movers}
            samples.update({o.name: np.empty((len(frames), pins[o.name].size, 3), np.float32) for o in followers})
            for o in objs:
                result.matrices[o.name] = np.empty((len(frames), 4, 4), np.float64)
            for i, f in enumerate(frames):
                if i:
                    scene.frame_set(f)
                    depsgraph = context.evaluated_depsgraph_get()
                for o in objs:
                    result.matrices[o.name][i] = world_matrix(o.evaluated_get(depsgraph))
                for name, arr in pressures.items():
                    arr[i] = float(result.objects[name].clearance.pressure)
                for name, arr in shrinks.items():
                    arr[i] = float(result.objects[name].clearance.shrink)
                for o in fobjs:
                    st, fl, mw = _field_sample(o, depsgraph)
                    fsamples[o.name][0][i], fsamples[o.name][1][i], fsamples[o.name][2][i] = st, fl, mw
                for o in movers + followers:
                    v = rest[o.name].vertices if i == 0 else read_mesh(o, depsgraph).vertices
                    if v.shape[0] != rest[o.name].vertices.shape[0]:
                        raise SceneError(f"{o.name}: the vertex count changes from {rest[o.name].vertices.shape[0]} "
                                         f"to {v.shape[0]} at frame {f}; animated objects must keep their topology "
                                         f"(check remesh/decimate modifiers)", o.name, "animation")
                    samples[o.name][i] = v if o in movers else v[pins[o.name]]
    finally:
        scene.frame_set(original_frame, subframe=original_sub)

    for o in objs:
        # before any mesh check: a zero Scale makes every face zero-area, and the fix is the scale
        msg = None if roles[o.name] == "collider" else zero_scale_problem(o.name, result.matrices[o.name][0], o.scale)
        if msg:
            raise SceneError(msg, o.name, "scale")
    bodies = []
    for o in objs:
        r, mesh = roles[o.name], rest[o.name]
        anim = samples.get(o.name) if o in movers else None
        if anim is not None and np.array_equal(anim.min(axis=0), anim.max(axis=0)):
            anim = None  # static collider or free stiff body: nothing to stream
        bodies.append(Body(name=o.name, role=r, vertices=mesh.vertices, triangles=mesh.triangles, edges=mesh.edges,
                           material=material_of(o), initial_velocity=tuple(float(c) for c in o.clearance.initial_velocity),
                           pin_indices=pins[o.name],
                           pin_targets=samples.get(o.name) if o in followers else None, animation=anim,
                           field_weights=tuple(float(w) for w in o.clearance.field_weights),
                           pressure_samples=_keyed(pressures.get(o.name)),
                           vertex_scales=vertex_scales(o, mesh) if r == "cloth" else None,
                           world_matrices=None if r in ("collider", "granular") else result.matrices[o.name],
                           **_shape_fields(shapes.get(o.name)), **attachment_of(o, mesh),
                           **keyed_shrink(o, mesh, _keyed(shrinks.get(o.name)))))
    role_list = list(roles.values())
    bounds = None
    if "granular" in role_list:
        pts = [b.vertices for b in bodies] + [b.animation for b in bodies if b.animation is not None]
        bounds = _domain(pts)
    fields = tuple(_force_field(o, *fsamples[o.name]) for o in fobjs)
    spec = Scene(settings=settings_of(scene, role_list, bounds), bodies=tuple(bodies), name=scene.name,
                 force_fields=fields)
    spec.validate()  # names the object for NaN, empty meshes, bad materials
    for b in bodies:
        if b.role in VOLUME_ROLES:
            msg = volume_problem(b.name, b.role, b.vertices, b.triangles)
            if msg:
                raise SceneError(msg, b.name, "triangles")
    for b in bodies:
        if b.shape_vertices is not None:
            w = enclosure_warning(b.name, b.collision_shape.replace("_", " "), b.vertices, b.shape_vertices,
                                  b.shape_triangles)
            if w:
                result.warnings.append(w)
    result.scene = spec
    return result


def _shape_fields(shape: Optional[tuple]) -> dict:
    """Body keyword arguments of a collision shape from :func:`collision_shape` (none for Mesh)."""
    if shape is None:
        return {}
    return dict(collision_shape=shape[0], shape_vertices=shape[1], shape_triangles=shape[2])
