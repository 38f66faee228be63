"""Keyframed Shrink (Body.shrink_samples / shrink_weights, model/rest_schedule.py): the cloth's rest size
follows the keys frame by frame. A free sheet in zero gravity whose Shrink is keyed 0 -> 0.2 over half a
second, then held, has the width 1 - s(t) of the original at every frame (its membrane's waves cross it
~100 times per frame, so it follows quasi-statically); with a Shrink Group only the weighted half shrinks.
The Preview solver refuses a keyed Shrink by name."""
import dataclasses

import numpy as np
import pytest

from protocol.scene import Body, Material, Scene, SceneError, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import grid_sheet

FRAMES = 25


def _sheet(weights=None):
    V, T, _ = grid_sheet((0.5, 0.5), (6, 6), center=(0.0, 0.0, 0.0))
    keys = np.concatenate([np.linspace(0.0, 0.2, 13), np.full(FRAMES - 13, 0.2)])
    return Body("sheet", "cloth", V, np.ascontiguousarray(T, np.int32),
                material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5, bending_stiffness=1e-6),
                shrink_samples=keys, shrink_weights=weights)


def _scene(body, quality="accurate"):
    return Scene(Settings(frame_start=1, frame_end=FRAMES, solver_quality=quality, gravity=(0.0, 0.0, 0.0)), (body,))


def test_free_sheet_follows_a_keyed_shrink_frame_by_frame():
    body = _sheet()
    b = MeshBackend(_scene(body))
    w0 = np.ptp(body.vertices[:, 0])
    worst = 0.0
    for f in range(2, FRAMES + 1):
        b.advance()
        ratio = np.ptp(b.stepper.x[:, 0]) / w0
        expect = 1.0 - float(body.shrink_samples[f - 1])
        worst = max(worst, abs(ratio - expect))
        if f in (7, 13, FRAMES):
            print(f"frame {f}: width {ratio:.4f} of the original, 1 - shrink = {expect:.4f}")
    print(f"largest deviation from 1 - s(t) over all frames: {worst:.4f}")
    assert worst < 0.005
    assert abs(np.ptp(b.stepper.x[:, 0]) / w0 - 0.8) < 0.001


def test_a_shrink_group_shrinks_only_its_vertices():
    V = _sheet().vertices
    w = (V[:, 0] > 1e-9).astype(np.float64)            # the right half (x > 0) in the group
    body = _sheet(w)
    b = MeshBackend(_scene(body))
    for _ in range(FRAMES - 1):
        b.advance()
    x = b.stepper.x
    right = np.ptp(x[V[:, 0] > -1e-9, 0]) / 0.25
    left = np.ptp(x[V[:, 0] < 1e-9, 0]) / 0.25
    print(f"shrink group on the right half: right {right:.4f}, left {left:.4f} of their widths")
    assert right < 0.9 and left > 0.95


def test_preview_refuses_a_keyed_shrink_by_name():
    with pytest.raises(SceneError) as e:
        MeshBackend(_scene(_sheet(), quality="fast"))
    assert e.value.obj == "sheet" and "Converged" in str(e.value)
