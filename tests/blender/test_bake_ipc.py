"""A soft cube dropped on a plane, baked by the IPC backend through a real server."""
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, plane


@pytest.mark.slow
def test_soft_cube_falls_and_rests_on_the_plane(blender, server, tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 30
    box = cube("jelly", size=0.2, location=(0, 0, 0.2))   # bottom face 0.1 m above the floor
    box.clearance.role = "SOLID"
    box.clearance.youngs_modulus = 1.0e5
    floor = plane("floor", size=2.0)
    floor.clearance.role = "COLLIDER"
    s = scene.clearance
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    from protocol.pc2 import read_pc2
    local, _, _ = read_pc2(os.path.join(str(tmp_path / "cache"), "jelly.pc2"))
    z = local[:, :, 2] + 0.2   # object-local -> world (translation only)
    assert z.shape == (30, 8)
    assert z.min() > 0.0                       # never below the plane (IPC guarantee)
    assert z[-1].min() < 0.01                  # it fell the 0.1 m and touches the floor (within the gap + sag)
    assert np.abs(local[-1] - local[-2]).max() < 2e-3  # at rest: under 2 mm per frame at the end
