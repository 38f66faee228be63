"""Blender properties: ``Object.clearance`` (role and material) and ``Scene.clearance``
(bake settings and the bake's runtime status shown in the panels).

All physical quantities are SI: metres, seconds, kg/m^3, pascals. Blender's unit system
displays lengths and velocities with their units (subtype DISTANCE / VELOCITY); the other
units are spelled out in the labels. Defaults mirror ``protocol.scene.Material`` and
``protocol.scene.Settings`` so an untouched object bakes like the contract's defaults.
"""
from __future__ import annotations

import bpy
from bpy.props import (BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty,
                       IntProperty, PointerProperty, StringProperty)

ROLE_ITEMS = [
    ("NONE", "None", "Not part of the Clearance simulation"),
    ("SOLID", "Solid", "Volumetric soft body (the closed surface is tetrahedralised)"),
    ("CLOTH", "Cloth", "Thin shell simulated on the mesh's triangles"),
    ("ROD", "Rod", "Strands simulated on the mesh's edges (hair, ropes)"),
    ("STIFF", "Stiff", "Nearly rigid body (affine body dynamics)"),
    ("GRANULAR", "Granular / Fluid", "Sand, snow, water, mud or jelly: MPM particles sampled inside the closed mesh"),
    ("COLLIDER", "Collider", "Moves as animated (keyframes, deformation), pushes simulated bodies, never simulated"),
]

MODEL_ITEMS = [
    ("neo_hookean", "Neo-Hookean", "Hyperelastic, robust under large compression"),
    ("stable_neo_hookean", "Stable Neo-Hookean", "Neo-Hookean that stays stable through inversion"),
    ("fixed_corotated", "Fixed Corotated", "Corotated linear elasticity, cheap and predictable"),
    ("stvk", "St. Venant-Kirchhoff", "Linear in Green strain; soft under compression"),
]

ELEMENT_ITEMS = [
    ("linear", "Linear", "4-node tetrahedra: cheapest; bends too stiffly at coarse resolution (a beam of 20x2x2 "
     "cells sags about half as far as it should)"),
    ("quadratic", "Quadratic", "10-node tetrahedra: bends and bulges correctly at coarse resolution (within 5% of "
     "beam theory at 10x2x2 cells, also for nearly incompressible rubber and jelly); 2-10x the cost per step. "
     "Converged solver only"),
]
"""ClearanceObjectSettings.element; export sends the identifier (protocol ELEMENTS)."""

MPM_ITEMS = [
    ("sand", "Sand", "Drucker-Prager granular material"),
    ("snow", "Snow", "Elasto-plastic with hardening (compacts and breaks)"),
    ("water", "Water", "Weakly compressible fluid"),
    ("elastic", "Elastic", "Jelly: an elastic solid on the MPM grid"),
    ("mud", "Mud", "Viscoplastic (von Mises yield)"),
]

# Presets applied when the MPM material changes: density kg/m^3, Young's modulus Pa, Poisson.
MPM_PRESETS = {
    "sand": dict(density=1600.0, youngs_modulus=3.5e5, poisson_ratio=0.3, friction_angle=30.0, grain_size=1.0e-3),
    "snow": dict(density=400.0, youngs_modulus=1.4e5, poisson_ratio=0.2),
    "water": dict(density=1000.0, youngs_modulus=1.0e5, poisson_ratio=0.2, viscosity=1.0e-3),
    "elastic": dict(density=1000.0, youngs_modulus=5.0e4, poisson_ratio=0.3),
    "mud": dict(density=1800.0, youngs_modulus=2.0e5, poisson_ratio=0.3, viscosity=10.0, yield_stress=500.0),
}

STIFF_OUTPUT_ITEMS = [
    ("PC2", "Scene Output", "Write this stiff object like every other body: the scene's Output setting "
     "(a .pc2 point cache or shape keys)"),
    ("TRANSFORM", "Object Transform", "Key the object's location, rotation and scale on every frame (rotation "
     "from the polar decomposition of the body's affine map): plays and exports as plain object animation"),
]

