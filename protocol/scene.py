"""The scene a client submits: bodies, materials, pins, colliders and bake settings.

This module is the contract between the Blender add-on (or any other DCC tool) and the
solver server. Everything is in SI units and world space: metres, seconds, kilograms,
kg/m^3, pascals. Arrays are numpy arrays with fixed dtypes (float64 positions, int32
indices, float32 animation samples) so that they travel over the wire as raw frames.

Frames are Blender frame numbers. ``frame_start`` is the rest/initial state (its
positions are the body's ``vertices``); the solver produces frames
``frame_start + 1 .. frame_end``. Animated data (collider vertices, pin targets) is
sampled once per frame for every frame of ``frame_start .. frame_end`` inclusive, so its
first axis has length ``frame_end - frame_start + 1``; the solver interpolates linearly
between samples for substeps.
"""
from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

ROLES = ("solid", "cloth", "rod", "stiff", "granular", "collider")
"""Body roles. ``solid``: volumetric soft body (tetrahedralised). ``cloth``: thin shell
(triangles). ``rod``: strands (edges). ``stiff``: affine/rigid body. ``granular``: MPM
particles sampled inside the closed mesh. ``collider``: prescribed motion, never simulated."""

ELASTIC_MODELS = ("neo_hookean", "stable_neo_hookean", "fixed_corotated", "stvk")
MPM_MATERIALS = ("elastic", "snow", "sand", "water", "mud")
ELEMENTS = ("linear", "quadratic")
"""Finite elements of a solid (``Material.element``): ``linear`` 4-node tets (cheap, stiff in bending:
a 20x2x2-cell beam sags about half as far as it should), ``quadratic`` 10-node tets (bend correctly
at coarse resolution; Accurate solver only). docs/solver.md, "Quadratic tetrahedra"."""
BACKENDS = ("ipc", "mpm", "none")
SOLVER_QUALITIES = ("fast", "accurate")
"""IPC solver families (``Settings.solver_quality``). ``accurate`` (the default; "Converged" in the
add-on): Newton IPC, every step converged to ``newton_tol`` or reported unconverged with its residual.
``fast`` ("Preview"): per-vertex block descent with a fixed sweep budget; its steps are not converged and
every frame says so. Both keep the scene free of intersections."""
PREVIEW_ERROR = ("39 mm RMS on a 1 m cloth draped over a sphere (24x24 grid, 48 frames; 20 mm at 48x48 and 64x64; "
                 "a Peirce strip sags to 89 deg where the converged answer is 44)")
"""How far the ``fast`` (Preview) solver's frames are from the converged answer, as measured by the
benchmark suite (docs/benchmarks.md, "Suite": Preview vs Converged, same scenes, same run, 2026-11-27);
the panel and every preview frame's warning quote it (the panel the part before the parenthesis)."""
SOLVER_QUALITY_OF_OLD_SCENES = "accurate"
"""What a scene without ``solver_quality`` means: scenes written or sent before protocol 1.1
had only the Newton IPC solver, so decoding fills in "accurate" (not the dataclass default)."""
INTEGRATORS = ("implicit_euler", "bdf2")
"""IPC time integrators (``Settings.integrator``, both solvers). ``implicit_euler``: first order, damps
fast motion, so a bounce loses more the fewer substeps resolve it. ``bdf2``: second-order BDF
(seed 003: restitution is the energy conservation of the time stepper); bounces keep their height
far better and depend far less on Substeps (docs/solver.md, "Bounce"). Both keep the no-intersection
guarantee."""
INTEGRATOR_OF_OLD_SCENES = "implicit_euler"
"""What a scene without ``integrator`` means: before protocol 1.4 the IPC solvers were implicit Euler."""
MPM_DOMAINS = ("auto", "box")
"""MPM domain modes (``Settings.mpm_domain``). ``auto``: the grid covers the granular bodies and
every collider (all frames) plus a margin, with no walls; particles that leave it fall on
ballistically, no longer simulated, and are counted (docs/mpm.md). ``box``: walls on the six faces
of ``domain_min..domain_max`` (Coulomb friction ``Settings.friction``)."""
MPM_DOMAIN_OF_OLD_SCENES = "box"
"""What a scene without ``mpm_domain`` means: before protocol 1.2 the domain box always had walls."""
GRAIN_SIZE_OF_OLD_SCENES = 0.0
ELEMENT_OF_OLD_SCENES = "linear"
AIR_DRAG_OF_OLD_SCENES = 0.0
"""What a material without ``air_drag`` means: before protocol 1.5 cloth felt no air."""
PRESSURE_OF_OLD_SCENES = 0.0
SEWING_OF_OLD_SCENES = 0.0
"""What a material without ``sewing`` means: before protocol 1.5 loose edges of a cloth were ignored."""
"""What a material without ``pressure`` means: before protocol 1.5 no cloth was inflated."""
FIELD_KINDS = ("wind", "force", "vortex", "turbulence")
"""Force field kinds (``ForceField.kind``, Blender's field types of the same names). ``wind``: air moving
along the field object's local +Z at ``strength`` m/s; it acts on cloth through its surface (Material.air_drag).
``vortex``: air swirling about the field object's +Z axis at ``strength`` m/s, also through the surface.
``force``: an acceleration of ``strength`` m/s^2 away from the field object's origin (negative: towards).
``turbulence``: air moving in a smooth random pattern of feature size ``size`` m (fixed by ``seed``, carried
with the field object) with an RMS speed of ``strength`` m/s per axis, felt through the surface like wind."""
FIELD_SHAPES = ("point", "plane", "line")
"""Falloff distance of a field (``ForceField.shape``, Blender's Shape): ``point`` from the object's origin,
``plane`` along its +Z axis (Blender's default for Wind), ``line`` from its Z axis."""
"""What a material without ``element`` means: before protocol 1.3 every solid was linear tets."""
"""What a material without ``grain_size`` means: before protocol 1.2 sand friction was
rate-independent (grain_size 0 switches the mu(I) rheology off)."""


