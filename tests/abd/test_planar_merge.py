"""The Mesh collision shape's flat-region merge (model/planar_merge.py): the same closed surface with fewer
triangles. References: the minimal triangulations of polyhedra counted by hand (a cube 8 / 12, an L-prism
12 / 20), the enclosed volume, every input vertex on the merged surface (an independent point-triangle
distance), and surfaces that must come back unchanged (curved, noisy, open)."""
import dataclasses
import math

import numpy as np
import pytest

from solver_server.model import planar_merge
from solver_server.model.collision_shapes import build_shape
from solver_server.model.planar_merge import merge_planar
from solver_server.model.primitives import box, icosphere

from .abd_scenes import Run, ground, scene, stiff_box


def _volume(V, T):
    V = V - V.mean(axis=0)                   # about the centroid: no round-off from the distance to the origin
    a, b, c = V[T[:, 0]], V[T[:, 1]], V[T[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def _point_triangles_distance(p, a, b, c):
    """Distance from the point p to each triangle (a_i, b_i, c_i): to the plane where p projects inside, else to
    the nearest edge (numpy over the triangles)."""
    n = np.cross(b - a, c - a)
    n /= np.linalg.norm(n, axis=1)[:, None]
    h = np.einsum("ij,ij->i", p - a, n)
    q = p - h[:, None] * n
    inside = np.ones(len(a), bool)
    for v0, v1 in ((a, b), (b, c), (c, a)):
        inside &= np.einsum("ij,ij->i", np.cross(v1 - v0, q - v0), n) >= -1e-15
    edge = np.full(len(a), np.inf)
    for u, v in ((a, b), (b, c), (c, a)):
        d = v - u
        t = np.clip(np.einsum("ij,ij->i", p - u, d) / np.einsum("ij,ij->i", d, d), 0.0, 1.0)
        edge = np.minimum(edge, np.linalg.norm(p - (u + t[:, None] * d), axis=1))
    return np.where(inside, np.abs(h), edge)


def _on_surface(P, V, T):
    """Largest distance (m) from the points P to the surface (V, T)."""
    a, b, c = V[T[:, 0]], V[T[:, 1]], V[T[:, 2]]
    return max(float(_point_triangles_distance(p, a, b, c).min()) for p in P)


def _closed(T):
    e = np.concatenate([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]])
    fwd = {tuple(x) for x in e.tolist()}
    return len(fwd) == len(e) and all((b, a) in fwd for a, b in fwd)


def _voxels(cells, div=3, h=0.05):
    """The closed surface of a union of unit voxels (integer cells, face-connected), each voxel face split into
    div x div quads of two triangles, scaled by h (m)."""
    cells = set(map(tuple, cells))
    verts, tris = {}, []

    def vid(p):
        return verts.setdefault(p, len(verts))

    dirs = [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
    for c in sorted(cells):
        for d in dirs:
            if tuple(np.add(c, d)) in cells:
                continue
            ax = int(np.flatnonzero(d)[0])
            s = d[ax]
            u, w = (ax + 1) % 3, (ax + 2) % 3    # e_u x e_w = e_ax
            if s < 0:
                u, w = w, u                # keep the quads counter-clockwise seen from outside
            base = np.array(c, float) * div
            base[ax] += div if s > 0 else 0
            for i in range(div):
                for j in range(div):
                    q = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = base.copy()
                        p[u] += i + di
                        p[w] += j + dj
                        q.append(vid(tuple(int(x) for x in p)))
                    tris += [[q[0], q[1], q[2]], [q[0], q[2], q[3]]]
    V = np.array(sorted(verts, key=verts.get), float) * (h / div)
    return V, np.array(tris, np.int32)


def _turn(V, seed=0):
    R = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, 3)))[0]
    return V @ R.T + [0.7, -1.3, 2.1]


def _check_same_surface(V, T, Vs, Ts, kept):
    assert _closed(Ts)
    assert math.isclose(_volume(Vs, Ts), _volume(V, T), rel_tol=1e-12)
    np.testing.assert_array_equal(Vs, V[kept])                  # a subset of the input vertices, not moved
    scale = float(np.linalg.norm(np.ptp(V, axis=0)))
    assert _on_surface(V, Vs, Ts) < 1e-12 * scale               # every input vertex lies on the merged surface
    assert _on_surface(Vs, V, T) < 1e-12 * scale


def test_a_subdivided_turned_cube_is_eight_vertices_and_twelve_triangles():
    V, T = box((0.1, 0.1, 0.1), divisions=13)
    V = _turn(V)
    Vs, Ts, kept = merge_planar(V, T)
    assert (len(V), len(T)) == (1016, 2028) and (len(Vs), len(Ts)) == (8, 12)
    _check_same_surface(V, T, Vs, Ts, kept)


def test_a_non_convex_prism_keeps_its_corners_only():
    """An L of three voxels: the L-shaped caps (6 corners, non-convex) are ear-clipped into 4 triangles each, the
    six side rectangles into 2: 12 vertices, 20 triangles."""
    V, T = _voxels([(0, 0, 0), (1, 0, 0), (0, 1, 0)], div=4)
    V = _turn(V, 1)
    Vs, Ts, kept = merge_planar(V, T)
    assert (len(Vs), len(Ts)) == (12, 20)
    _check_same_surface(V, T, Vs, Ts, kept)