COLLISION_SHAPE_ITEMS = [
    ("MESH", "Mesh", "Contact on the object's own surface (exact; flat regions are merged into fewer triangles, "
     "the same surface; otherwise the cost grows with its vertex count)"),
    ("CONVEX_HULL", "Convex Hull", "Contact on the convex hull of the object's vertices (computed by the solver)"),
    ("BOX", "Box", "Contact on the object's bounding box in its own axes (8 vertices: cheapest)"),
    ("SPHERE", "Sphere", "Contact on a 162-vertex icosphere enclosing the object's bounding sphere"),
    ("PROXY", "Proxy Object", "Contact on another closed mesh (e.g. a decimated copy) that covers this object"),
]
"""Collision shapes of a stiff object, as Bullet's (protocol Body.collision_shape, lower case)."""

OUTPUT_ITEMS = [
    ("PC2", "Point Cache + Mesh Cache", "One .pc2 file per object read by a Mesh Cache modifier (fast, long shots)"),
    ("SHAPE_KEYS", "Shape Keys", "One shape key per frame stored in the .blend (portable, small meshes)"),
]

BACKEND_ITEMS = [
    ("AUTO", "Auto", "MPM when any object is Granular / Fluid, IPC otherwise"),
    ("ipc", "IPC", "Incremental Potential Contact: solids, cloth, rods, stiff bodies; never intersects"),
    ("mpm", "MPM", "Material Point Method: sand, snow, water, mud"),
    ("none", "None (pass-through)", "Returns the input motion unchanged; checks the pipeline"),
]

MPM_DOMAIN_ITEMS = [
    ("AUTO", "Automatic", "The MPM grid covers the granular objects and every collider plus a margin; sand that "
     "falls past every collider falls on and leaves the simulation (counted in the frame stats)"),
    ("BOX", "Box", "Walls on the six faces of the box Domain Min..Domain Max (friction: Settings > Friction); "
     "sand piles up against them"),
]
"""Scene.clearance.mpm_domain; export sends "auto" / "box" (protocol MPM_DOMAINS)."""

SOLVER_QUALITY_ITEMS = [
    ("ACCURATE", "Converged", "Newton IPC: every step is solved until it meets the Newton Tolerance, so the motion is "
     "the physics the materials describe (drapes come to rest at their measured shape, stacks stand, boxes stick). "
     "Frames that cannot meet it are reported with the objects and the residual. The default"),
    ("FAST", "Preview", "Block descent with a fixed sweep budget: quicker on large cloth, never intersects, but its "
     "steps are NOT converged (measured: 39 mm RMS from the converged drape of a 1 m cloth), every frame is "
     "reported unconverged. For blocking out a shot, not for the final bake"),
]
"""Scene.clearance.solver_quality; export sends the lower-case identifier (protocol SOLVER_QUALITIES)."""

INTEGRATOR_ITEMS = [
    ("IMPLICIT_EULER", "Implicit Euler", "First-order implicit steps: robust, but they absorb fast motion, so a "
     "bounce loses more the fewer Substeps resolve it (a soft cube at 24 fps: restitution 0.1 / 0.25 / 0.5 / 0.65 "
     "at 1 / 4 / 16 / 64 substeps with Converged)"),
    ("BDF2", "BDF-2", "Second-order implicit steps (BDF-2): bounces and vibrations keep their energy far better and "
     "depend far less on Substeps (the same cube: 0.63 / 0.58 / 0.69 / 0.71). Same no-intersection guarantee"),
]
"""Scene.clearance.integrator; export sends "implicit_euler" / "bdf2" (protocol INTEGRATORS)."""


# Blender 4.5+ warns about "//" in path properties unless they declare blend-relative support.
_BLEND_RELATIVE = {"PATH_SUPPORTS_BLEND_RELATIVE"} if bpy.app.version >= (4, 5, 0) else set()


