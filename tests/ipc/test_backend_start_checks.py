"""Start-frame intersection check of the IPC backend: colliders touching each other are fine (the
solver never moves them apart), simulated bodies crossing anything are reported with every pair of
names, a world position on the intersection and a readable contact gap."""
import re

import numpy as np
import pytest

from protocol.scene import Body, Material, SceneError
from solver_server.backends.mesh_backend import MeshBackend, format_length
from solver_server.contact import find_intersections
from solver_server.model.system import build_system
from solver_server.model.primitives import grid_sheet, icosphere
from .test_scene_helpers import plane, scene

R = 0.1


def _ball(name="ball", z=R - 0.002, role="collider", x=0.0):
    V, T = icosphere(R, center=(x, 0.0, z), subdivisions=1)
    return Body(name, role, V, T, material=Material())


def _sheet(name, z, x=0.0, size=0.3):
    V, T, E = grid_sheet((size, size), (4, 4), center=(x, 0.0, z))
    return Body(name, "cloth", V, T, E, material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5))


def test_colliders_touching_each_other_are_not_an_error():
    sc = scene(_ball(), plane("floor"), _sheet("cloth", 0.5), frame_end=3)
    s = build_system(sc)
    # the ball really sinks 2 mm into the floor: the check has something to ignore
    assert len(find_intersections(s.x0, s.coll_faces, s.coll_edges)) > 0
    b = MeshBackend(sc)
    assert b.advance().frame == 2


def test_every_intersecting_pair_is_named_with_a_position_and_readable_gap():
    # cloth sheet through the middle of a collider ball; a second sheet through a second ball
    sc = scene(_ball("ballA", z=0.0), _sheet("clothA", 0.0), _ball("ballB", z=0.0, x=1.0), _sheet("clothB", 0.0, x=1.0),
               frame_end=3)
    with pytest.raises(SceneError) as ei:
        MeshBackend(sc)
    msg = str(ei.value)
    assert "ballA and clothA" in msg and "ballB and clothB" in msg
    assert "1 mm" in msg and "0.001000" not in msg
    pts = [np.array([float(v) for v in m]) for m in re.findall(r"\(([-\d.]+), ([-\d.]+), ([-\d.]+)\) m", msg)]
    assert len(pts) == 2
    for p, cx in zip(pts, (0.0, 1.0)):
        # the sheet (z = 0) meets the ball's surface: on the plane z = 0, about R from the centre
        assert abs(p[2]) < 1e-3
        assert abs(np.hypot(p[0] - cx, p[1]) - R) < 0.02


def test_format_length():
    assert format_length(0.0020000000949949026) == "2 mm"
    assert format_length(0.35) == "0.35 m"
    assert format_length(1.5e-5) == "15 um"


def test_one_object_of_two_overlapping_parts_is_named_once_as_intersecting_itself():
    """Issue 20 item 9: a joined object of two overlapping cubes was reported as 'Joined and Joined
    intersect'; it is one object whose parts overlap, and the fix is to separate them."""
    from solver_server.model.primitives import box
    V1, T1 = box((0.2, 0.2, 0.2), center=(0.0, 0.0, 0.5))
    V2, T2 = box((0.2, 0.2, 0.2), center=(0.1, 0.05, 0.55))
    joined = Body("Joined", "solid", np.vstack([V1, V2]), np.vstack([T1, T2 + len(V1)]).astype(np.int32),
                  material=Material())
    with pytest.raises(SceneError) as ei:
        MeshBackend(scene(joined, plane("floor"), frame_end=3))
    msg = str(ei.value)
    assert msg.startswith("Joined intersects itself (at ("), msg
    assert "two of its parts overlap; separate them (Edit Mode, P > By Loose Parts)" in msg
    assert "Joined and Joined" not in msg and msg.count("Joined") == 1 and "\n" not in msg
    assert ei.value.obj == "Joined"
