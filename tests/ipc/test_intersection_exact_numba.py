"""The numba expansion-arithmetic edge-triangle test (intersection._exact_one, exact_predicates.py)
agrees with the rational reference (_exact_edge_triangle, Python Fractions) on the configurations
that reach it: coplanar ones (grid faces, rotated planes, collinear and touching cases), points
one ulp off a plane or an edge, and on random general ones; and the exact orientation predicates
agree with the rational determinant."""
from fractions import Fraction

import numpy as np

from solver_server.contact import count_intersections, edges_from_faces
from solver_server.contact.exact_predicates import EXP2_CAP, EXP3_CAP, orient2d_exact, orient3d_exact
from solver_server.contact.intersection import _exact_edge_triangle, _exact_one
from solver_server.model.primitives import box


def _numba(x, a, b, t0, t1, t2):
    return _exact_one(x, a, b, t0, t1, t2, np.empty(EXP3_CAP + 18), np.empty(EXP2_CAP), np.empty((5, 2)))


def _agree(x):
    """Compare on the 5 points x (edge 0-1, triangle 2-3-4); returns the verdict."""
    x = np.ascontiguousarray(x, np.float64)
    ref = _exact_edge_triangle(x, 0, 1, 2, 3, 4)
    got = _numba(x, 0, 1, 2, 3, 4)
    assert got in (0, 1), got
    assert bool(got) == ref, x
    return ref


def _rotation(rng):
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q


def test_coplanar_grid_configurations():
    """Edges and triangles of a grid on one flat face (what a subdivided cube gives): every pair of an
    edge and a triangle with no shared vertex, on an axis plane and on rotated/shifted planes."""
    rng = np.random.default_rng(1)
    n, hits, tested = 4, 0, 0
    g = np.array([[i, j, 0.0] for i in range(n) for j in range(n)], float) * 0.1
    tris = []
    for i in range(n - 1):
        for j in range(n - 1):
            v = i * n + j
            tris += [[v, v + n, v + n + 1], [v, v + n + 1, v + 1]]
    tris = np.array(tris)
    edges = edges_from_faces(tris.astype(np.int32))
    for plane in range(3):
        P = g if plane == 0 else (g @ _rotation(rng).T + rng.normal(size=3))
        for e in edges:
            for t in tris:
                if set(e) & set(t):
                    continue
                tested += 1
                hits += _agree(P[[e[0], e[1], t[0], t[1], t[2]]])
    assert tested > 500 and hits == 0     # a proper triangulation: non-adjacent elements never meet


def test_coplanar_touching_and_crossing_cases():
    T = [[0, 0, 0], [1, 0, 0], [0, 1, 0]]
    cases = {
        ((-0.5, 0.2, 0), (0.5, 0.2, 0)): True,       # crossing
        ((-0.5, -0.2, 0), (0.5, -0.2, 0)): False,    # beside
        ((0.2, 0.2, 0), (0.3, 0.3, 0)): True,        # inside
        ((1.0, 0.0, 0), (2.0, 0.0, 0)): True,        # touching a corner, collinear with an edge
        ((1.5, 0.0, 0), (2.0, 0.0, 0)): False,       # collinear with an edge, beyond it
        ((0.5, 0.5, 0), (1.0, 1.0, 0)): True,        # endpoint on the hypotenuse
        ((0.5 + 2 ** -40, 0.5, 0), (1, 1, 0)): False,  # a hair outside
        ((-1.0, 1.0, 0), (1.0, -1.0, 0)): True,      # through the corner region along x + y = 0
    }
    for (a, b), want in cases.items():
        assert _agree([a, b] + T) == want


def test_off_plane_by_one_ulp_and_general_random():
    rng = np.random.default_rng(7)
    T = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    R = _rotation(rng)
    for k in range(300):
        a = np.array([rng.uniform(-0.5, 1.5), rng.uniform(-0.5, 1.5), 0.0])
        b = np.array([rng.uniform(-0.5, 1.5), rng.uniform(-0.5, 1.5), 0.0])
        if k % 3 == 1:
            a[2] = 2.0 ** -60                               # a hair off the plane
            b[2] = -a[2] if k % 2 else 0.0
        x = np.vstack([a, b, T])
        if k % 3 == 2:
            x = x @ R.T + 0.25                               # rotated: coordinates no longer exact
        _agree(x)
    for _ in range(300):
        _agree(rng.normal(size=(5, 3)))
    # outside the expansions' safe range (a lift of 1e-300 m): the numba test declines (-1) and the
    # public function falls back to Fractions, still exact
    x = np.array([[0.2, 0.2, 1e-300], [0.2, 0.2, -1e-300]] + T.tolist())
    assert _numba(x, 0, 1, 2, 3, 4) == -1
    assert count_intersections(x, np.array([[2, 3, 4]], np.int32), np.array([[0, 1]], np.int32)) == 1


def test_orientation_predicates_against_fractions():
    rng = np.random.default_rng(3)
    e3, e2 = np.empty(EXP3_CAP + 18), np.empty(EXP2_CAP)
    for k in range(400):
        x = rng.normal(size=(4, 3))
        if k % 2:
            x[3] = x[0] + 0.3 * (x[1] - x[0]) + 0.7 * (x[2] - x[0])   # (nearly) coplanar after rounding
        F = [[Fraction(float(c)) for c in p] for p in x]
        ad = [F[0][i] - F[3][i] for i in range(3)]
        bd = [F[1][i] - F[3][i] for i in range(3)]
        cd = [F[2][i] - F[3][i] for i in range(3)]
        det = (ad[0] * (bd[1] * cd[2] - bd[2] * cd[1]) + ad[1] * (bd[2] * cd[0] - bd[0] * cd[2])
               + ad[2] * (bd[0] * cd[1] - bd[1] * cd[0]))
        assert orient3d_exact(x, 0, 1, 2, 3, e3) == (det > 0) - (det < 0)
        p, q, r = x[0, :2], x[1, :2], x[2, :2]
        if k % 2:
            r = p + 0.4 * (q - p)
        d2 = ((Fraction(q[0]) - Fraction(p[0])) * (Fraction(r[1]) - Fraction(p[1]))
              - (Fraction(q[1]) - Fraction(p[1])) * (Fraction(r[0]) - Fraction(p[0])))
        assert orient2d_exact(p[0], p[1], q[0], q[1], r[0], r[1], e2) == (d2 > 0) - (d2 < 0)


def test_subdivided_cubes_resting_face_to_face_are_clean():
    """Two 1,000+-vertex cubes, one resting exactly on the other (coplanar touching faces would count;
    here a 1 mm gap): zero intersections; and moved 1 cm into each other: found."""
    V, T = box((0.2, 0.2, 0.2), center=(0.0, 0.0, 0.1), divisions=13)
    V2 = V + [0.05, 0.03, 0.201]
    x = np.vstack([V, V2])
    f = np.vstack([T, T + len(V)]).astype(np.int32)
    e = edges_from_faces(f)
    assert len(V) > 1000
    assert count_intersections(x, f, e) == 0
    x2 = np.vstack([V, V2 - [0, 0, 0.011]])
    assert count_intersections(x2, f, e) > 0