def _apply_mpm_preset(self, _context) -> None:
    for key, value in MPM_PRESETS.get(self.mpm_material, {}).items():
        setattr(self, key, value)


def attachable(self, obj) -> bool:
    """Attach To offers mesh objects other than the one being set up."""
    own = getattr(obj, "clearance", None)
    return obj.type == "MESH" and (own is None or own.as_pointer() != self.as_pointer())


class ClearanceObjectSettings(bpy.types.PropertyGroup):
    """Per-object role and material. Only the fields of the chosen role are shown and sent."""

    role: EnumProperty(name="Role", items=ROLE_ITEMS, default="NONE",
                       description="How the solver treats this object")
    density: FloatProperty(name="Density (kg/m³)", default=1000.0, min=1e-3, max=1e6, soft_max=20000.0,
                           description="Mass per volume in kg/m³ (cloth: times the thickness gives the areal density)")
    youngs_modulus: FloatProperty(name="Young's Modulus (Pa)", default=1.0e5, min=1.0, max=1e13, soft_max=1e10,
                                  precision=0, description="Stiffness in pascals: 1e4 jelly, 1e6 rubber, 1e9 plastic")
    poisson_ratio: FloatProperty(name="Poisson Ratio", default=0.3, min=0.0, max=0.499,
                                 description="Volume preservation, 0 to 0.5 (0.49 nearly incompressible)")
    model: EnumProperty(name="Elastic Model", items=MODEL_ITEMS, default="neo_hookean")
    element: EnumProperty(name="Element", items=ELEMENT_ITEMS, default="linear",
                          description="Finite elements of the solid's volume mesh")
    friction: FloatProperty(name="Friction", default=0.3, min=0.0, max=100.0, soft_max=2.0,
                            description="Coulomb friction coefficient against anything it touches")
    thickness: FloatProperty(name="Thickness", default=0.001, min=1e-6, max=10.0, soft_max=0.1, subtype="DISTANCE",
                             unit="LENGTH", precision=4, description="Cloth/rod thickness in metres, kept as a contact offset")
    bending_stiffness: FloatProperty(name="Bending Stiffness (N·m)", default=1.0e-4, min=0.0, max=1e6, soft_max=1.0,
                                     precision=6, description="Resistance to folding (cloth) or bending (rods), N·m")
    damping: FloatProperty(name="Damping (s)", default=0.0, min=0.0, max=100.0, soft_max=1.0, precision=4,
                           description="Rayleigh stiffness-proportional damping k_d, in seconds (Converged solver "
                                       "only; Preview refuses it): a vibration of angular frequency w loses "
                                       "exp(-pi k_d w) of its amplitude per period. Dulls wobble; at few Substeps "
                                       "it does not lower a bounce (docs/solver.md, Bounce)")
    air_drag: FloatProperty(name="Air Drag (Pa·s/m)", default=0.0, min=0.0, max=1e4, soft_max=10.0, precision=3,
                            description="Air pushing on each face against its motion across it, in pascals "
                                        "per m/s of the face's speed through the air along its normal (a sheet "
                                        "falling flat feels it, edge-on hardly). A sheet of areal density rho_A "
                                        "falls at most rho_A g / Air Drag m/s; about 1 behaves like cloth in air. "
                                        "Solid and Stiff: on every face of the surface; Rod: across each segment "
                                        "(per m of length and m of thickness). Wind, Vortex and Turbulence fields "
                                        "act through it (0: the wind has no effect). Converged solver only")
    pressure: FloatProperty(name="Pressure (Pa)", default=0.0, min=-1e7, max=1e7, soft_min=-1e4, soft_max=1e4, precision=1,
                            description="Closed cloth: pressure inside minus outside, in pascals; inflates cushions "
                                        "and balloons (a sphere of radius R grows by dR/R = p R (1 - nu) / (2 E t)). "
                                        "Converged solver only")
    sewing: FloatProperty(name="Sewing (N/m)", default=0.0, min=0.0, max=1e9, soft_max=1000.0, precision=2,
                          description="Cloth: the mesh's loose edges (edges of no face) are seams; each pulls its two "
                                      "vertices together with this stiffness in N/m until the panels meet (they then "
                                      "hold at the contact gap, never crossing). 0: loose edges are ignored. "
                                      "Converged solver only")
    stiffness_group: StringProperty(name="Stiffness Group",
                                    description="Cloth: vertex group scaling the stretch stiffness (Young's "
                                                "modulus) from 1x at weight 0 to Stiffness Factor at weight 1")
    stiffness_group_factor: FloatProperty(name="Stiffness Factor", default=10.0, min=0.0, soft_max=100.0,
                                          description="Stretch stiffness multiplier at vertex-group weight 1")
    bending_group: StringProperty(name="Bending Group",
                                  description="Cloth: vertex group scaling the bending stiffness from 1x at weight "
                                              "0 to Bending Factor at weight 1")
    bending_group_factor: FloatProperty(name="Bending Factor", default=10.0, min=0.0, soft_max=100.0,
                                        description="Bending stiffness multiplier at vertex-group weight 1")
    mass_group: StringProperty(name="Mass Group",
                               description="Cloth: vertex group scaling the mass from 1x at weight 0 to Mass "
                                           "Factor at weight 1 (weighted hems, beads)")
    mass_group_factor: FloatProperty(name="Mass Factor", default=2.0, min=1e-3, soft_max=100.0,
                                     description="Mass multiplier at vertex-group weight 1")
    shrink: FloatProperty(name="Shrink", default=0.0, min=-1.0, max=0.9, precision=3,
                          description="Cloth: how much smaller the cloth wants to be (0.1: 10% smaller, negative: "
                                      "it grows), everywhere or, with a Shrink Group, times the group's weight")
    shrink_group: StringProperty(name="Shrink Group", description="Cloth: vertex group weighting Shrink")
    field_weights: FloatVectorProperty(name="Field Weights", size=4, default=(1.0, 1.0, 1.0, 1.0), soft_min=0.0,
                                       soft_max=1.0,
                                       description="How strongly the scene's Wind, Force, Vortex and Turbulence fields act on "
                                                   "this object (Blender's cloth Field Weights)")
    mpm_material: EnumProperty(name="Material", items=MPM_ITEMS, default="sand", update=_apply_mpm_preset,
                               description="MPM constitutive model; choosing one applies its preset values")
    friction_angle: FloatProperty(name="Friction Angle (°)", default=30.0, min=0.0, max=89.0,
                                  description="Sand's internal friction angle in degrees (pile slope)")
    particle_spacing: FloatProperty(name="Particle Spacing", default=0.02, min=1e-4, max=10.0, soft_max=0.2, subtype="DISTANCE",
                                    unit="LENGTH", precision=4, description="Distance between sampled particles in metres")
    grain_size: FloatProperty(name="Grain Size", default=1.0e-3, min=0.0, max=1.0, soft_max=0.01, subtype="DISTANCE",
                              unit="LENGTH", precision=4,
                              description="Sand grain diameter in metres for the rate-dependent friction mu(I): "
                                          "fast-flowing sand grips harder and stops more abruptly. 0: "
                                          "rate-independent friction")
    viscosity: FloatProperty(name="Viscosity (Pa·s)", default=0.0, min=0.0, max=1e9, soft_max=100.0, precision=4)
    yield_stress: FloatProperty(name="Yield Stress (Pa)", default=1.0e3, min=0.0, max=1e12, soft_max=1e5)
    initial_velocity: FloatVectorProperty(name="Initial Velocity", size=3, default=(0.0, 0.0, 0.0),
                                          subtype="VELOCITY", unit="VELOCITY",
                                          description="World-space velocity at the start frame, m/s")
    stiff_output: EnumProperty(name="Output", items=STIFF_OUTPUT_ITEMS, default="PC2",
                               description="How the bake comes back for this stiff object")
    collision_shape: EnumProperty(name="Collision Shape", items=COLLISION_SHAPE_ITEMS, default="MESH",
                                  description="Stiff: the surface contact, friction and the no-intersection "
                                              "guarantee are computed on; the object follows it rigidly")
    collision_proxy: PointerProperty(name="Proxy Object", type=bpy.types.Object,
                                     poll=lambda self, ob: ob.type == "MESH",
                                     description="Closed mesh used as this stiff object's collision shape (read "
                                                 "in world space at the start frame; it should cover the object)")
    pin_group: StringProperty(name="Pin Group",
                              description="Vertex group whose vertices (weight > 0.5) are held in place")
    pin_follows: BoolProperty(name="Pins Follow Animation", default=False,
                              description="Pinned vertices follow the object's animation/deformation instead of staying put")
    attach_to: PointerProperty(type=bpy.types.Object, name="Attach To", poll=attachable,
                               description="Cloth, Solid or Rod: hang the Attach Group's vertices on this object's "
                                           "surface (the nearest point at the start frame), carried by its motion: "
                                           "a cloth or soft body's deformation, a stiff body's flight, a collider's "
                                           "keyframes. The object needs a Clearance role. Converged solver only")
    attach_group: StringProperty(name="Attach Group",
                                 description="Vertex group whose vertices (weight > 0.5) hang on Attach To")

    @classmethod
    def register(cls) -> None:
        bpy.types.Object.clearance = PointerProperty(type=cls, name="Clearance")

    @classmethod
    def unregister(cls) -> None:
        del bpy.types.Object.clearance


