"""A 10x10-quad cloth falling onto a keyframed box that slides and turns, baked by the IPC backend
from Blender through a real server subprocess.

Checks: the .pc2 holds exactly the frames the bake session received from the server, playback
shows them, and at every frame no cloth vertex is inside the box (tested against the box's
analytic shape in its own space of that frame: IPC guarantees no intersection).
"""
import math
import os

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, make_linear, mesh_object, world_positions

from protocol.messages import Frame

BOX = 0.2       # m, edge of the collider box
LIFT = 0.3      # m, height of the cloth object's origin


def grid(n: int, size: float):
    """(verts, quads) of an n x n-quad square sheet of edge ``size`` centred on the origin, z = 0."""
    t = np.linspace(-size / 2, size / 2, n + 1)
    x, y = np.meshgrid(t, t, indexing="xy")
    verts = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], axis=1)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="xy")
    a = (j * (n + 1) + i).ravel()
    quads = np.stack([a, a + 1, a + n + 2, a + n + 1], axis=1)
    return verts, quads


def _scene(tmp_path, server, frames: int):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    box = cube("box", size=BOX, location=(-0.03, 0.0, 0.1))   # top face at z = 0.2
    box.clearance.role = "COLLIDER"
    box.keyframe_insert("location", frame=1)
    box.keyframe_insert("rotation_euler", frame=1)
    box.location = (0.03, 0.0, 0.12)                          # slides +x, lifts 2 cm into the cloth
    box.rotation_euler = (0.0, 0.0, math.radians(20.0))
    box.keyframe_insert("location", frame=frames)
    box.keyframe_insert("rotation_euler", frame=frames)
    make_linear(box)
    v, q = grid(10, 0.4)
    cloth = mesh_object("cloth", v, q, location=(0.0, 0.0, LIFT))  # 10 cm above the box top
    c = cloth.clearance
    c.role = "CLOTH"
    c.density, c.thickness, c.youngs_modulus, c.bending_stiffness = 200.0, 1e-3, 1e5, 1e-6
    s = scene.clearance
    s.backend = "ipc"
    s.contact_gap = 1e-3
    s.server_address = server.address
    s.cache_folder = str(tmp_path / "cache")
    addon("preferences").get().timeout = 30.0
    return cloth, box


def _inside_box(points: np.ndarray, box_matrix: np.ndarray) -> np.ndarray:
    """Mask of ``points`` (world) strictly inside the box of edge BOX whose world matrix is given."""
    inv = np.linalg.inv(box_matrix)
    local = points @ inv[:3, :3].T + inv[:3, 3]
    return np.all(np.abs(local) < BOX / 2, axis=1)


def test_cloth_on_moving_box_pc2_equals_stream_and_never_inside(blender, server, tmp_path):
    frames = 10
    cloth, box = _scene(tmp_path, server, frames)
    bs = addon("bake_session")
    received = {}

    class RecordingSession(bs.BakeSession):
        """The add-on's session, also keeping a copy of every Frame message it handles."""

        def handle(self, ev):
            if isinstance(ev, Frame) and ev.job_id == self.job_id:
                received[int(ev.frame)] = np.array(ev.positions[list(ev.names).index("cloth")], np.float64)
            super().handle(ev)

    ex = addon("export").export_scene(bpy.context)
    assert ex.scene.settings.backend == "ipc"
    box_anim = next(b for b in ex.scene.bodies if b.name == "box").animation
    assert box_anim is not None and box_anim.shape[0] == frames   # the collider's motion is streamed
    session = RecordingSession(bpy.context.scene, ex, addon("operators").connect(bpy.context),
                               str(tmp_path / "cache"), "PC2")
    session.start()
    assert session.run(stall_timeout=60) == bs.DONE, session.error
    assert sorted(received) == list(range(1, frames + 1))

    from protocol.pc2 import read_pc2
    local, start, _ = read_pc2(os.path.join(str(tmp_path / "cache"), "cloth.pc2"))
    assert local.shape == (frames, 121, 3) and start == 1.0
    for f in range(1, frames + 1):
        world = local[f - 1].astype(np.float64) + (0.0, 0.0, LIFT)
        assert np.abs(world - received[f]).max() < 1e-6, f           # the file is the stream (float32)
        shown = world_positions(cloth, f)
        assert np.abs(shown - received[f]).max() < 1e-6, f           # and playback shows it
        box_matrix = np.array(box.matrix_world)                      # frame f is set by world_positions
        assert not _inside_box(received[f], box_matrix).any(), f
        # The box's own exported motion agrees with the matrix used here (same analytic shape).
        assert np.abs(world_positions(box, f) - box_anim[f - 1]).max() < 1e-5, f
    # The cloth landed on the box: its middle rests on the (lifted) top face, its corners hang lower.
    top = 0.2 + 0.02
    mid = received[frames][60]
    assert abs(mid[2] - top) < 0.01
    assert received[frames][[0, 10, 110, 120], 2].max() < top - 0.02
    assert received[1][:, 2].min() == pytest.approx(LIFT)
