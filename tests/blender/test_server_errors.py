"""A scene the solver refuses (a solid overlapping a collider at the start frame) fails in Blender
with a report naming both objects, and the previous bake stays on disk and playable."""
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, make_linear, plane, world_positions


def test_intersecting_start_frame_fails_naming_both_and_keeps_previous_bake(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    jelly = cube("jelly", size=0.2, location=(0.0, 0.0, 0.6))
    jelly.clearance.role = "SOLID"
    jelly.keyframe_insert("location", index=2, frame=1)
    jelly.location.z = 0.3
    jelly.keyframe_insert("location", index=2, frame=4)
    make_linear(jelly)
    floor = plane("floor", size=2.0)
    floor.clearance.role = "COLLIDER"
    s = scene.clearance
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0

    # 1. A first bake (pass-through: the keyed fall comes back).
    s.backend = "none"
    expected = {f: world_positions(jelly, f) for f in range(1, 5)}
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    path = os.path.join(str(tmp_path / "cache"), "jelly.pc2")
    with open(path, "rb") as f:
        before = f.read()

    # 2. A post collider cutting through the jelly's faces at frame 1: IPC refuses the scene.
    post = cube("post", size=0.2, location=(0.1, 0.05, 0.6))
    post.clearance.role = "COLLIDER"
    s.backend = "ipc"
    with pytest.raises(RuntimeError) as info:
        bpy.ops.clearance.bake()
    msg = str(info.value)
    assert "jelly" in msg and "post" in msg and "intersect" in msg, msg
    assert "jelly" in s.last_error and "post" in s.last_error
    assert s.status == "Error" and not s.is_baking

    # 3. The first bake is untouched: same file, same modifier, same playback.
    with open(path, "rb") as f:
        assert f.read() == before
    assert jelly.modifiers[-1].name == "Clearance Cache"
    # Rescale the mesh data: without the cache the cube would now play back 1.5x larger.
    co = np.empty(24, np.float32)
    jelly.data.vertices.foreach_get("co", co)
    jelly.data.vertices.foreach_set("co", co * 1.5)
    jelly.data.update()
    cache_mod = jelly.modifiers["Clearance Cache"]
    cache_mod.show_viewport = False
    assert np.abs(world_positions(jelly, 2) - expected[2]).max() > 0.04
    cache_mod.show_viewport = True
    for f, want in expected.items():
        assert np.abs(world_positions(jelly, f) - want).max() < 1e-5, f
