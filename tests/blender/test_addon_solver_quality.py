"""Scene.clearance.solver_quality in real Blender: the property, its panel row, the exported
Settings, a bake through a real server, and the farm script's --solver-quality."""
import dataclasses
import json
import os
import subprocess
import sys

import bpy
import pytest

import addon_env
from conftest import addon
from helpers import cube

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _solid_scene(tmp_path=None, server=None):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    ob = cube("box", location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    s = scene.clearance
    if server is not None:
        s.backend = "none"
        s.server_address = server.address
        s.cache_folder = str(tmp_path / "cache")
    return scene


def _server_scene_hash(cache_folder) -> str:
    with open(os.path.join(str(cache_folder), "server", "scene.json")) as f:
        return json.load(f)["scene_hash"]


def _hash(scene) -> str:
    from solver_server.runtime.cache import scene_hash
    return scene_hash(scene)


def _with_quality(scene, q):
    return dataclasses.replace(scene, settings=dataclasses.replace(scene.settings, solver_quality=q))


def test_property_exists_defaults_to_converged_and_explains_both(blender):
    prop = bpy.context.scene.clearance.bl_rna.properties["solver_quality"]
    assert prop.type == "ENUM" and prop.default == "ACCURATE"
    items = {i.identifier: i for i in prop.enum_items}
    assert list(items) == ["ACCURATE", "FAST"]
    assert items["FAST"].name == "Preview" and items["ACCURATE"].name == "Converged"
    assert "Block descent" in items["FAST"].description and "NOT converged" in items["FAST"].description
    assert "Newton IPC" in items["ACCURATE"].description and "Newton Tolerance" in items["ACCURATE"].description
    assert bpy.context.scene.clearance.solver_quality == "ACCURATE"
    from protocol import SOLVER_QUALITIES
    assert {k.lower() for k in items} == set(SOLVER_QUALITIES)


def test_export_carries_the_chosen_value(blender):
    scene = _solid_scene()
    export = addon("export").export_scene
    assert export(bpy.context).scene.settings.solver_quality == "accurate"
    scene.clearance.solver_quality = "FAST"
    st = export(bpy.context).scene.settings
    assert st.solver_quality == "fast" and st.backend == "ipc"
    st.validate()


def test_the_choice_is_saved_in_the_blend_file(blender, tmp_path):
    _solid_scene().clearance.solver_quality = "FAST"
    path = str(tmp_path / "q.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    addon_env.reset()                                   # factory settings, add-on enabled again
    assert bpy.context.scene.clearance.solver_quality == "ACCURATE"
    bpy.ops.wm.open_mainfile(filepath=path)
    assert bpy.context.scene.clearance.solver_quality == "FAST"


class _RecordingLayout:
    """Stands in for UILayout, which needs a window: bpy in background mode has none, so the
    panel's draw() is run against this and the rows it asks for are recorded in order."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False
        self.enabled = True
        self.active = True

    def _child(self, *a, **k):
        return _RecordingLayout(self.log)

    row = column = box = split = _child

    def prop(self, data, name, **kw):
        self.log.append((name, self.active, kw.get("expand", False)))

    def label(self, *a, **k):
        pass

    def operator(self, *a, **k):
        return type("Op", (), {})()


@pytest.mark.parametrize("backend, active", [("AUTO", True), ("ipc", True), ("mpm", False), ("none", False)])
def test_bake_settings_panel_shows_it_right_after_substeps(blender, backend, active):
    bpy.context.scene.clearance.backend = backend
    log = []
    panel = bpy.types.CLEARANCE_PT_bake_settings
    panel.draw(type("P", (), {"layout": _RecordingLayout(log)})(), bpy.context)
    names = [n for n, _, _ in log]
    i = names.index("solver_quality")
    assert names[i - 1] == "substeps"
    assert log[i][1] is active and log[i][2] is True   # greyed out when the backend ignores it; buttons


@pytest.mark.parametrize("backend, active", [("AUTO", True), ("ipc", True), ("mpm", False)])
def test_bake_settings_panel_shows_max_newton_iterations_after_the_tolerance(blender, backend, active):
    """The step's iteration budget is reachable from the panel (a pour of stiff props needs more than the default),
    right under Newton Tolerance, greyed out when the backend does not run Newton."""
    bpy.context.scene.clearance.backend = backend
    log = []
    bpy.types.CLEARANCE_PT_bake_settings.draw(type("P", (), {"layout": _RecordingLayout(log)})(), bpy.context)
    names = [n for n, _, _ in log]
    i = names.index("max_newton_iterations")
    assert names[i - 1] == "newton_tol"
    assert log[i][1] is active


class _LabelLayout(_RecordingLayout):
    """_RecordingLayout that also records the text of every label, as ("label: <text>", active, False)."""

    def _child(self, *a, **k):
        return _LabelLayout(self.log)

    row = column = box = split = _child

    def label(self, *a, **k):
        self.log.append(("label: " + k.get("text", ""), self.active, False))


@pytest.mark.parametrize("quality", ["ACCURATE", "FAST"])
def test_panel_says_what_the_quality_guarantees(blender, quality):
    """Under the buttons: Converged says every step meets Newton Tolerance; Preview says its steps are not
    converged and prints its measured distance from the converged answer (protocol PREVIEW_ERROR)."""
    from protocol.scene import PREVIEW_ERROR
    s = bpy.context.scene.clearance
    s.backend, s.solver_quality = "AUTO", quality
    log = []
    bpy.types.CLEARANCE_PT_bake_settings.draw(type("P", (), {"layout": _LabelLayout(log)})(), bpy.context)
    text = " | ".join(n for n, _, _ in log if n.startswith("label: "))
    assert "No intersection" in text
    if quality == "FAST":
        assert "not converged" in text and PREVIEW_ERROR.split(" (")[0] in text and "mm RMS" in text
    else:
        assert "converged to Newton Tolerance" in text and "not converged" not in text


def test_bake_through_the_server_sends_the_chosen_value(blender, server, tmp_path):
    scene = _solid_scene(tmp_path, server)
    scene.clearance.solver_quality = "ACCURATE"
    assert bpy.ops.clearance.bake() == {"FINISHED"}
    sent = addon("export").export_scene(bpy.context).scene
    assert sent.settings.solver_quality == "accurate"
    digest = _server_scene_hash(tmp_path / "cache")
    assert digest == _hash(sent) and digest != _hash(_with_quality(sent, "fast"))
    # Resume after switching quality is refused: the server holds a bake of another scene.
    scene.clearance.solver_quality = "FAST"
    with pytest.raises(RuntimeError):
        bpy.ops.clearance.bake(resume=True)
    assert "different scene" in scene.clearance.last_error


def test_bake_blend_script_overrides_the_files_quality(blender, server, tmp_path):
    _solid_scene(tmp_path, server).clearance.solver_quality = "FAST"   # saved asking for the Preview solver
    src = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=src)
    out = str(tmp_path / "out" / "shot_baked.blend")
    os.makedirs(os.path.dirname(out))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bake_blend.py"), src, "--out", out,
                        "--server", server.address, "--solver-quality", "accurate"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    bpy.ops.wm.open_mainfile(filepath=out)
    assert bpy.context.scene.clearance.solver_quality == "ACCURATE"   # the output records it
    sent = addon("export").export_scene(bpy.context).scene
    assert _server_scene_hash(tmp_path / "cache") == _hash(sent)        # ... and the server baked it
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "bake_blend.py"), src, "--out", out,
                        "--solver-quality", "medium"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--solver-quality" in r.stderr
