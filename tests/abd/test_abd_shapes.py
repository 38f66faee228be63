"""Collision shapes of stiff bodies (model/collision_shapes.py, protocol 1.6): contact on the shape, the
body's own vertices following x = A X + p, mass from the body's own mesh. References: the closed-form
geometry of the shapes, the Mesh shape's own trajectory (a cube's Box shape is the cube), free fall
(implicit Euler's formula) and the rest height of a sphere on the ground."""
import dataclasses
import math

import numpy as np
import pytest

from protocol.rigid import affine_fit
from solver_server.bodies import mass_properties
from solver_server.model.collision_shapes import build_shape, convex_hull, default_box, enclosing_sphere
from solver_server.model.primitives import box, icosphere

from .abd_scenes import Run, ground, scene, stiff_box

H = 0.1


def _rz(a):
    return np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])


def _volume(V, T):
    a, b, c = V[T[:, 0]], V[T[:, 1]], V[T[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def test_shape_geometry():
    V, T = box((H, H, H), divisions=4)
    V = V @ _rz(0.4).T + [0.3, -0.2, 0.5]
    hv, ht = convex_hull(V)
    assert len(hv) == 8 and len(ht) == 12 and math.isclose(_volume(hv, ht), H ** 3, rel_tol=1e-12)
    bv, bt = default_box(V)                       # a turned cube's box is the cube (flush with a hull face)
    assert math.isclose(_volume(bv, bt), H ** 3, rel_tol=1e-9)
    sv, st = enclosing_sphere(V)
    c = 0.5 * (V.min(0) + V.max(0))
    R = np.linalg.norm(V - c, axis=1).max()
    a, b, cc = sv[st[:, 0]], sv[st[:, 1]], sv[st[:, 2]]
    n = np.cross(b - a, cc - a)
    d = np.einsum("ij,ij->i", n, a - c) / np.linalg.norm(n, axis=1)
    assert d.min() >= R * (1 - 1e-12) and d.min() <= R * (1 + 1e-12)   # every face plane outside the sphere
    assert len(sv) == 162 and _volume(sv, st) > 4 / 3 * math.pi * R ** 3


@pytest.mark.parametrize("shape", ["box", "convex_hull", "sphere"])
def test_mass_comes_from_the_mesh_and_the_shape_fills_the_block(shape):
    b = dataclasses.replace(stiff_box("c", (H, H, H), (0.0, 0.0, 0.2), div=3), collision_shape=shape)
    r = Run(scene(b, ground(), frame_start=1, frame_end=2))
    mp = mass_properties(b.vertices, b.triangles, 1000.0)
    assert math.isclose(r.ab.props[0].mass, mp.mass, rel_tol=1e-14)
    np.testing.assert_allclose(r.ab.props[0].second, mp.second, rtol=1e-12)
    assert r.s.blocks[0].n_nodes == len(build_shape(b).vertices) == {"box": 8, "convex_hull": 8, "sphere": 162}[shape]
    pos = r.b.initial_positions()["c"]
    np.testing.assert_allclose(pos, b.vertices, atol=1e-6)


def test_box_shape_follows_the_mesh_shapes_motion_and_renders_rigidly():
    """A 54-vertex cube dropped turned onto the ground with Mesh and with Box (the same surface: 8 vertices):
    free fall then rest at the same height; every returned frame is a rigid image of the start mesh."""
    out = {}
    for shape in ("mesh", "box"):
        b = dataclasses.replace(stiff_box("c", (H, H, H), (0.0, 0.0, 0.08), div=3, rot=_rz(0.3)),
                                collision_shape=shape)
        r = Run(scene(b, ground(), frame_start=1, frame_end=13))
        frames = []
        for _ in range(12):
            res = r.b.advance()
            r.frames += 1
            assert res.stats["converged"]
            frames.append(np.asarray(res.positions["c"], np.float64))
            A, c, p = affine_fit(b.vertices, frames[-1])
            assert np.linalg.norm(A @ A.T - np.eye(3)) < 1e-3
            assert np.abs(frames[-1] - ((b.vertices - c) @ A.T + p)).max() < 1e-6   # x = A X + p exactly
        out[shape] = np.array(frames)
    # free fall (frame 1, no contact yet): identical; resting: the same height within the contact gap
    np.testing.assert_allclose(out["box"][0], out["mesh"][0], atol=1e-9)
    zb, zm = out["box"][-1][:, 2].min(), out["mesh"][-1][:, 2].min()
    assert 0.0 < zb < 1e-3 and abs(zb - zm) < 5e-4


def test_sphere_shape_rests_on_its_sphere():
    """A cube with a Sphere shape lands on the ground: its centre comes to rest between the icosphere's face
    radius (the bounding sphere's R) and its vertex radius, plus at most the contact gap."""
    b = dataclasses.replace(stiff_box("c", (H, H, H), (0.0, 0.0, 0.12), div=2), collision_shape="sphere")
    sv, _ = enclosing_sphere(b.vertices)
    R = math.sqrt(3) * H / 2
    Rv = np.linalg.norm(sv - [0, 0, 0.12], axis=1).max()
    r = Run(scene(b, ground(friction=0.0), frame_start=1, frame_end=25))
    for _ in range(24):
        res = r.b.advance()
        r.frames += 1
        assert res.stats["converged"]
    z = r.z[int(r.ab.row0[0])][2]
    assert R - 1e-6 < z < Rv + 1e-3, (z, R, Rv)


def test_proxy_that_leaves_the_mesh_outside_is_warned_by_name():
    b = stiff_box("Crate", (H, H, H), (0.0, 0.0, 0.2), div=2)
    pv, pt = icosphere(0.03, (0.0, 0.0, 0.2), 1)
    b = dataclasses.replace(b, collision_shape="proxy", shape_vertices=pv, shape_triangles=pt.astype(np.int32))
    r = Run(scene(b, ground(), frame_start=1, frame_end=2))
    res = r.b.advance()
    assert "Crate" in res.stats["shape_warning"] and "outside" in res.stats["shape_warning"]
    ok = dataclasses.replace(stiff_box("Crate", (H, H, H), (0.0, 0.0, 0.2), div=2), collision_shape="box")
    assert "shape_warning" not in Run(scene(ok, ground(), frame_start=1, frame_end=2)).b.advance().stats


def test_keyframed_body_with_a_shape_follows_its_keys():
    b = stiff_box("k", (H, H, H), (0.0, 0.0, 0.3), div=2)
    F = 4
    anim = np.stack([b.vertices + [0.01 * f, 0.0, 0.0] for f in range(F)]).astype(np.float32)
    b = dataclasses.replace(b, collision_shape="convex_hull", animation=anim)
    r = Run(scene(b, ground(), frame_start=1, frame_end=F))
    for f in range(1, F):
        res = r.b.advance()
        np.testing.assert_allclose(res.positions["k"], anim[f], atol=1e-6)


def test_fast_solver_with_box_shapes():
    """The Preview (block descent) solver runs the same shapes: two box-shaped cubes stack, no crossing."""
    a = dataclasses.replace(stiff_box("a", (H, H, H), (0.0, 0.0, 0.052), div=3), collision_shape="box")
    b = dataclasses.replace(stiff_box("b", (H, H, H), (0.02, 0.0, 0.16), div=3, rot=_rz(0.5)), collision_shape="box")
    r = Run(scene(a, b, ground(), frame_start=1, frame_end=9, solver_quality="fast"))
    r.advance(8)
    top = r.b.system.body_positions(r.z)["b"][:, 2]
    assert 0.19 < top.max() < 0.202 and top.min() > 0.099
