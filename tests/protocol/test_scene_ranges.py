"""Issue 8 item 9 (unit level): NaN, infinite and absurd material and settings values are refused
by ``Scene.validate`` with a SceneError naming the object and the field, before any solve."""
import dataclasses
import math

import numpy as np
import pytest

from protocol.scene import MATERIAL_RANGES, SETTINGS_RANGES, SceneError, material_label, settings_label
from scenes import make_scene

NAN, INF = float("nan"), float("inf")

BAD_MATERIAL = [
    ("density", 0.0), ("density", -1000.0), ("density", NAN), ("density", INF), ("density", 1e7),
    ("youngs_modulus", 0.0), ("youngs_modulus", -1e5), ("youngs_modulus", NAN), ("youngs_modulus", 1e30),
    ("poisson_ratio", 0.5), ("poisson_ratio", 0.7), ("poisson_ratio", -0.1), ("poisson_ratio", NAN),
    ("thickness", -0.001), ("thickness", 0.0), ("thickness", NAN),
    ("bending_stiffness", NAN), ("bending_stiffness", -1e-4), ("bending_stiffness", INF),
    ("friction", -0.1), ("friction", NAN), ("damping", -1.0), ("damping", NAN),
    ("friction_angle", NAN), ("friction_angle", 90.0), ("friction_angle", -5.0),
    ("particle_spacing", 0.0), ("particle_spacing", NAN), ("hardening", NAN), ("critical_compression", -1.0),
    ("critical_stretch", NAN), ("viscosity", -1.0), ("viscosity", INF), ("yield_stress", NAN),
]

BAD_SETTINGS = [
    ("fps", 0.0), ("fps", -24.0), ("fps", NAN), ("fps", INF),
    ("substeps", 0), ("substeps", -3), ("substeps", 2.5), ("substeps", True), ("substeps", 1001),
    ("contact_gap", 0.0), ("contact_gap", -1e-3), ("contact_gap", NAN),
    ("friction", NAN), ("friction", -1.0), ("newton_tol", 0.0), ("newton_tol", NAN), ("newton_tol", -1.0),
    ("max_newton_iterations", 0), ("gravity", (0.0, NAN, -9.81)), ("gravity", (0.0, 0.0, -1e9)),
    ("domain_min", (0.0, 0.0, INF)), ("domain_max", (-3.0, 2.0, 4.0)), ("frame_end", 2),
    ("debug_frame_delay", -1.0), ("debug_fail_after", -1),
]


def _with_material(scene, i, **kw):
    bodies = list(scene.bodies)
    bodies[i] = dataclasses.replace(bodies[i], material=dataclasses.replace(bodies[i].material, **kw))
    return dataclasses.replace(scene, bodies=tuple(bodies))


@pytest.mark.parametrize("field, value", BAD_MATERIAL)
def test_bad_material_is_refused_naming_object_and_field(field, value):
    scene = _with_material(make_scene(), 1, **{field: value})
    with pytest.raises(SceneError) as e:
        scene.validate()
    assert e.value.obj == scene.bodies[1].name and e.value.field == field
    assert scene.bodies[1].name in str(e.value) and material_label(field) in str(e.value)


@pytest.mark.parametrize("field, value", BAD_SETTINGS)
def test_bad_settings_are_refused_naming_the_field(field, value):
    scene = make_scene(frame_start=3)
    scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, **{field: value}))
    with pytest.raises(SceneError) as e:
        scene.validate()
    assert e.value.field == field and e.value.obj == ""
    assert settings_label(field) in str(e.value) or field == "frame_end"


@pytest.mark.parametrize("velocity", [(1e9, 0.0, 0.0), (0.0, NAN, 0.0), (0.0, 0.0, -INF)])
def test_absurd_initial_velocity_is_refused(velocity):
    scene = make_scene()
    bodies = list(scene.bodies)
    bodies[0] = dataclasses.replace(bodies[0], initial_velocity=velocity)
    with pytest.raises(SceneError) as e:
        dataclasses.replace(scene, bodies=tuple(bodies)).validate()
    assert (e.value.obj, e.value.field) == (bodies[0].name, "initial_velocity")


def test_far_away_vertices_are_refused():
    scene = make_scene()
    bodies = list(scene.bodies)
    bodies[0] = dataclasses.replace(bodies[0], vertices=bodies[0].vertices + 1e7)
    with pytest.raises(SceneError) as e:
        dataclasses.replace(scene, bodies=tuple(bodies)).validate()
    assert (e.value.obj, e.value.field) == (bodies[0].name, "vertices")


def test_the_defaults_and_the_range_edges_are_accepted():
    make_scene().validate()
    for field, rng in MATERIAL_RANGES.items():       # every closed bound is a valid value
        for edge, is_open in ((rng.lo, rng.lo_open), (rng.hi, rng.hi_open)):
            if not is_open:
                _with_material(make_scene(), 1, **{field: float(edge)}).validate()
    for field, rng in SETTINGS_RANGES.items():
        if not rng.hi_open and math.isfinite(rng.hi) and field not in ("debug_frame_delay",):
            value = int(rng.hi) if isinstance(make_scene().settings.__dict__[field], int) else float(rng.hi)
            scene = make_scene()
            dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, **{field: value})).validate()
    scene = make_scene()
    bodies = (dataclasses.replace(scene.bodies[0], initial_velocity=(999.0, 0.0, 0.0)),) + scene.bodies[1:]
    dataclasses.replace(scene, bodies=bodies).validate()
    assert np.isfinite(make_scene().settings.dt)


def test_a_refused_modulus_is_named_as_the_panel_names_it():
    """Issue 20 item 9: 1e15 Pa used to come back as 'material youngs_modulus must be ...', a name the
    user never sees; the message now says what the panel calls it and what to do, in one line."""
    scene = _with_material(make_scene(), 1, youngs_modulus=1e15)
    with pytest.raises(SceneError) as e:
        scene.validate()
    msg = str(e.value)
    assert msg.startswith(f"{scene.bodies[1].name}: Young's Modulus (stiffness) must be a finite number in (0, 1e+13] Pa")
    assert "youngs_modulus" not in msg and "\n" not in msg and e.value.field == "youngs_modulus"


def test_too_many_substeps_are_refused_in_one_line_naming_the_setting():
    """Issue 20 item 10: substeps up to 1e5 used to be accepted (one frame over 90 s)."""
    scene = make_scene()
    scene = dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, substeps=100_000))
    with pytest.raises(SceneError) as e:
        scene.validate()
    msg = str(e.value)
    assert msg.startswith("Clearance Bake setting Substeps must be a finite number in [1, 1000] steps per frame")
    assert "\n" not in msg and e.value.field == "substeps"