MAX_NAME_LENGTH = 1024
"""Longest body name accepted (Blender's own names are at most 63 bytes)."""


class SceneError(ValueError):
    """A scene that cannot be simulated. ``obj`` names the body (or "" for the scene),
    ``field`` names the offending field, the message says what to do."""

    def __init__(self, message: str, obj: str = "", field: str = ""):
        super().__init__(message)
        self.obj = obj
        self.field = field


@dataclass(frozen=True)
class Range:
    """Accepted values of a number: ``lo`` .. ``hi`` (``lo_open``/``hi_open``: bound excluded),
    its unit, and what a value outside usually means (shown to the user)."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False
    unit: str = ""
    hint: str = ""

    def contains(self, v: float) -> bool:
        if not math.isfinite(v):
            return False
        above = v > self.lo if self.lo_open else v >= self.lo
        below = v < self.hi if self.hi_open else v <= self.hi
        return above and below

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}{unit}"


def check_range(value, rng: Range, obj: str, field_name: str, what: str) -> None:
    """Raise SceneError(obj, field_name) unless ``value`` is a finite real number inside ``rng``.

    ``what`` starts the message ("Cube: Density", "Clearance Bake setting Substeps")."""
    try:
        v = float(value)
        ok = not isinstance(value, (bool, str, bytes)) and rng.contains(v)
    except (TypeError, ValueError, OverflowError):
        v, ok = value, False
    if not ok:
        kind = "NaN" if isinstance(v, float) and math.isnan(v) else repr(value) if not isinstance(v, float) else f"{v:g}"
        hint = f" ({rng.hint})" if rng.hint else ""
        raise SceneError(f"{what} must be a finite number in {rng.describe()}, got {kind}{hint}", obj, field_name)


MATERIAL_RANGES = {
    "density": Range(0.0, 1e6, lo_open=True, unit="kg/m³", hint="water is 1000, steel 7850"),
    "youngs_modulus": Range(0.0, 1e13, lo_open=True, unit="Pa",
                            hint="rubber ~1e6, wood ~1e10, steel 2e11; stiffer than diamond cannot be resolved"),
    "poisson_ratio": Range(0.0, 0.5, hi_open=True, hint="0.5 is incompressible, which the elastic models cannot represent"),
    "friction": Range(0.0, 100.0),
    "thickness": Range(0.0, 10.0, lo_open=True, unit="m"),
    "bending_stiffness": Range(0.0, 1e6, unit="N·m"),
    "damping": Range(0.0, 100.0, unit="s"),
    "friction_angle": Range(0.0, 90.0, hi_open=True, unit="°"),
    "particle_spacing": Range(0.0, 10.0, lo_open=True, unit="m"),
    "hardening": Range(0.0, 1e3),
    "critical_compression": Range(0.0, 1.0),
    "critical_stretch": Range(0.0, 1.0),
    "viscosity": Range(0.0, 1e9, unit="Pa·s"),
    "yield_stress": Range(0.0, 1e12, unit="Pa"),
    "grain_size": Range(0.0, 1.0, unit="m", hint="sand grains are 0.06-2 mm; 0 switches mu(I) off"),
    "air_drag": Range(0.0, 1e4, unit="Pa·s/m", hint="force per area per m/s of normal air speed; ~1 for cloth in air"),
    "pressure": Range(-1e7, 1e7, unit="Pa", hint="inside minus outside; a party balloon is ~1e3"),
    "sewing": Range(0.0, 1e9, unit="N/m", hint="stiffness of each seam edge's zero-length spring; 0: no sewing"),
}
"""Accepted material values: physical bounds (density, moduli > 0, Poisson < 0.5, angles < 90°)
and far beyond anything an artist needs at the top (a 1e30 Pa modulus ran 'done' with no
warning before, see issue 8 item 9)."""

MAX_SPEED = 1.0e4
"""m/s: fastest initial velocity accepted (a rifle bullet is ~1e3; 1e9 finished 'done', unresolved)."""
MAX_COORDINATE = 1.0e6
"""m: largest vertex coordinate accepted (float32 frames keep ~0.1 m there)."""

SETTINGS_RANGES = {
    "fps": Range(0.0, 1e4, lo_open=True, unit="frames/s"),
    "substeps": Range(1, 1000, unit="steps per frame",
                      hint="more than 1,000 steps per frame makes one frame take minutes; 64 keeps any bounce"),
    "contact_gap": Range(0.0, 10.0, lo_open=True, unit="m"),
    "friction": Range(0.0, 100.0),
    "newton_tol": Range(0.0, 1e6, lo_open=True, unit="m/s"),
    "max_newton_iterations": Range(1, 1e6),
    "debug_frame_delay": Range(0.0, 1e6, unit="s"),
    "debug_fail_after": Range(0, 1e9),
}
"""Accepted settings values (the time step dt = 1 / (fps * substeps) is then positive and finite)."""

MATERIAL_LABELS = {
    "density": "Density", "youngs_modulus": "Young's Modulus (stiffness)", "poisson_ratio": "Poisson Ratio",
    "friction": "Friction", "thickness": "Thickness", "bending_stiffness": "Bending Stiffness",
    "damping": "Damping", "friction_angle": "Friction Angle", "particle_spacing": "Particle Spacing",
    "viscosity": "Viscosity", "yield_stress": "Yield Stress", "grain_size": "Grain Size", "air_drag": "Air Drag",
    "pressure": "Pressure", "sewing": "Sewing",
}
"""The name a user sees for a material field: the label of the add-on's field (its panel shows
"Young's Modulus (Pa)", never ``youngs_modulus``), so a refusal names what to change. Fields with no
add-on field (snow's hardening, ...) keep their protocol name."""
SETTINGS_LABELS = {
    "fps": "Frame Rate (fps)", "substeps": "Substeps", "contact_gap": "Contact Gap", "friction": "Friction",
    "newton_tol": "Newton Tolerance", "max_newton_iterations": "Max Newton Iterations",
}
"""The name a user sees for a bake setting (the Clearance Bake panel's label; fps is the scene's Frame Rate)."""


def material_label(name: str) -> str:
    """The user-facing name of material field ``name`` (:data:`MATERIAL_LABELS`, else ``name``)."""
    return MATERIAL_LABELS.get(name, name)


def settings_label(name: str) -> str:
    """The user-facing name of bake setting ``name`` (:data:`SETTINGS_LABELS`, else ``name``)."""
    return SETTINGS_LABELS.get(name, name)


@dataclass(frozen=True)
class Material:
    """Per-body physical parameters (SI units). Fields not used by a role are ignored."""

    density: float = 1000.0            # kg/m^3 (cloth: volumetric density times thickness is the areal density)
    youngs_modulus: float = 1.0e5      # Pa
    poisson_ratio: float = 0.3         # dimensionless, in [0, 0.5)
    model: str = "neo_hookean"         # one of ELASTIC_MODELS
    friction: float = 0.3              # Coulomb coefficient mu against anything (pair uses the max... see docs)
    thickness: float = 0.001           # m, cloth/rod thickness used as a contact offset
    bending_stiffness: float = 1.0e-4  # N*m, cloth hinge / rod bending
    damping: float = 0.0               # s, Rayleigh stiffness-proportional damping
    # MPM (role "granular")
    mpm_material: str = "sand"         # one of MPM_MATERIALS
    friction_angle: float = 30.0       # degrees (sand, Drucker-Prager)
    particle_spacing: float = 0.02     # m, distance between sampled particles
    hardening: float = 10.0            # snow hardening coefficient
    critical_compression: float = 2.5e-2  # snow theta_c
    critical_stretch: float = 7.5e-3      # snow theta_s
    viscosity: float = 0.0             # Pa*s (water, mud)
    yield_stress: float = 1.0e3        # Pa (mud, von Mises)
    grain_size: float = 1.0e-3         # m, sand mu(I) rheology (0: rate-independent); absent on the wire: 0
    element: str = "linear"            # solid tets, one of ELEMENTS (since protocol 1.3; absent: linear)
    air_drag: float = 0.0              # Pa*s/m, cloth: normal air drag per area per m/s (since 1.5; absent: 0)
    pressure: float = 0.0              # Pa, closed cloth: inside minus outside pressure (since 1.5; absent: 0)
    sewing: float = 0.0                # N/m, cloth: stiffness of the seams (loose edges) pulling to zero length

    def validate(self, obj: str) -> None:
        """Refuse NaN, infinity and values outside :data:`MATERIAL_RANGES` (SceneError naming
        ``obj`` and the field), and unknown model names. Every field is checked whatever the
        role, so a NaN never reaches a solver that happens to read it."""
        for name, rng in MATERIAL_RANGES.items():
            check_range(getattr(self, name), rng, obj, name, f"{obj}: {material_label(name)}")
        if self.model not in ELASTIC_MODELS:
            raise SceneError(f"{obj}: unknown elastic model {self.model!r}; use one of {ELASTIC_MODELS}", obj, "model")
        if self.element not in ELEMENTS:
            raise SceneError(f"{obj}: unknown element {self.element!r}; use one of {ELEMENTS}", obj, "element")
        if self.mpm_material not in MPM_MATERIALS:
            raise SceneError(f"{obj}: unknown MPM material {self.mpm_material!r}; use one of {MPM_MATERIALS}", obj, "mpm_material")


@dataclass(frozen=True)
class Body:
    """One Blender object as the solver sees it.

    ``vertices``  (n, 3) float64, world space at ``frame_start`` (evaluated mesh, modifiers applied).
    ``triangles`` (m, 3) int32, the evaluated mesh's loop triangles (quads already split).
    ``edges``     (k, 2) int32, unique mesh edges (rods use these; cloth may use them for bending).
    ``pin_indices`` (p,) int32, vertices held by pins (from a vertex group).
    ``pin_targets`` (F, p, 3) float32 or None: per-frame world targets of the pinned vertices
        (animated pins follow them); None means pins hold their start position.
    ``animation`` (F, n, 3) float32 or None: colliders and stiff bodies; per-frame world positions of
        every vertex (keyframed transforms and deforming meshes alike). None means static (a collider)
        or free (a stiff body); a stiff body with animation is prescribed (it follows its keys).
    ``initial_velocity`` (3,) m/s.
    ``field_weights`` (wind, force, vortex, turbulence): how strongly the scene's force fields act on the body.
    ``pressure_samples`` (F,) float64 or None: a closed cloth's pressure (Pa) at every frame when it is
        keyframed (linear between frames); None: ``material.pressure`` throughout.
    ``vertex_scales`` (n, 4) float64 or None: a cloth's per-vertex maps (:data:`VERTEX_SCALES`: stretch and
        bending stiffness multipliers, mass multiplier, rest-size multiplier); a triangle takes the mean of
        its three vertices (mass: the vertex's own). None: all 1.
    ``collision_shape`` (stiff bodies, :data:`COLLISION_SHAPES`): what contact is computed on. "mesh" (default):
        the body's own triangles; "convex_hull", "box", "sphere": a shape the server builds from ``vertices``
        unless ``shape_vertices`` / ``shape_triangles`` give it (the add-on sends its Box in the object's local
        axes); "proxy": ``shape_vertices`` / ``shape_triangles`` are required (any closed mesh, e.g. a decimated
        copy). The shape moves with the body (x = A X + p) and the returned positions are the body's own
        vertices under the same map. Since protocol 1.6.
    ``shape_vertices`` (k, 3) float64 / ``shape_triangles`` (t, 3) int32 or None: the collision shape's closed,
        outward-oriented surface in world space at the start frame (metres).
    ``attach_to`` the name of another body of the scene (cloth, solid, stiff or collider) and ``attach_indices``
        (a,) int32 the vertices of this body (cloth, solid or rod) attached to its surface: each is tied to the
        nearest point of that surface at ``frame_start`` (a triangle, barycentric coordinates and the normal
        offset) and carried by its motion in the same solve. "" / empty: no attachment.
    ``shrink_samples`` (F,) float64 or None: a cloth's Shrink at every frame when it is keyframed (linear
        between frames): the rest size of vertex i is then 1 - ``shrink_weights``[i] * shrink(t) (weights None:
        1 everywhere), replacing the rest-size column of ``vertex_scales``. None: the rest size is fixed.
    ``world_matrices`` (F, 4, 4) float64 or None: the object's world matrix at every frame of the range (since
        protocol 1.7). The solver never reads it; it tells whoever writes the results (``clearance-server bake``)
        the object's space of each frame, so the .pc2 files play under the object's own transform, as the
        add-on's Bake writes them. None: results stay in world space.
    The solver returns positions in this same vertex order and count.
    """

    name: str
    role: str
    vertices: np.ndarray
    triangles: np.ndarray
    edges: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int32))
    material: Material = field(default_factory=Material)
    initial_velocity: tuple = (0.0, 0.0, 0.0)
    pin_indices: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int32))
    pin_targets: Optional[np.ndarray] = None
    animation: Optional[np.ndarray] = None
    field_weights: tuple = (1.0, 1.0, 1.0, 1.0)   # wind, force, vortex, turbulence (FIELD_WEIGHT_KINDS); since 1.5
    pressure_samples: Optional[np.ndarray] = None   # (F,) float64 Pa per frame (keyed Pressure); since 1.5
    vertex_scales: Optional[np.ndarray] = None      # (n, 4) float64 cloth maps (VERTEX_SCALES); since 1.5
    collision_shape: str = "mesh"                   # stiff: one of COLLISION_SHAPES; since 1.6 (absent: "mesh")
    shape_vertices: Optional[np.ndarray] = None     # (k, 3) float64 m, world: the shape's surface; since 1.6
    shape_triangles: Optional[np.ndarray] = None    # (t, 3) int32, closed, outward; since 1.6
    attach_to: str = ""                             # name of the body the attach vertices hang on; since 1.6
    attach_indices: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.int32))   # since 1.6
    shrink_samples: Optional[np.ndarray] = None     # (F,) float64 keyed Shrink per frame (cloth); since 1.6
    shrink_weights: Optional[np.ndarray] = None     # (n,) float64 weight of the keyed Shrink per vertex; since 1.6
    world_matrices: Optional[np.ndarray] = None     # (F, 4, 4) float64 world matrix per frame (output space); since 1.7

    def validate(self, n_frames: int) -> None:
        """Check shapes, dtypes, index ranges and finiteness; raise SceneError naming this body."""
        o = self.name
        if not isinstance(o, str) or not o:
            raise SceneError("a body has an empty name", "", "name")
        if len(o) > MAX_NAME_LENGTH:
            raise SceneError(f"{o[:40]}...: a body name has at most {MAX_NAME_LENGTH} characters, got {len(o)}",
                             o, "name")
        bad = [c for c in o if unicodedata.category(c) in ("Cc", "Cs")]
        if bad:
            # NUL and other control characters vanish or collapse in file names and numpy string
            # arrays ("a" and "a\0" would become one body in the frame cache): refused outright.
            raise SceneError(f"{o!r}: a body name must not contain control characters "
                             f"(found {', '.join(sorted({f'U+{ord(c):04X}' for c in bad}))})", o, "name")
        if self.role not in ROLES:
            raise SceneError(f"{o}: unknown role {self.role!r}; use one of {ROLES}", o, "role")
        v = self.vertices
        if not (isinstance(v, np.ndarray) and v.ndim == 2 and v.shape[1] == 3 and v.dtype == np.float64):
            raise SceneError(f"{o}: vertices must be an (n, 3) float64 array", o, "vertices")
        if v.shape[0] == 0:
            raise SceneError(f"{o}: the mesh has no vertices", o, "vertices")
        if not np.isfinite(v).all():
            bad = int(np.nonzero(~np.isfinite(v).all(axis=1))[0][0])
            raise SceneError(f"{o}: vertex {bad} has a NaN or infinite coordinate; fix the mesh or its modifiers", o, "vertices")
        if np.abs(v).max() > MAX_COORDINATE:
            raise SceneError(f"{o}: a vertex lies {np.abs(v).max():g} m from the origin, beyond {MAX_COORDINATE:g} m; "
                             "move the object or check its scale", o, "vertices")
        n = v.shape[0]
        for fname, width in (("triangles", 3), ("edges", 2)):
            a = getattr(self, fname)
            if not (isinstance(a, np.ndarray) and a.ndim == 2 and a.shape[1] == width and a.dtype == np.int32):
                raise SceneError(f"{o}: {fname} must be an (m, {width}) int32 array", o, fname)
            if a.size and (a.min() < 0 or a.max() >= n):
                raise SceneError(f"{o}: {fname} index out of range [0, {n})", o, fname)
        p = self.pin_indices
        if not (isinstance(p, np.ndarray) and p.ndim == 1 and p.dtype == np.int32):
            raise SceneError(f"{o}: pin_indices must be a (p,) int32 array", o, "pin_indices")
        if p.size and (p.min() < 0 or p.max() >= n):
            raise SceneError(f"{o}: pin index out of range [0, {n})", o, "pin_indices")
        if self.pin_targets is not None:
            t = self.pin_targets
            if not (isinstance(t, np.ndarray) and t.shape == (n_frames, p.size, 3)):
                raise SceneError(f"{o}: pin_targets must have shape ({n_frames}, {p.size}, 3)", o, "pin_targets")
            if not np.isfinite(t).all():
                raise SceneError(f"{o}: pin targets contain NaN or infinity", o, "pin_targets")
        if self.animation is not None:
            a = self.animation
            if not (isinstance(a, np.ndarray) and a.shape == (n_frames, n, 3)):
                raise SceneError(f"{o}: animation must have shape ({n_frames}, {n}, 3)", o, "animation")
            if not np.isfinite(a).all():
                raise SceneError(f"{o}: animated positions contain NaN or infinity", o, "animation")
        try:
            vel = [float(c) for c in self.initial_velocity]
        except (TypeError, ValueError):
            vel = []
        if len(vel) != 3 or not all(math.isfinite(c) for c in vel):
            raise SceneError(f"{o}: initial_velocity must be 3 finite numbers", o, "initial_velocity")
        if math.sqrt(sum(c * c for c in vel)) > MAX_SPEED:
            raise SceneError(f"{o}: initial speed {math.sqrt(sum(c * c for c in vel)):g} m/s is above "
                             f"{MAX_SPEED:g} m/s, faster than the solver can resolve", o, "initial_velocity")
        if self.role in ("solid", "cloth", "stiff", "granular", "collider") and self.triangles.shape[0] == 0:
            raise SceneError(f"{o}: role {self.role!r} needs faces but the mesh has none", o, "triangles")
        if self.role == "rod" and self.edges.shape[0] == 0:
            raise SceneError(f"{o}: role 'rod' needs edges but the mesh has none", o, "edges")
        try:
            w = [float(c) for c in self.field_weights]
        except (TypeError, ValueError):
            w = []
        if len(w) != len(FIELD_WEIGHT_KINDS) or not all(math.isfinite(c) and abs(c) <= 1e3 for c in w):
            raise SceneError(f"{o}: field_weights must be {len(FIELD_WEIGHT_KINDS)} finite numbers in [-1000, 1000] "
                             f"({', '.join(FIELD_WEIGHT_KINDS)})", o, "field_weights")
        vs = self.vertex_scales
        if vs is not None:
            if not (isinstance(vs, np.ndarray) and vs.shape == (n, len(VERTEX_SCALES)) and vs.dtype == np.float64):
                raise SceneError(f"{o}: vertex_scales must be a float64 array of shape ({n}, {len(VERTEX_SCALES)})",
                                 o, "vertex_scales")
            if not np.isfinite(vs).all() or (vs[:, :2] < 0).any() or (vs[:, 2] <= 0).any() or (vs[:, :3] > 1e6).any() \
                    or (vs[:, 3] < 0.05).any() or (vs[:, 3] > 20).any():
                raise SceneError(f"{o}: vertex_scales must be finite, stiffness scales in [0, 1e6], mass scales in (0, 1e6] and "
                                 "rest-size scales in [0.05, 20]", o, "vertex_scales")
        a = self.attach_indices
        if not (isinstance(a, np.ndarray) and a.ndim == 1 and a.dtype == np.int32):
            raise SceneError(f"{o}: attach_indices must be an (a,) int32 array", o, "attach_indices")
        if not isinstance(self.attach_to, str) or len(self.attach_to) > MAX_NAME_LENGTH:
            raise SceneError(f"{o}: attach_to must be an object name", o, "attach_to")
        if a.size and (a.min() < 0 or a.max() >= n):
            raise SceneError(f"{o}: attach index out of range [0, {n})", o, "attach_indices")
        if a.size and len(np.unique(a)) != a.size:
            raise SceneError(f"{o}: attach_indices lists a vertex twice", o, "attach_indices")
        if bool(self.attach_to) != bool(a.size):
            raise SceneError(f"{o}: an attachment needs both an object to attach to and a vertex group with vertices "
                             "of weight above 0.5 (or neither)", o, "attach_indices" if self.attach_to else "attach_to")
        if self.attach_to and self.role not in ("cloth", "solid", "rod"):
            raise SceneError(f"{o}: only cloth, solid and rod objects can be attached to another object (this one is "
                             f"{self.role}); clear Attach To", o, "attach_to")
        if a.size and np.isin(a, p).any():
            raise SceneError(f"{o}: vertex {int(a[np.isin(a, p)][0])} is both pinned and attached; take it out of one "
                             "of the two vertex groups", o, "attach_indices")
        ss = self.shrink_samples
        if ss is not None:
            if not (isinstance(ss, np.ndarray) and ss.shape == (n_frames,) and ss.dtype == np.float64):
                raise SceneError(f"{o}: shrink_samples must be a float64 array of shape ({n_frames},)", o,
                                 "shrink_samples")
            if not np.isfinite(ss).all() or (ss < -1.0).any() or (ss > 0.9).any():
                raise SceneError(f"{o}: shrink_samples must be finite and in [-1, 0.9]", o, "shrink_samples")
        sw = self.shrink_weights
        if sw is not None:
            if not (isinstance(sw, np.ndarray) and sw.shape == (n,) and sw.dtype == np.float64):
                raise SceneError(f"{o}: shrink_weights must be a float64 array of shape ({n},)", o, "shrink_weights")
            if not np.isfinite(sw).all() or (sw < 0.0).any() or (sw > 1.0).any():
                raise SceneError(f"{o}: shrink_weights must be finite and in [0, 1]", o, "shrink_weights")
        ps = self.pressure_samples
        if ps is not None:
            if not (isinstance(ps, np.ndarray) and ps.shape == (n_frames,) and ps.dtype == np.float64):
                raise SceneError(f"{o}: pressure_samples must be a float64 array of shape ({n_frames},)", o,
                                 "pressure_samples")
            rng = MATERIAL_RANGES["pressure"]
            if not all(rng.contains(float(v)) for v in ps):
                raise SceneError(f"{o}: pressure_samples must be finite and in {rng.describe()}", o, "pressure_samples")
        wm = self.world_matrices
        if wm is not None:
            if not (isinstance(wm, np.ndarray) and wm.shape == (n_frames, 4, 4) and wm.dtype == np.float64):
                raise SceneError(f"{o}: world_matrices must be a float64 array of shape ({n_frames}, 4, 4)", o,
                                 "world_matrices")
            if not np.isfinite(wm).all() or np.abs(wm).max() > MAX_COORDINATE:
                raise SceneError(f"{o}: world_matrices contain NaN, infinity or values beyond {MAX_COORDINATE:g}", o,
                                 "world_matrices")
            det = np.linalg.det(wm[:, :3, :3])
            if (np.abs(det) < 1e-30).any():
                k = int(np.nonzero(np.abs(det) < 1e-30)[0][0])
                raise SceneError(f"{o}: the world matrix of frame index {k} has zero scale, so results cannot be "
                                 "written in the object's space; give the object a non-zero Scale on every frame", o,
                                 "world_matrices")
        self._validate_shape()
        self.material.validate(o)

    def _validate_shape(self) -> None:
        """collision_shape is known and used by a stiff body only; shape arrays come in pairs, well formed."""
        o = self.name
        if self.collision_shape not in COLLISION_SHAPES:
            raise SceneError(f"{o}: unknown collision shape {self.collision_shape!r}; use one of {COLLISION_SHAPES}",
                             o, "collision_shape")
        sv, st = self.shape_vertices, self.shape_triangles
        if self.collision_shape != "mesh" and self.role != "stiff":
            raise SceneError(f"{o}: a collision shape ({self.collision_shape}) is for the Stiff role only; "
                             f"set it to Mesh or make the object Stiff", o, "collision_shape")
        if (sv is None) != (st is None):
            raise SceneError(f"{o}: shape_vertices and shape_triangles go together", o, "shape_vertices")
        if self.collision_shape == "proxy" and sv is None:
            raise SceneError(f"{o}: collision shape Proxy Object needs the proxy's mesh; pick a Proxy Object", o,
                             "shape_vertices")
        if sv is None:
            return
        if self.collision_shape == "mesh":
            raise SceneError(f"{o}: shape_vertices were sent with collision shape Mesh", o, "shape_vertices")
        if not (isinstance(sv, np.ndarray) and sv.ndim == 2 and sv.shape[1] == 3 and sv.dtype == np.float64
                and sv.shape[0] >= 4 and np.isfinite(sv).all()):
            raise SceneError(f"{o}: shape_vertices must be a finite (k >= 4, 3) float64 array", o, "shape_vertices")
        if not (isinstance(st, np.ndarray) and st.ndim == 2 and st.shape[1] == 3 and st.dtype == np.int32
                and st.shape[0] >= 4 and st.min() >= 0 and st.max() < sv.shape[0]):
            raise SceneError(f"{o}: shape_triangles must be a (t >= 4, 3) int32 array indexing shape_vertices", o,
                             "shape_triangles")


