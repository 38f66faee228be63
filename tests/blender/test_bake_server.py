"""Full bakes through a real solver server subprocess (backend "none": the input motion comes back)."""
import dataclasses
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, make_linear, plane, world_positions


def _animated_scene(tmp_path, server, frames=(1, 8)):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames
    ob = cube("box", size=1.0, location=(0, 0, 1))
    ob.modifiers.new("twist", "SIMPLE_DEFORM").angle = 0.0
    ob.clearance.role = "SOLID"
    ob.location.z = 1.0
    ob.keyframe_insert("location", index=2, frame=frames[0])
    ob.location.z = 3.0
    ob.keyframe_insert("location", index=2, frame=frames[1])
    tw = ob.modifiers["twist"]
    tw.keyframe_insert("angle", frame=frames[0])
    tw.angle = 1.0
    tw.keyframe_insert("angle", frame=frames[1])
    make_linear(ob)
    s = scene.clearance
    s.backend = "none"
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    expected = {f: world_positions(ob, f) for f in range(frames[0], frames[1] + 1)}
    return ob, expected


def test_bake_operator_blocking_returns_the_animation(blender, server, tmp_path):
    ob, expected = _animated_scene(tmp_path, server)
    assert bpy.ops.clearance.bake() == {"FINISHED"}
    s = bpy.context.scene.clearance
    assert s.frames_baked == 8 and not s.is_baking and s.last_error == ""
    assert ob.modifiers[-1].name == "Clearance Cache"
    from protocol.pc2 import read_pc2
    frames, start, _ = read_pc2(os.path.join(str(tmp_path / "cache"), "box.pc2"))
    assert frames.shape == (8, 8, 3) and start == 1.0
    # Remove the deformation: only the cache can now produce the twisted shapes.
    ob.modifiers.remove(ob.modifiers["twist"])
    ob.modifiers["Clearance Cache"].show_viewport = False
    assert np.abs(world_positions(ob, 8) - expected[8]).max() > 0.1
    ob.modifiers["Clearance Cache"].show_viewport = True
    for f, want in expected.items():
        got = world_positions(ob, f)
        assert np.abs(got - want).max() < 1e-5, f


def _session(tmp_path, server, resume, delay):
    ex = addon("export").export_scene(bpy.context)
    settings = dataclasses.replace(ex.scene.settings, debug_frame_delay=delay)
    ex.scene = dataclasses.replace(ex.scene, settings=settings)
    client = addon("operators").connect(bpy.context)
    bs = addon("bake_session")
    return bs.BakeSession(bpy.context.scene, ex, client, str(tmp_path / "cache"), "PC2", resume=resume), bs


def test_cancel_keeps_finished_frames_and_resume_continues(blender, server, tmp_path):
    frames = (1, 12)
    ob, expected = _animated_scene(tmp_path, server, frames)
    session, bs = _session(tmp_path, server, resume=False, delay=0.15)
    session.start()
    while session.poll(0.1) and (session.last_frame or 0) < 4:
        pass
    session.cancel()
    assert session.run(stall_timeout=30) == bs.CANCELLED
    from protocol.pc2 import read_pc2
    path = os.path.join(str(tmp_path / "cache"), "box.pc2")
    kept, _, _ = read_pc2(path)
    assert 4 <= kept.shape[0] < 12
    assert ob.modifiers[-1].name == "Clearance Cache"
    n_kept = kept.shape[0]

    session, bs = _session(tmp_path, server, resume=True, delay=0.15)  # same scene, or the server refuses
    session.start()
    assert session.run(stall_timeout=60) == bs.DONE
    full, _, _ = read_pc2(path)
    assert full.shape[0] == 12
    assert np.array_equal(full[:n_kept], kept)  # the frames baked before the cancel are untouched
    ob.modifiers.remove(ob.modifiers["twist"])
    for f in (1, n_kept, 12):
        assert np.abs(world_positions(ob, f) - expected[f]).max() < 1e-5, f


def test_failed_bake_keeps_finished_frames(blender, server, tmp_path):
    ob, expected = _animated_scene(tmp_path, server, (1, 10))
    ex = addon("export").export_scene(bpy.context)
    ex.scene = dataclasses.replace(ex.scene, settings=dataclasses.replace(ex.scene.settings, debug_fail_after=3))
    bs = addon("bake_session")
    session = bs.BakeSession(bpy.context.scene, ex, addon("operators").connect(bpy.context),
                             str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=30) == bs.FAILED
    assert "debug_fail_after" in session.error
    assert bpy.context.scene.clearance.last_error == session.error
    assert not bpy.context.scene.clearance.is_baking   # the session closed: the next Bake is possible
    from protocol.pc2 import read_pc2
    kept, _, _ = read_pc2(os.path.join(str(tmp_path / "cache"), "box.pc2"))
    assert kept.shape[0] == 4  # start frame + 3 solved frames


def test_heartbeats_keep_a_long_frame_alive(blender, server, tmp_path):
    # One frame takes 8 s, longer than the 4 s stall limit: only the server's heartbeat (its
    # last progress repeated every second) shows it is still working. The limit is four
    # heartbeat periods so that a loaded machine does not turn this into a timing test.
    _animated_scene(tmp_path, server, (1, 2))
    session, bs = _session(tmp_path, server, resume=False, delay=8.0)
    session.start()
    assert session.run(stall_timeout=4.0) == bs.DONE, session.error
    assert session.last_frame == 2