class ClearanceSceneSettings(bpy.types.PropertyGroup):
    """Bake settings of a scene plus the runtime status the Bake panel shows."""

    use_scene_range: BoolProperty(name="Use Scene Frame Range", default=True,
                                  description="Bake the scene's frame range; off: use Start/End below")
    frame_start: IntProperty(name="Start", default=1, description="First frame (the initial state)")
    frame_end: IntProperty(name="End", default=48, description="Last frame baked")
    substeps: IntProperty(name="Substeps", default=1, min=1, max=1000, soft_max=32,
                          description="Solver steps per frame (IPC; MPM chooses its own from the CFL condition). "
                                      "Implicit Euler steps absorb bounces: a soft cube dropped at 24 fps bounces "
                                      "back with restitution 0.2 / 0.47 / 0.49 at 1 / 4 / 16 substeps with Preview, "
                                      "0.1 / 0.25 / 0.5 / 0.65 at 1 / 4 / 16 / 64 with Converged; for lively impacts "
                                      "set Integrator to BDF-2 (0.5 / 0.7 / 0.75 Preview, 0.63 / 0.58 / 0.69 / 0.71 "
                                      "Converged) or raise Substeps")
    use_force_fields: BoolProperty(name="Force Fields", default=True,
                                   description="Send the scene's Wind, Force, Vortex and Turbulence field objects to the solver "
                                               "(Converged solver only; strength, flow and transform follow their "
                                               "keyframes). Other field types are ignored")
    solver_quality: EnumProperty(name="Solver Quality", items=SOLVER_QUALITY_ITEMS, default="ACCURATE",
                                 description="How the IPC solver works each step. Both never let surfaces "
                                             "intersect; Converged solves every step to the Newton Tolerance, "
                                             "Preview stops at a sweep budget (not converged)")
    integrator: EnumProperty(name="Integrator", items=INTEGRATOR_ITEMS, default="IMPLICIT_EULER",
                             description="How the IPC solver steps through time. BDF-2 keeps bounces lively "
                                         "whatever the Substeps; Implicit Euler damps them, more so at few "
                                         "Substeps. Both never let surfaces intersect")
    mpm_domain: EnumProperty(name="MPM Domain", items=MPM_DOMAIN_ITEMS, default="AUTO",
                             description="Where the MPM simulation ends: open, around the colliders (Automatic), "
                                         "or a walled box")
    domain_min: FloatVectorProperty(name="Domain Min", size=3, default=(-2.0, -2.0, 0.0), subtype="TRANSLATION",
                                    unit="LENGTH", description="Lower corner of the walled MPM box, world space (m)")
    domain_max: FloatVectorProperty(name="Domain Max", size=3, default=(2.0, 2.0, 4.0), subtype="TRANSLATION",
                                    unit="LENGTH", description="Upper corner of the walled MPM box, world space (m)")
    use_scene_gravity: BoolProperty(name="Use Scene Gravity", default=True,
                                    description="Use the scene's gravity (Scene > Gravity)")
    gravity: FloatVectorProperty(name="Gravity (m/s²)", size=3, default=(0.0, 0.0, -9.81),
                                 subtype="ACCELERATION", unit="ACCELERATION")
    contact_gap: FloatProperty(name="Contact Gap", default=1.0e-3, min=1e-6, max=10.0, soft_max=0.05, subtype="DISTANCE",
                               unit="LENGTH", precision=4,
                               description="Distance (m) at which contact forces start: surfaces stay at least this close apart")
    friction: FloatProperty(name="Friction", default=0.3, min=0.0, max=100.0, soft_max=2.0,
                            description="Default Coulomb friction for contacts")
    newton_tol: FloatProperty(name="Newton Tolerance (m/s)", default=1.0e-2, min=1e-8, max=1e6, soft_max=1.0, precision=5,
                              description="A step stops when its largest velocity change is below this, m/s")
    max_newton_iterations: IntProperty(name="Max Newton Iterations", default=100, min=1, max=1_000_000, soft_max=1000,
                                       description="Newton iterations a step may take; a step that reaches this stops and "
                                                   "is reported unconverged, naming its objects. Cloth and soft bodies "
                                                   "converge in 2-40; a pour of hundreds of stiff props can need 100-800")
    output: EnumProperty(name="Output", items=OUTPUT_ITEMS, default="PC2")
    backend: EnumProperty(name="Solver", items=BACKEND_ITEMS, default="AUTO")
    server_address: StringProperty(name="Server",
                                   description="tcp://host:port of a running server; empty: the add-on preferences decide")
    cache_folder: StringProperty(name="Cache Folder", default="//clearance_cache/", subtype="DIR_PATH",
                                 options=_BLEND_RELATIVE,
                                 description="Where .pc2 files and the server's frame cache go (// = beside the .blend)")
    # Runtime status, written by the bake and shown by the panel.
    is_baking: BoolProperty(name="Baking", default=False, options={"SKIP_SAVE"})
    progress: FloatProperty(name="Progress", default=0.0, min=0.0, max=1.0, subtype="FACTOR", options={"SKIP_SAVE"})
    status: StringProperty(name="Status", default="")
    last_error: StringProperty(name="Last Error", default="")
    last_warning: StringProperty(name="Last Warning", default="",
                                 description="Frames of the last bake whose solver did not converge, the objects "
                                             "involved and the likely cause")
    job_id: StringProperty(name="Job", default="")
    frames_baked: IntProperty(name="Frames Baked", default=0,
                              description="Frames in the cache, start frame included")

    @classmethod
    def register(cls) -> None:
        bpy.types.Scene.clearance = PointerProperty(type=cls, name="Clearance")

    @classmethod
    def unregister(cls) -> None:
        del bpy.types.Scene.clearance


_classes = (ClearanceObjectSettings, ClearanceSceneSettings)


def register() -> None:
    for c in _classes:
        bpy.utils.register_class(c)


def unregister() -> None:
    for c in reversed(_classes):
        bpy.utils.unregister_class(c)