def _cylinder(seg, rings, r=0.05, h=0.1):
    """A faceted cylinder: seg sides split into ``rings`` stacked quads, caps as fans around a centre vertex."""
    a = 2 * np.pi * np.arange(seg) / seg
    V = [np.stack([r * np.cos(a), r * np.sin(a), np.full(seg, h * k / rings)], 1) for k in range(rings + 1)]
    V = np.concatenate(V + [np.array([[0.0, 0.0, 0.0], [0.0, 0.0, h]])])
    T = []
    for k in range(rings):
        for i in range(seg):
            j = (i + 1) % seg
            a0, a1 = k * seg + i, k * seg + j
            T += [[a0, a1, a1 + seg], [a0, a1 + seg, a0 + seg]]
    c0, c1 = len(V) - 2, len(V) - 1
    for i in range(seg):
        j = (i + 1) % seg
        T += [[c0, j, i], [c1, rings * seg + i, rings * seg + j]]
    return V, np.array(T, np.int32)


@pytest.mark.parametrize("seg", [16, 100])
def test_a_faceted_cylinder_keeps_its_rims(seg):
    """Each side strip of 5 stacked quads becomes one rectangle (2 triangles) and each fan cap a seg-gon clipped
    into seg - 2 triangles; the centres and the side's inner rings go: 2 seg vertices, 4 seg - 4 triangles."""
    V, T = _cylinder(seg, 5)
    Vs, Ts, kept = merge_planar(V, T)
    assert (len(Vs), len(Ts)) == (2 * seg, 4 * seg - 4)
    _check_same_surface(V, T, Vs, Ts, kept)


def test_a_face_with_a_hole_keeps_its_triangles_and_the_rest_merges():
    """A square frame (3 x 3 voxels less the centre): its top and bottom faces have a hole (two boundary loops)
    and keep their triangles; the outer and inner side walls merge. The surface stays closed and the same."""
    cells = [(i, j, 0) for i in range(3) for j in range(3) if (i, j) != (1, 1)]
    V, T = _voxels(cells, div=2)
    Vs, Ts, kept = merge_planar(V, T)
    assert len(Ts) < len(T)
    _check_same_surface(V, T, Vs, Ts, kept)
    top = np.isclose(Vs[:, 2], V[:, 2].max())
    assert top.sum() == (V[:, 2] == V[:, 2].max()).sum()         # the holed faces kept every vertex


@pytest.mark.parametrize("case", ["sphere", "noisy cube", "open sheet"])
def test_surfaces_without_flat_regions_come_back_unchanged(case):
    if case == "sphere":
        V, T = icosphere(0.1, (0.0, 0.0, 0.0), 3)
    elif case == "noisy cube":                 # 1 micrometre of noise: no two triangles share a plane
        V, T = box((0.1, 0.1, 0.1), divisions=6)
        V = V + np.random.default_rng(3).uniform(-1e-6, 1e-6, V.shape)
    else:
        V, T = box((0.1, 0.1, 0.1), divisions=4)
        T = T[1:]                              # a hole: not closed
    Vs, Ts, kept = merge_planar(V, T)
    assert Vs.shape == V.shape and np.array_equal(Ts, T.astype(np.int32)) and np.array_equal(kept, np.arange(len(V)))


def test_a_flat_region_beyond_the_tolerance_is_not_merged():
    """A cube whose top face centre is raised by 10x the tolerance keeps that face's triangles around it; at a
    tenth of the tolerance it merges (the surface moved by less than 1e-11 of its size)."""
    V, T = box((0.1, 0.1, 0.1), divisions=4)
    top = np.flatnonzero(np.all(np.isclose(V[:, :2], 0.0), axis=1) & (V[:, 2] > 0))
    diag = float(np.linalg.norm(np.ptp(V, axis=0)))
    for lift, merges in ((10.0, False), (0.1, True)):
        W = V.copy()
        W[top, 2] += lift * planar_merge.REL_TOL * diag
        Vs, Ts, _ = merge_planar(W, T)
        assert (len(Vs) == 8) == merges
        assert math.isclose(_volume(Vs, Ts), _volume(W, T), rel_tol=1e-9)


def test_the_mesh_shape_uses_the_merge_and_renders_every_vertex(monkeypatch):
    """build_shape("mesh") of a subdivided cube is its 8 corners; a dropped cube with the Mesh shape lands like
    the same cube with the merge off (the dense surface), within the contact gap, every frame converged, and its
    output is the full 98-vertex mesh moving rigidly."""
    b = stiff_box("c", (0.1, 0.1, 0.1), (0.0, 0.0, 0.08), div=4)
    sh = build_shape(b)
    assert len(sh.vertices) == 8 and not sh.own
    z = {}
    for merge in (True, False):
        monkeypatch.setattr(planar_merge, "MERGE", merge)
        r = Run(scene(dataclasses.replace(b), ground(), frame_start=1, frame_end=13))
        assert r.b.system.dof_map.slaved.size == (8 if merge else len(b.vertices))
        for _ in range(12):
            res = r.b.advance()
            assert res.stats["converged"]
        pos = np.asarray(res.positions["c"], np.float64)
        assert pos.shape == b.vertices.shape
        d = pos - pos.mean(0) - (b.vertices - b.vertices.mean(0))
        assert np.abs(d).max() < 1e-4                            # no turn: it fell flat and rests flat
        z[merge] = pos[:, 2].min()
    assert 0.0 < z[True] < 1e-3 and 0.0 < z[False] < 1e-3 and abs(z[True] - z[False]) < 5e-4
