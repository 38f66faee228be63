"""Scenes with Box collision shapes in the Converged solver, at test size (the benchmark runs them against
Blender's rigid body world: python -m benchmarks abd scenes=yes): a stack of ten subdivided boxes stands, a
row of dominoes topples one after the other, and a small pile lands. Every frame: zero intersections of the
collision surfaces (exact test) and rigid bodies (Run); every step converged to the Newton tolerance."""
import dataclasses
import math

import numpy as np

from benchmarks.abd import make_scene
from .abd_scenes import Run, ground, scene, stiff_box


def _boxed(b):
    return dataclasses.replace(b, collision_shape="box")


def _frames(run: Run, n: int) -> list:
    its = []
    for _ in range(n):
        r = run.b.advance()
        assert r.stats["converged"], f"frame {run.frames + 1}: {r.stats.get('warning')}"
        its.append(r.stats["newton_iterations"])
        run.frames += 1
        run.check()
    return its


def dominoes(n: int = 5, tilt_deg: float = 12.0):
    """n dominoes 2 x 10 x 20 cm, 10 cm apart along x, on Box shapes; the first one tipped by tilt_deg
    about its front bottom edge so that it starts to fall into the second."""
    out = []
    for i in range(n):
        c = np.array([0.1 * i, 0.0, 0.1005])
        R = None
        if i == 0:
            a = math.radians(tilt_deg)
            R = np.array([[math.cos(a), 0.0, math.sin(a)], [0.0, 1.0, 0.0], [-math.sin(a), 0.0, math.cos(a)]])
            edge = np.array([0.01, 0.0, 0.0005])            # front bottom edge (x = +1 cm, z = 0.5 mm)
            c = edge + R @ (np.array([0.0, 0.0, 0.1005]) - np.array([0.01, 0.0, 0.0005]))
        out.append(_boxed(stiff_box(f"d{i}", (0.02, 0.1, 0.2), c, density=600.0, friction=0.5, rot=R, div=2)))
    return out


def test_stack_of_ten_box_shapes_stands():
    """Ten 56-vertex boxes on Box shapes stacked (staggered 3 mm): every step converged, drift < 1 mm from
    frame 12 to frame 36."""
    bs = [_boxed(stiff_box(f"b{i}", (0.1, 0.1, 0.1), (0.003 * (i % 2), 0.0, 0.0505 + 0.1015 * i), div=3))
          for i in range(10)]
    run = Run(scene(*bs, ground(), frame_end=37))
    _frames(run, 36)
    ps = np.array([run.p(i) for i in range(10)])
    drift = np.linalg.norm(ps[:, -1] - ps[:, 12], axis=1)
    assert drift.max() < 1e-3, drift
    assert (np.diff(ps[:, -1, 2]) > 0.099).all()


def test_dominoes_topple():
    """Five dominoes: the tipped first one knocks the others over in turn; at the end the last one has
    turned by more than 30 degrees, every step converged (2 substeps), no crossing on any frame."""
    run = Run(scene(*dominoes(5), ground(friction=0.5), frame_end=41, substeps=2))
    _frames(run, 40)
    A = run.ab.A(run.z, 4)
    angle = math.degrees(math.acos(min(1.0, abs(A[2, 2]) / np.linalg.norm(A[:, 2]))))
    assert angle > 30.0, angle


def test_small_pile_with_box_shapes():
    """Eight 98-vertex cubes on Box shapes in two turned layers fall into a frictional pile (mu 0.3): zero
    intersections and every step converged over 12 frames at 1 substep (with the exact projected friction
    Hessian 3 of the 12 steps stopped at the 100-iteration cap, frictional contacts switching between
    sticking and sliding inside the step; the majorizer's curvature along slow slips converges them,
    388 Newton iterations in all, docs/solver.md)."""
    run = Run(make_scene(8, 4, 12, "accurate", 2, "box"))
    assert run.b.scene.settings.substeps == 1
    its = _frames(run, 12)
    assert len(its) == 12 and max(its) < 100
