"""A bake whose frames do not converge ends with a warning that names the objects, in the
operator's report and in the panel (issue 8: no more silent ``converged=False``).

Real bpy, a real solver server subprocess, the real IPC solver (Accurate with a cap of 2 Newton
iterations: a soft cube thrown at the floor cannot converge; with the default cap it can).
"""
import bpy

from conftest import addon
from helpers import cube, plane


def _scene(tmp_path, server, max_it: int, speed: float):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    box = cube("Thrown Box", size=0.2, location=(0.0, 0.0, 0.2))
    box.clearance.role = "SOLID"
    box.clearance.initial_velocity = (0.0, 0.0, -speed)
    plane("floor").clearance.role = "COLLIDER"
    s = scene.clearance
    s.backend = "ipc"
    s.solver_quality = "ACCURATE"
    s.max_newton_iterations = max_it
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")


def _bake(tmp_path):
    bs = addon("bake_session")
    session = bs.BakeSession(bpy.context.scene, addon("export").export_scene(bpy.context),
                             addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=600, log=None) == bs.DONE, session.error
    return session


def test_unconverged_frames_end_in_a_warning_naming_the_object(blender, server, tmp_path):
    _scene(tmp_path, server, max_it=2, speed=30.0)
    session = _bake(tmp_path)
    result, level, text = addon("operators").outcome(session)
    assert result == {"FINISHED"} and level == "WARNING", text
    assert "did not converge" in text and "Thrown Box" in text and "Fix:" in text
    st = bpy.context.scene.clearance
    assert st.last_warning == session.warning and "Thrown Box" in st.last_warning
    assert "with a warning" in st.status
    # the operator path reports it too (a WARNING report does not fail the operator) and Free Bake clears it
    assert bpy.ops.clearance.bake() == {"FINISHED"}
    assert "Thrown Box" in st.last_warning
    assert bpy.ops.clearance.free_bake() == {"FINISHED"} and st.last_warning == ""


def test_converged_bake_has_no_warning(blender, server, tmp_path):
    _scene(tmp_path, server, max_it=100, speed=0.0)
    session = _bake(tmp_path)
    assert session.warning == "" and bpy.context.scene.clearance.last_warning == ""
    assert addon("operators").outcome(session)[1] == "INFO"