COLLISION_SHAPES = ("mesh", "convex_hull", "box", "sphere", "proxy")
"""``Body.collision_shape`` values (stiff bodies), Bullet's shapes: the body's own triangles, their convex hull,
a box, a sphere (a tessellated sphere that encloses the bounding sphere), another closed mesh."""

VERTEX_SCALES = ("stretch", "bending", "mass", "shrink")
"""Columns of ``Body.vertex_scales`` (cloth, from vertex groups): multipliers of the membrane's Young's
modulus, of the bending stiffness, of the lumped mass, and of the rest size (0.8: the cloth wants to be
20% smaller, sewing-pattern style shrinking; 1.1: it grows)."""

FIELD_WEIGHT_KINDS = ("wind", "force", "vortex", "turbulence")
"""Order of ``Body.field_weights``: Blender's Field Weights of the cloth (All times the kind's weight)."""


@dataclass(frozen=True)
class ForceField:
    """One Blender force field object (since protocol 1.5), sampled once per frame of the bake range
    like a collider: ``strength`` (F,) and ``flow`` (F,) float64 follow their keyframes, ``matrix`` (F, 4, 4)
    float64 is the object's world matrix (its origin and +Z axis orient the field).

    Falloff (Blender's ``falloff_power``, ``distance_min``/``distance_max``): at distance r (per ``shape``)
    the field is scaled by (1 + r - r_min)^-power, by 1 inside ``distance_min`` (when ``use_min``) and by 0
    beyond ``distance_max`` (when ``use_max``). ``flow`` (1/s, ``force`` only) adds the drag -flow * v per unit
    mass, pulling a vertex's velocity towards rest (Blender's Flow). Units: m/s (wind, vortex), m/s^2 (force).
    """

    name: str
    kind: str
    strength: np.ndarray
    matrix: np.ndarray
    flow: np.ndarray = field(default_factory=lambda: np.zeros(0))
    shape: str = "plane"
    falloff_power: float = 0.0
    use_min: bool = False
    distance_min: float = 0.0
    use_max: bool = False
    distance_max: float = 0.0
    size: float = 1.0      # m, turbulence feature size (Blender's Size)
    seed: int = 0          # turbulence pattern (Blender's Seed)

    def validate(self, n_frames: int) -> None:
        """Check kind, shape, array shapes and finiteness; raise SceneError naming the field object."""
        o = self.name
        if not isinstance(o, str) or not o or len(o) > MAX_NAME_LENGTH:
            raise SceneError("a force field has an empty or over-long name", "", "force_fields")
        if self.kind not in FIELD_KINDS:
            raise SceneError(f"{o}: unknown force field kind {self.kind!r}; use one of {FIELD_KINDS}", o, "kind")
        if self.shape not in FIELD_SHAPES:
            raise SceneError(f"{o}: unknown force field shape {self.shape!r}; use one of {FIELD_SHAPES}", o, "shape")
        for name, shape in (("strength", (n_frames,)), ("matrix", (n_frames, 4, 4))):
            a = getattr(self, name)
            if not (isinstance(a, np.ndarray) and a.shape == shape and a.dtype == np.float64):
                raise SceneError(f"{o}: force field {name} must be a float64 array of shape {shape}", o, name)
            if not np.isfinite(a).all() or np.abs(a).max(initial=0.0) > 1e9:
                raise SceneError(f"{o}: force field {name} contains NaN, infinity or values beyond 1e9", o, name)
        f = self.flow
        if not (isinstance(f, np.ndarray) and f.dtype == np.float64 and f.shape in ((0,), (n_frames,))):
            raise SceneError(f"{o}: force field flow must be a float64 array of shape ({n_frames},) or empty", o, "flow")
        if not np.isfinite(f).all() or (f < 0).any() or (f > 1e6).any():
            raise SceneError(f"{o}: force field flow must be finite and in [0, 1e6] 1/s", o, "flow")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2 ** 31:
            raise SceneError(f"{o}: force field seed must be a whole number in [0, 2^31)", o, "seed")
        for name, rng in (("falloff_power", Range(0.0, 100.0)), ("distance_min", Range(0.0, MAX_COORDINATE, unit="m")),
                          ("distance_max", Range(0.0, MAX_COORDINATE, unit="m")),
                          ("size", Range(0.0, MAX_COORDINATE, lo_open=True, unit="m"))):
            check_range(getattr(self, name), rng, o, name, f"{o}: force field {name}")


