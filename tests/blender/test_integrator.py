"""Scene.clearance.integrator (Implicit Euler / BDF-2, Settings.integrator) in real Blender: the
property, its row in the bake settings, the exported Settings, and bakes through a real server in
which the choice reaches the solver: the same soft cube dropped on a floor bounces back far higher
with BDF-2 than with implicit Euler at 1 substep (docs/solver.md, "Bounce")."""
import json
import os

import bpy
import numpy as np
import pytest

import addon_env
from conftest import addon
from helpers import cube, plane
from test_addon_solver_quality import _RecordingLayout


def test_property_defaults_to_implicit_euler_and_matches_the_protocol(blender):
    prop = bpy.context.scene.clearance.bl_rna.properties["integrator"]
    assert prop.type == "ENUM" and prop.default == "IMPLICIT_EULER"
    items = {i.identifier: i for i in prop.enum_items}
    from protocol.scene import INTEGRATORS
    assert tuple(k.lower() for k in items) == INTEGRATORS
    assert items["BDF2"].name == "BDF-2" and "Substeps" in items["BDF2"].description


@pytest.mark.parametrize("backend, active", [("AUTO", True), ("ipc", True), ("mpm", False)])
def test_bake_settings_panel_shows_it_after_the_solver_quality(blender, backend, active):
    bpy.context.scene.clearance.backend = backend
    log = []
    bpy.types.CLEARANCE_PT_bake_settings.draw(type("P", (), {"layout": _RecordingLayout(log)})(), bpy.context)
    names = [n for n, _, _ in log]
    i = names.index("integrator")
    assert names[i - 1] == "solver_quality" and log[i][1] is active


def _drop_scene(tmp_path, server, integrator: str):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 19
    box = cube("jelly", size=0.2, location=(0, 0, 0.3))
    box.clearance.role = "SOLID"
    box.clearance.youngs_modulus = 1.0e5
    box.clearance.friction = 0.0
    plane("floor", size=2.0).clearance.role = "COLLIDER"
    s = scene.clearance
    s.solver_quality = "ACCURATE"
    s.integrator = integrator
    s.server_address = server.address
    s.cache_folder = str(tmp_path / integrator)
    addon("preferences").get().timeout = 60.0
    return scene


def _first_bounce(zc: np.ndarray, drop: float) -> float:
    k = next(i for i in range(len(zc) - 1) if zc[i + 1] > zc[i]) if np.any(np.diff(zc) > 0) else len(zc) - 1
    j = k
    while j + 1 < len(zc) and zc[j + 1] >= zc[j]:
        j += 1
    return float(np.sqrt(max(zc[j] - zc[k], 0.0) / (drop - zc[k])))


def test_the_choice_reaches_the_solver(blender, server, tmp_path):
    from protocol.pc2 import read_pc2
    e = {}
    for integ in ("IMPLICIT_EULER", "BDF2"):
        addon_env.reset()                            # an empty scene, add-on enabled
        scene = _drop_scene(tmp_path, server, integ)
        sent = addon("export").export_scene(bpy.context).scene
        assert sent.settings.integrator == integ.lower()
        assert bpy.ops.clearance.bake() == {"FINISHED"}, scene.clearance.last_error
        with open(os.path.join(str(tmp_path / integ), "server", "scene.json")) as f:
            from solver_server.runtime.cache import scene_hash
            assert json.load(f)["scene_hash"] == scene_hash(sent)
        local, _, _ = read_pc2(os.path.join(str(tmp_path / integ), "jelly.pc2"))
        z = local[:, :, 2] + 0.3                     # object-local -> world (translation only)
        assert z.min() > 0.0                          # never below the floor
        e[integ] = _first_bounce(z.mean(axis=1), 0.3)
    # measured: 0.1 (implicit Euler) and 0.6 (BDF-2), as scripts/measure_bounce.py's 2x2x2 cube
    assert e["IMPLICIT_EULER"] < 0.25 and e["BDF2"] > 0.45, e
