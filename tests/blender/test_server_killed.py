"""kill -9 of the solver server mid-bake, seen from Blender: the bake fails with a message that
says the connection was lost (not a stall after minutes), every frame received stays in the
.pc2 and plays, and Resume on a new server continues to the full animation. Real bpy, real
server subprocesses."""
import dataclasses
import os
import signal
import subprocess
import sys

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, make_linear, world_positions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _serve(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("CLEARANCE_")}
    e["PYTHONPATH"] = ROOT
    e["CLEARANCE_STATE_DIR"] = str(tmp_path / "state")
    proc = subprocess.Popen([sys.executable, "-m", "solver_server", "serve", "--bind", "tcp://127.0.0.1:0"], cwd=ROOT,
                            env=e, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert "listening on" in line, line
    return proc, line.split()[-1]


@pytest.fixture
def servers(tmp_path):
    started = []

    def start():
        started.append(_serve(tmp_path))
        return started[-1]
    yield start
    for proc, _ in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        proc.stdout.close()


def _session(tmp_path, resume):
    ex = addon("export").export_scene(bpy.context)
    ex.scene = dataclasses.replace(ex.scene, settings=dataclasses.replace(ex.scene.settings, debug_frame_delay=0.5))
    bs = addon("bake_session")
    return bs.BakeSession(bpy.context.scene, ex, addon("operators").connect(bpy.context), str(tmp_path / "cache"),
                          "PC2", resume=resume), bs


def test_server_killed_mid_bake_keeps_frames_and_resume_finishes(blender, servers, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 10
    ob = cube("box", size=1.0, location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    twist = ob.modifiers.new("twist", "SIMPLE_DEFORM")   # keyed deformation: only the cache keeps it
    twist.angle = 0.0
    twist.keyframe_insert("angle", frame=1)
    twist.angle = 1.0
    twist.keyframe_insert("angle", frame=10)
    make_linear(ob)
    s = scene.clearance
    s.backend = "none"
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0
    expected = {f: world_positions(ob, f) for f in range(1, 11)}

    proc, s.server_address = servers()
    session, bs = _session(tmp_path, resume=False)
    session.start()
    while session.poll(0.1) and (session.last_frame or 0) < 4:
        pass
    os.kill(proc.pid, signal.SIGKILL)
    assert session.run(stall_timeout=600.0) == bs.FAILED
    assert "lost the connection" in session.error and "resume" in session.error, session.error
    assert "lost the connection" in s.last_error and not s.is_baking
    from protocol.pc2 import read_pc2
    path = os.path.join(str(tmp_path / "cache"), "box.pc2")
    kept, start, _ = read_pc2(path)
    assert start == 1.0 and 4 <= kept.shape[0] < 10
    n_kept = kept.shape[0]

    # a new server; Resume continues (the session the Resume button runs, with the same slowed
    # scene: a resume must submit the very scene of the cache)
    proc2, s.server_address = servers()
    session, bs = _session(tmp_path, resume=True)
    session.start()
    assert session.run(stall_timeout=600.0) == bs.DONE, session.error
    full, _, _ = read_pc2(path)
    assert full.shape[0] == 10
    assert np.array_equal(full[:n_kept], kept)           # the frames from before the kill are untouched
    ob.modifiers.remove(ob.modifiers["twist"])
    assert np.abs(world_positions(ob, 1) - world_positions(ob, 10)).max() > 0.1
    for f, want in expected.items():
        assert np.abs(world_positions(ob, f) - want).max() < 1e-5, f


def test_a_cancel_that_fails_is_not_reported_as_cancelled(blender, servers, tmp_path):
    """Issue 20 item 5: a Cancel the server never confirmed used to end the bake as "Cancelled",
    while the job could run on. Here the server is killed mid-bake and Cancel is pressed before
    anything noticed: the bake fails, naming the job, the folder and why."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 10
    ob = cube("box", size=1.0, location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    s = scene.clearance
    s.backend = "none"
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 3.0
    proc, s.server_address = servers()
    session, bs = _session(tmp_path, resume=False)
    session.start()
    while session.poll(0.1) and (session.last_frame or 0) < 2:
        pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    session.cancel()
    assert session.state == bs.FAILED and session.state != bs.CANCELLED
    assert "could not cancel job" in session.error and str(tmp_path / "cache") in session.error, session.error
    assert "\n" not in session.error
    assert s.last_error == session.error and not s.is_baking
