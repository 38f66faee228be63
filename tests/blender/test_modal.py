"""The UI (modal) bake path, headless.

Timers never fire in the bpy module and Blender cannot construct Event objects, so the modal
operator's logic lives in ``operators.modal_event`` / ``tick`` / ``outcome`` and the operator only
forwards ``event.type`` and ``event.value``. These tests drive exactly that logic with a real
session on a real server, the way the 0.1 s timer would, and cancel through the Cancel operator
and through Esc. The pass-through backend's ``debug_frame_delay`` keeps the bake slow enough to
cancel mid-way.
"""
import dataclasses
import os
import time

import bpy
import numpy as np

from conftest import addon
from helpers import cube, make_linear, world_positions

FRAMES = (1, 12)


def _scene(tmp_path, server):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES
    ob = cube("box", size=1.0, location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    ob.keyframe_insert("location", index=2, frame=FRAMES[0])
    ob.location.z = 3.0
    ob.keyframe_insert("location", index=2, frame=FRAMES[1])
    make_linear(ob)
    s = scene.clearance
    s.backend = "none"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    return ob


def _ui_bake(tmp_path, delay=0.15):
    """What CLEARANCE_OT_bake.execute does in the UI before the timer takes over."""
    ops = addon("operators")
    ex = addon("export").export_scene(bpy.context)
    ex.scene = dataclasses.replace(ex.scene, settings=dataclasses.replace(ex.scene.settings, debug_frame_delay=delay))
    session = addon("bake_session").BakeSession(bpy.context.scene, ex, ops.connect(bpy.context),
                                                str(tmp_path / "cache"), "PC2")
    session.start()
    ops.register_ui_session(bpy.context.scene, session)
    return ops, session


def _timer_until(ops, session, done, timeout=30.0) -> bool:
    """Send TIMER events every 0.1 s until ``done()`` or the bake ends; False when it ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not ops.modal_event(bpy.context, session, "TIMER", "NOTHING"):
            return False
        if done():
            return True
        time.sleep(0.1)
    raise AssertionError("the modal bake neither progressed nor ended")


def test_modal_ticks_bake_and_cancel_operator_stops_mid_bake(blender, server, tmp_path):
    ob = _scene(tmp_path, server)
    expected = {f: world_positions(ob, f) for f in range(FRAMES[0], FRAMES[1] + 1)}
    ops, session = _ui_bake(tmp_path)
    st = bpy.context.scene.clearance
    assert st.is_baking and bpy.ops.clearance.cancel.poll()
    assert not bpy.ops.clearance.bake.poll()           # no second bake while one runs
    assert _timer_until(ops, session, lambda: (session.last_frame or 0) >= 4)
    assert st.status.startswith(("Frame", "Solving")) and 0.2 < st.progress < 1.0
    assert ob.modifiers[-1].name == "Clearance Cache"   # frames appear while baking

    assert bpy.ops.clearance.cancel() == {"FINISHED"}
    assert not _timer_until(ops, session, lambda: False)
    result, level, text = ops.outcome(session)
    assert result == {"FINISHED"} and level == "WARNING" and "Cancelled" in text
    assert ops.ui_session(bpy.context.scene) is None and not bpy.ops.clearance.cancel.poll()
    assert not st.is_baking and bpy.ops.clearance.bake.poll()
    from protocol.pc2 import read_pc2
    kept, _, _ = read_pc2(os.path.join(str(tmp_path / "cache"), "box.pc2"))
    assert 4 <= kept.shape[0] < 12
    for f in range(1, kept.shape[0] + 1):              # the cancelled bake's frames play back
        assert np.abs(world_positions(ob, f) - expected[f]).max() < 1e-5, f


def test_modal_escape_cancels_and_other_events_pass_through(blender, server, tmp_path):
    _scene(tmp_path, server)
    ops, session = _ui_bake(tmp_path)
    assert _timer_until(ops, session, lambda: (session.last_frame or 0) >= 2)
    assert ops.modal_event(bpy.context, session, "MOUSEMOVE", "NOTHING")  # ignored, bake goes on
    frame = session.last_frame
    assert ops.modal_event(bpy.context, session, "ESC", "PRESS")          # ends when the server confirms
    assert not _timer_until(ops, session, lambda: False)
    assert session.state == addon("bake_session").CANCELLED
    assert frame <= session.last_frame < FRAMES[1]
    assert ops.outcome(session)[1] == "WARNING"


def test_modal_ticks_run_a_bake_to_the_end(blender, server, tmp_path):
    _scene(tmp_path, server)
    ops, session = _ui_bake(tmp_path, delay=0.0)
    assert not _timer_until(ops, session, lambda: False)
    result, level, text = ops.outcome(session)
    assert result == {"FINISHED"} and level == "INFO" and "1–12" in text
    assert bpy.context.scene.clearance.frames_baked == 12 and bpy.context.scene.clearance.progress == 1.0


def test_invoke_in_background_mode_runs_to_completion(blender, server, tmp_path):
    ob = _scene(tmp_path, server)
    assert bpy.app.background
    assert bpy.ops.clearance.bake("INVOKE_DEFAULT") == {"FINISHED"}
    st = bpy.context.scene.clearance
    assert st.frames_baked == 12 and not st.is_baking and st.status.startswith("Baked")
    assert addon("operators").ui_session(bpy.context.scene) is None
    assert ob.modifiers[-1].name == "Clearance Cache"
