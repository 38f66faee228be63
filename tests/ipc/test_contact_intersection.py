"""Exact edge-triangle intersection checks on known configurations."""
import numpy as np

from solver_server.contact import count_intersections, find_intersections, edges_from_faces

TRI = [[0, 0, 0], [1, 0, 0], [0, 1, 0]]


def _seg_tri(a, b):
    x = np.array(TRI + [a, b], float)
    faces = np.array([[0, 1, 2]], np.int32)
    edges = np.array([[3, 4]], np.int32)
    return count_intersections(x, faces, edges)


def test_segment_triangle_cases():
    assert _seg_tri([0.2, 0.2, -1], [0.2, 0.2, 1]) == 1          # through the interior
    assert _seg_tri([0.8, 0.8, -1], [0.8, 0.8, 1]) == 0          # misses beside the hypotenuse
    assert _seg_tri([0.2, 0.2, 0.1], [0.2, 0.2, 1]) == 0         # above, not reaching
    assert _seg_tri([0.2, 0.2, 0.0], [0.2, 0.2, 1]) == 1         # endpoint touching: counts
    assert _seg_tri([0.5, 0.0, -1], [0.5, 0.0, 1]) == 1          # through an edge of the triangle
    assert _seg_tri([0.5, 0.5, -1], [0.5, 0.5, 1]) == 1          # exactly through the hypotenuse (exact path)
    assert _seg_tri([0.5 + 2 ** -40, 0.5, -1], [0.5 + 2 ** -40, 0.5, 1]) == 0   # a hair outside
    assert _seg_tri([-0.5, 0.2, 0], [0.5, 0.2, 0]) == 1          # coplanar, crossing
    assert _seg_tri([-0.5, -0.2, 0], [0.5, -0.2, 0]) == 0        # coplanar, beside


def _box(center, size):
    c = np.array(center, float)
    v = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)], float) - 0.5
    quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    faces = [[q[0], q[1], q[2]] for q in quads] + [[q[0], q[2], q[3]] for q in quads]
    return c + size * v, np.array(faces, np.int32)


def _two_boxes(offset):
    xa, fa = _box([0, 0, 0], 1.0)
    xb, fb = _box([offset, 0.13, 0.07], 0.5)
    x = np.vstack([xa, xb])
    faces = np.vstack([fa, fb + 8])
    return x, faces, edges_from_faces(faces)


def test_overlapping_and_separate_boxes():
    x, f, e = _two_boxes(0.7)           # small box pokes through a face of the big one
    hits = find_intersections(x, f, e)
    assert hits.shape[0] > 0
    # every hit pairs an edge of one box with a face of the other (each box alone is clean)
    eb = e[hits[:, 0], 0] >= 8
    fb = f[hits[:, 1], 0] >= 8
    assert np.all(eb != fb)
    x, f, e = _two_boxes(1.0)           # separate (gap 0.25)
    assert count_intersections(x, f, e) == 0
    xa, fa = _box([0, 0, 0], 1.0)
    assert count_intersections(xa, fa, edges_from_faces(fa)) == 0    # a closed mesh alone is clean


def test_self_intersection_of_a_folded_sheet():
    # a 2-triangle strip folded so the second triangle cuts through the first
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.3, 0.3, -0.5], [0.3, 0.3, 0.5]], float)
    faces = np.array([[0, 1, 2], [1, 3, 4]], np.int32)
    assert count_intersections(x, faces, edges_from_faces(faces)) >= 1
    x[3:, 0] = 2.0                     # move the second triangle's far edge away
    assert count_intersections(x, faces, edges_from_faces(faces)) == 0