@dataclass(frozen=True)
class Settings:
    """Bake settings (SI units)."""

    frame_start: int = 1
    frame_end: int = 48
    fps: float = 24.0
    substeps: int = 1                  # solver steps per frame (IPC); MPM derives its own from CFL
    gravity: tuple = (0.0, 0.0, -9.81)  # m/s^2, Blender's Z up
    contact_gap: float = 1.0e-3        # m, barrier activation distance d_hat
    friction: float = 0.3              # default Coulomb coefficient for pairs (objects may override)
    newton_tol: float = 1.0e-2         # m/s, stop when ||p||_inf / h < newton_tol
    max_newton_iterations: int = 100
    backend: str = "ipc"               # one of BACKENDS; scenes with granular bodies use "mpm"
    solver_quality: str = "accurate"   # one of SOLVER_QUALITIES (IPC backend); absent on the wire: "accurate"
    integrator: str = "implicit_euler"  # one of INTEGRATORS (IPC backend, since protocol 1.4; absent: implicit_euler)
    elastic_model: str = "neo_hookean"
    mpm_domain: str = "auto"           # one of MPM_DOMAINS; absent on the wire: "box"
    domain_min: tuple = (-2.0, -2.0, 0.0)   # m, MPM domain box (walls), used when mpm_domain is "box"
    domain_max: tuple = (2.0, 2.0, 4.0)
    # Test aids honoured by the "none" backend only (tests of cancel, resume and failures):
    debug_frame_delay: float = 0.0     # s slept per frame
    debug_fail_after: int = 0          # raise SceneError after this many frames (0: never)

    @property
    def n_frames(self) -> int:
        """Number of sampled frames, frame_start..frame_end inclusive."""
        return self.frame_end - self.frame_start + 1

    @property
    def dt(self) -> float:
        """Seconds per substep."""
        return 1.0 / (self.fps * self.substeps)

    def validate(self) -> None:
        """Refuse settings outside :data:`SETTINGS_RANGES`, NaN or infinite vectors, an empty
        frame range, an inverted MPM domain and unknown names (SceneError naming the field)."""
        for name in ("frame_start", "frame_end", "substeps", "max_newton_iterations", "debug_fail_after"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise SceneError(f"Clearance Bake setting {settings_label(name)} must be a whole number, got {v!r}", "", name)
        if self.frame_end <= self.frame_start:
            raise SceneError(f"frame_end ({self.frame_end}) must be after frame_start ({self.frame_start})", "", "frame_end")
        if self.frame_end - self.frame_start > 1_000_000:
            raise SceneError(f"the frame range {self.frame_start}..{self.frame_end} is longer than 1,000,000 frames",
                             "", "frame_end")
        for name, rng in SETTINGS_RANGES.items():
            check_range(getattr(self, name), rng, "", name, f"Clearance Bake setting {settings_label(name)}")
        if self.backend not in BACKENDS:
            raise SceneError(f"unknown backend {self.backend!r}; use one of {BACKENDS}", "", "backend")
        if self.solver_quality not in SOLVER_QUALITIES:
            raise SceneError(f"unknown solver_quality {self.solver_quality!r}; use one of {SOLVER_QUALITIES} "
                             "(fast: block descent, accurate: Newton IPC)", "", "solver_quality")
        if self.integrator not in INTEGRATORS:
            raise SceneError(f"unknown integrator {self.integrator!r}; use one of {INTEGRATORS} "
                             "(implicit_euler: damps bounces, bdf2: keeps them)", "", "integrator")
        if self.mpm_domain not in MPM_DOMAINS:
            raise SceneError(f"unknown mpm_domain {self.mpm_domain!r}; use one of {MPM_DOMAINS} (auto: the "
                             "colliders' bounds plus a margin, open; box: walls at domain_min..domain_max)",
                             "", "mpm_domain")
        for name, limit in (("gravity", 1e4), ("domain_min", MAX_COORDINATE), ("domain_max", MAX_COORDINATE)):
            vec = getattr(self, name)
            try:
                ok = len(vec) == 3 and all(math.isfinite(float(c)) and abs(float(c)) <= limit for c in vec)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise SceneError(f"settings {name} must be 3 finite numbers of magnitude at most {limit:g}, got {vec!r}",
                                 "", name)
        if not all(float(a) < float(b) for a, b in zip(self.domain_min, self.domain_max)):
            raise SceneError(f"settings domain_min {self.domain_min} must be below domain_max {self.domain_max} "
                             "on every axis", "", "domain_max")
        dt = self.dt
        if not (math.isfinite(dt) and dt > 0):
            raise SceneError(f"the time step 1 / (fps * substeps) = {dt:g} s must be positive", "", "fps")


@dataclass(frozen=True)
class Scene:
    """Everything needed to bake: settings plus bodies (names unique)."""

    settings: Settings
    bodies: tuple
    name: str = "scene"
    force_fields: tuple = ()   # ForceField objects (since protocol 1.5; absent: none)

    def validate(self) -> None:
        self.settings.validate()
        if not self.bodies:
            raise SceneError("the scene has no bodies: give at least one object a Clearance role", "", "bodies")
        names = [b.name for b in self.bodies]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise SceneError(f"body names must be unique; repeated: {sorted(dup)}", sorted(dup)[0], "name")
        for b in self.bodies:
            b.validate(self.settings.n_frames)
        roles = {b.name: b.role for b in self.bodies}
        for b in self.bodies:
            if not b.attach_to:
                continue
            if b.attach_to == b.name:
                raise SceneError(f"{b.name}: an object cannot be attached to itself; pick another object in Attach To",
                                 b.name, "attach_to")
            target = roles.get(b.attach_to)
            if target is None:
                raise SceneError(f"{b.name}: Attach To names {b.attach_to!r}, which is not in the bake (give it a "
                                 "Clearance role)", b.name, "attach_to")
            if target not in ("cloth", "solid", "stiff", "collider"):
                raise SceneError(f"{b.name}: Attach To {b.attach_to!r} is a {target} object without a surface to hang "
                                 "on; attach to a cloth, solid, stiff or collider object", b.name, "attach_to")
        for f in self.force_fields:
            if not isinstance(f, ForceField):
                raise SceneError("force_fields must hold ForceField objects", "", "force_fields")
            f.validate(self.settings.n_frames)
        fnames = [f.name for f in self.force_fields]
        if len(set(fnames)) != len(fnames):
            raise SceneError("force field names must be unique", "", "force_fields")
        if self.settings.backend != "none" and all(b.role == "collider" for b in self.bodies):
            raise SceneError("every body is a collider: nothing to simulate; give an object the solid, cloth, rod, stiff or granular role", "", "bodies")

    def simulated(self) -> list:
        """Bodies whose positions the solver returns (everything but colliders)."""
        return [b for b in self.bodies if b.role != "collider"]
