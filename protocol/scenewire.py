"""Scene <-> wire dict: how the Scene/Settings/Body/Material dataclasses travel in Submit.

The wire form is a plain map mirroring the dataclasses (tuples become lists, numpy arrays
stay arrays and are framed by the codec). Decoding is strict: unknown keys, ill-typed
values and arrays of the wrong dtype raise ProtocolError naming the field path
(``scene.bodies[1].material.density``); missing keys take the dataclass default, so a
newer minor version may add optional fields. Value ranges and shapes are the scene's own
business (Scene.validate raises SceneError with the body and field).

Fields added by a minor version are listed in :data:`SETTINGS_SINCE`. Two rules keep older
peers working: decoding a settings map without such a field gives the value an older peer
meant (``solver_quality`` absent -> "accurate", the only solver before 1.1; ``mpm_domain`` absent ->
"box", ``material.grain_size`` absent -> 0, rate-independent sand, before 1.2; ``material.element``
absent -> "linear", the only solid element before 1.3; ``integrator`` absent -> "implicit_euler", the
only IPC integrator before 1.4; ``material.air_drag`` and ``material.pressure`` absent -> 0, the scene's
``force_fields`` absent -> none and a body's ``field_weights`` absent -> all 1, before 1.5; a body's
``collision_shape`` absent -> "mesh", its ``attach_to`` / ``attach_indices`` absent -> no attachment and
``shrink_samples`` absent -> a fixed rest size, before 1.6; a body's ``world_matrices`` absent -> nil,
results in world space, before 1.7), and encoding for
an older peer leaves the field out when its value means what the peer does anyway, and
refuses (ProtocolError naming the field) when the peer could not honour it.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .errors import ProtocolError
from .scene import (AIR_DRAG_OF_OLD_SCENES, PRESSURE_OF_OLD_SCENES, SEWING_OF_OLD_SCENES, ForceField, ELEMENT_OF_OLD_SCENES, GRAIN_SIZE_OF_OLD_SCENES, INTEGRATOR_OF_OLD_SCENES, MPM_DOMAIN_OF_OLD_SCENES, SOLVER_QUALITY_OF_OLD_SCENES, Body,
                    Material, Scene, Settings)
from .version import PROTOCOL_VERSION, version_str

SETTINGS_SINCE = {"solver_quality": ((1, 1), SOLVER_QUALITY_OF_OLD_SCENES),
                  "mpm_domain": ((1, 2), MPM_DOMAIN_OF_OLD_SCENES),
                  "integrator": ((1, 4), INTEGRATOR_OF_OLD_SCENES)}
"""Settings fields added by a minor version: name -> (first version that knows it, the value a
map without the field means). The meaning of absence is what peers of older versions did, which
may differ from the dataclass default chosen for new scenes."""

SETTINGS_USED_BY = {"mpm_domain": ("mpm",), "integrator": ("ipc",)}
"""Settings fields only some backends read: for an older peer such a field is simply left out
when the scene's backend does not use it (its value cannot change that peer's result)."""

MATERIAL_SINCE = {"grain_size": ((1, 2), GRAIN_SIZE_OF_OLD_SCENES),
                  "element": ((1, 3), ELEMENT_OF_OLD_SCENES),
                  "air_drag": ((1, 5), AIR_DRAG_OF_OLD_SCENES),
                  "pressure": ((1, 5), PRESSURE_OF_OLD_SCENES),
                  "sewing": ((1, 5), SEWING_OF_OLD_SCENES)}
"""Material fields added by a minor version, as SETTINGS_SINCE. Each is read by some bodies only
(:data:`MATERIAL_USED_BY`): for other bodies it is left out for an older peer whatever its value."""

MATERIAL_USED_BY = {"grain_size": lambda b: b.role == "granular" and b.material.mpm_material == "sand",
                    "element": lambda b: b.role == "solid",
                    "air_drag": lambda b: b.role in ("cloth", "solid", "stiff", "rod"),
                    "pressure": lambda b: b.role == "cloth",
                    "sewing": lambda b: b.role == "cloth"}
"""Material field -> which bodies read it (a predicate on the Body)."""

FORCE_FIELDS_SINCE = (1, 5)
"""Protocol version that added the scene's ``force_fields`` and the bodies' ``field_weights``. For an
older peer both are left out when the scene has no force field (weights then change nothing), and a
scene with force fields is refused naming ``force_fields``."""

SHAPES_SINCE = (1, 6)
"""Protocol version that added ``Body.collision_shape``, ``shape_vertices`` and ``shape_triangles``. For an
older peer they are left out when the shape is "mesh" (what that peer always did), and a body with another
shape is refused naming ``collision_shape``."""

SHAPE_FIELDS = ("collision_shape", "shape_vertices", "shape_triangles")

BODY_SINCE_1_6 = (1, 6)
"""Protocol version that added a body's ``attach_to`` / ``attach_indices`` (attachments), ``shrink_samples`` /
``shrink_weights`` (keyed Shrink), and air drag on solid, stiff and rod bodies (1.5 read ``material.air_drag``
on cloth only). For an older peer the new body fields are left out when unset and refused (naming the field)
when set; a non-cloth body with air drag is refused too."""

OUTPUT_ONLY_SINCE = {"world_matrices": (1, 7)}
"""Body fields no solver reads (only whoever writes the results: ``clearance-server bake`` writes .pc2 files in
the object's space with ``world_matrices``), by the version that added them. For an older peer they are left
out whatever their value: they cannot change its solve."""

FIELD_ARRAYS = {"strength": "<f8", "matrix": "<f8", "flow": "<f8"}
"""ForceField array fields and their wire dtypes."""

BODY_ARRAYS = {
    "vertices": ("<f8", False),
    "triangles": ("<i4", False),
    "edges": ("<i4", False),
    "pin_indices": ("<i4", False),
    "pin_targets": ("<f4", True),
    "animation": ("<f4", True),
    "pressure_samples": ("<f8", True),
    "vertex_scales": ("<f8", True),
    "shape_vertices": ("<f8", True),
    "shape_triangles": ("<i4", True),
    "attach_indices": ("<i4", False),
    "shrink_samples": ("<f8", True),
    "shrink_weights": ("<f8", True),
    "world_matrices": ("<f8", True),
}
"""Body array fields: wire dtype and whether None is allowed."""


def _plain(dc: Any) -> dict:
    out = {}
    for f in dataclasses.fields(dc):
        v = getattr(dc, f.name)
        out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def _settings_for(settings: Any, peer_version: tuple) -> dict:
    """The settings map for a peer speaking ``peer_version``: fields that peer does not know are
    left out when their value is what the peer does anyway, refused otherwise."""
    d = _plain(settings)
    peer = (int(peer_version[0]), int(peer_version[1]))
    for name, (since, implied) in SETTINGS_SINCE.items():
        if peer[0] != since[0] or peer >= since:
            continue
        if name in SETTINGS_USED_BY and d["backend"] not in SETTINGS_USED_BY[name]:
            del d[name]
            continue
        if d[name] != implied:
            raise ProtocolError(
                f"the server speaks protocol {version_str(peer)}, which predates {name} (added in "
                f"{version_str(since)}) and always uses {implied!r}; set {name} to {implied!r} or update "
                "the server", f"scene.settings.{name}")
        del d[name]
    return d


def _material_for(body: Any, peer_version: tuple) -> dict:
    """The material map of ``body`` for a peer speaking ``peer_version`` (see MATERIAL_SINCE)."""
    d = _plain(body.material)
    peer = (int(peer_version[0]), int(peer_version[1]))
    for name, (since, implied) in MATERIAL_SINCE.items():
        if peer[0] != since[0] or peer >= since:
            continue
        used = MATERIAL_USED_BY[name](body)
        if used and d[name] != implied:
            raise ProtocolError(
                f"{body.name}: the server speaks protocol {version_str(peer)}, which predates the material's "
                f"{name} (added in {version_str(since)}) and always uses {implied!r}; set {name} to {implied!r} "
                "or update the server", f"scene.bodies.{body.name}.material.{name}")
        del d[name]
    return d


def scene_to_wire(scene: Scene, peer_version: tuple = PROTOCOL_VERSION) -> dict:
    """The wire map of a scene (arrays converted to their wire dtypes), for a peer speaking
    ``peer_version`` (see :data:`SETTINGS_SINCE`; raises ProtocolError when that peer cannot
    honour a setting)."""
    peer = (int(peer_version[0]), int(peer_version[1]))
    old = peer[0] == FORCE_FIELDS_SINCE[0] and peer < FORCE_FIELDS_SINCE
    if old and scene.force_fields:
        raise ProtocolError(
            f"the server speaks protocol {version_str(peer)}, which predates force fields (added in "
            f"{version_str(FORCE_FIELDS_SINCE)}); remove the scene's force fields or update the server",
            "scene.force_fields")
    before_1_6 = peer[0] == BODY_SINCE_1_6[0] and peer < BODY_SINCE_1_6
    bodies = []
    for b in scene.bodies:
        d = {}
        if before_1_6 and b.role != "cloth" and b.material.air_drag != AIR_DRAG_OF_OLD_SCENES and \
                MATERIAL_USED_BY["air_drag"](b) and peer >= MATERIAL_SINCE["air_drag"][0]:
            raise ProtocolError(
                f"{b.name}: the server speaks protocol {version_str(peer)}, which reads the material's air_drag on "
                f"cloth only (air on {b.role} objects was added in {version_str(BODY_SINCE_1_6)}); set air_drag to 0 "
                "or update the server", f"scene.bodies.{b.name}.material.air_drag")
        for f in dataclasses.fields(Body):
            v = getattr(b, f.name)
            if before_1_6 and f.name in ("attach_to", "attach_indices", "shrink_samples", "shrink_weights"):
                unset = v is None or (v.size == 0 if isinstance(v, np.ndarray) else v == "")
                if not unset:
                    what = "attachments" if f.name.startswith("attach") else "keyframed Shrink"
                    raise ProtocolError(
                        f"{b.name}: the server speaks protocol {version_str(peer)}, which predates {what} (added in "
                        f"{version_str(BODY_SINCE_1_6)}); remove them or update the server",
                        f"scene.bodies.{b.name}.{f.name}")
                continue
            if old and f.name in ("pressure_samples", "vertex_scales") and v is not None and b.role == "cloth":
                what = "keyframed pressure" if f.name == "pressure_samples" else "vertex-group maps"
                raise ProtocolError(
                    f"{b.name}: the server speaks protocol {version_str(peer)}, which predates {what} (added in "
                    f"{version_str(FORCE_FIELDS_SINCE)}); remove them or update the server",
                    f"scene.bodies.{b.name}.{f.name}")
            if old and f.name in ("field_weights", "pressure_samples", "vertex_scales"):
                continue
            if f.name in SHAPE_FIELDS and peer[0] == SHAPES_SINCE[0] and peer < SHAPES_SINCE:
                if f.name == "collision_shape" and v != "mesh":
                    raise ProtocolError(
                        f"{b.name}: the server speaks protocol {version_str(peer)}, which predates collision shapes "
                        f"(added in {version_str(SHAPES_SINCE)}) and always collides on the mesh; set Collision "
                        f"Shape to Mesh or update the server", f"scene.bodies.{b.name}.collision_shape")
                continue
            if f.name in OUTPUT_ONLY_SINCE and peer[0] == OUTPUT_ONLY_SINCE[f.name][0] \
                    and peer < OUTPUT_ONLY_SINCE[f.name]:
                continue
            if f.name in BODY_ARRAYS:
                dt, _ = BODY_ARRAYS[f.name]
                d[f.name] = None if v is None else np.ascontiguousarray(v, dtype=dt)
            elif f.name == "material":
                d[f.name] = _material_for(b, peer_version)
            else:
                d[f.name] = list(v) if isinstance(v, tuple) else v
        bodies.append(d)
    out = {"name": scene.name, "settings": _settings_for(scene.settings, peer_version), "bodies": bodies}
    if not old:
        out["force_fields"] = [_field_to_wire(f) for f in scene.force_fields]
    return out


def _field_to_wire(ff: ForceField) -> dict:
    d = {}
    for f in dataclasses.fields(ForceField):
        v = getattr(ff, f.name)
        d[f.name] = np.ascontiguousarray(v, dtype=FIELD_ARRAYS[f.name]) if f.name in FIELD_ARRAYS else v
    return d


def _scalar(value: Any, default: Any, path: str) -> Any:
    """Type-check one value against the type of the dataclass default."""
    if isinstance(default, bool):
        if type(value) is not bool:
            raise ProtocolError("must be a boolean", path)
        return value
    if isinstance(default, int):
        if type(value) is not int:
            raise ProtocolError("must be an integer", path)
        return value
    if isinstance(default, float):
        if type(value) not in (int, float):
            raise ProtocolError("must be a number", path)
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ProtocolError("must be a string", path)
        return value
    if isinstance(default, tuple):
        if not (isinstance(value, list) and len(value) == len(default)
                and all(type(x) in (int, float) for x in value)):
            raise ProtocolError(f"must be a list of {len(default)} numbers", path)
        return tuple(float(x) for x in value)
    raise ProtocolError("unsupported field", path)


def _dataclass_from(cls: type, d: Any, path: str, special: dict) -> Any:
    if not isinstance(d, dict):
        raise ProtocolError("must be a map", path)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k in d:
        if k not in fields:
            raise ProtocolError("unknown field", f"{path}.{k}")
    kw = {}
    for name, f in fields.items():
        p = f"{path}.{name}"
        if name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProtocolError("missing field", p)
            continue
        if name in special:
            kw[name] = special[name](d[name], p)
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            kw[name] = _scalar(d[name], default, p)
    return cls(**kw)


def _array(name: str, table: dict = None):
    dt, nullable = (BODY_ARRAYS if table is None else table)[name]

    def conv(v: Any, path: str) -> Any:
        if v is None and nullable:
            return None
        if not isinstance(v, np.ndarray):
            raise ProtocolError(f"must be an array of dtype {dt}" + (" or nil" if nullable else ""), path)
        if v.dtype.str != dt:
            raise ProtocolError(f"must have dtype {dt}, got {v.dtype.str}", path)
        return v.astype(v.dtype.newbyteorder("="), copy=False)
    return conv


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise ProtocolError("must be a string", path)
    return v


def _velocity(v: Any, path: str) -> tuple:
    return _scalar(v, (0.0, 0.0, 0.0), path)


def scene_from_wire(d: Any, path: str = "scene") -> Scene:
    """Rebuild a Scene from its wire map; raises ProtocolError naming the bad field."""
    if not isinstance(d, dict):
        raise ProtocolError("must be a map", path)

    def material(v: Any, p: str) -> Material:
        m = _dataclass_from(Material, v, p, {})
        # A field a pre-1.2 peer did not send means what that peer did, not the new default.
        absent = {name: implied for name, (_, implied) in MATERIAL_SINCE.items()
                  if isinstance(v, dict) and name not in v}
        return dataclasses.replace(m, **absent) if absent else m

    body_special = {name: _array(name) for name in BODY_ARRAYS}
    body_special.update(name=_str, role=_str, collision_shape=_str, attach_to=_str, material=material,
                        initial_velocity=_velocity,
                        field_weights=lambda v, p: _scalar(v, (1.0, 1.0, 1.0, 1.0), p))
    field_special = {name: _array(name, {k: (dt, False) for k, dt in FIELD_ARRAYS.items()}) for name in FIELD_ARRAYS}
    field_special.update(name=_str, kind=_str, shape=_str)

    def force_fields(v: Any, p: str) -> tuple:
        if not isinstance(v, list):
            raise ProtocolError("must be a list of force fields", p)
        return tuple(_dataclass_from(ForceField, f, f"{p}[{i}]", field_special) for i, f in enumerate(v))

    def settings(v: Any, p: str) -> Settings:
        s = _dataclass_from(Settings, v, p, {})
        # A field a pre-1.1 peer did not send means what that peer did, not the new default.
        absent = {name: implied for name, (_, implied) in SETTINGS_SINCE.items()
                  if isinstance(v, dict) and name not in v}
        return dataclasses.replace(s, **absent) if absent else s

    def bodies(v: Any, p: str) -> tuple:
        if not isinstance(v, list):
            raise ProtocolError("must be a list of bodies", p)
        return tuple(_dataclass_from(Body, b, f"{p}[{i}]", body_special) for i, b in enumerate(v))

    return _dataclass_from(Scene, d, path, {"settings": settings, "bodies": bodies, "name": _str,
                                            "force_fields": force_fields})
