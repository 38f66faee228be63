"""Comparison against IPC Toolkit (ipctk 1.6.1, test-only): distances on 120,000 random and
degenerate cases, CCD booleans/bounds, and the mesh-level collision-free step size."""
from fractions import Fraction

import numpy as np
import pytest

ipctk = pytest.importorskip("ipctk")

from solver_server.contact import (CollisionMesh, point_triangle_dist2_batch, edge_edge_dist2_batch,  # noqa: E402
                                       point_triangle_ccd_batch, edge_edge_ccd_batch, max_step_size,
                                       count_intersections, edges_from_faces)

ULP = 2.0 ** -52


# ----------------------------------------------------------------------------- case generators
def pt_cases(rng, m):
    """(m, 12) point-triangle inputs: random plus degenerate families, at mixed scales."""
    X = rng.normal(size=(m, 12))
    k = m // 6
    T = X[k:3 * k, 3:12].reshape(-1, 3, 3)
    s1 = T[:, 1] - T[:, 0]
    s2 = T[:, 2] - T[:, 0]
    n = np.cross(s1, s2)
    n /= np.linalg.norm(n, axis=1)[:, None]
    # projections exactly on region boundaries (vertices, edges), heights including 0
    ab = rng.choice(np.array([[0, 0], [1, 0], [0, 1], [0.5, 0], [0, 0.5], [0.5, 0.5], [0.3, 0.7], [-0.2, 0],
                              [1.2, -0.1]]), size=T.shape[0])
    h = rng.choice([0.0, 1e-12, 1e-6, 0.3, -0.2], size=T.shape[0])
    X[k:3 * k, 0:3] = T[:, 0] + ab[:, :1] * s1 + ab[:, 1:] * s2 + h[:, None] * n
    # collinear / zero-area triangles
    X[3 * k:4 * k, 9:12] = X[3 * k:4 * k, 3:6] + rng.choice([0.0, 2.0, -1.0], size=(k, 1)) * (
        X[3 * k:4 * k, 6:9] - X[3 * k:4 * k, 3:6])
    # point in the triangle's plane
    X[4 * k:5 * k, 0:3] = (X[4 * k:5 * k, 3:6] + rng.uniform(-1, 2, (k, 1)) * (X[4 * k:5 * k, 6:9] - X[4 * k:5 * k, 3:6])
                           + rng.uniform(-1, 2, (k, 1)) * (X[4 * k:5 * k, 9:12] - X[4 * k:5 * k, 3:6]))
    return X * 10.0 ** rng.uniform(-3, 3, (m, 1))


def ee_cases(rng, m):
    X = rng.normal(size=(m, 12))
    k = m // 6
    ea = X[k:4 * k, 3:6] - X[k:4 * k, 0:3]
    c = rng.choice([1.0, -1.0, 0.5, 2.0], size=(k, 1))
    X[k:2 * k, 9:12] = X[k:2 * k, 6:9] + c * ea[:k]                                   # parallel
    X[2 * k:3 * k, 9:12] = X[2 * k:3 * k, 6:9] + ea[k:2 * k] + 10.0 ** rng.uniform(-9, -3, (k, 1)) * rng.normal(
        size=(k, 3))                                                                     # nearly parallel
    t = rng.uniform(-0.5, 1.5, (k, 2))
    X[3 * k:4 * k, 6:9] = X[3 * k:4 * k, 0:3] + t[:, :1] * ea[2 * k:3 * k]              # collinear
    X[3 * k:4 * k, 9:12] = X[3 * k:4 * k, 0:3] + t[:, 1:] * ea[2 * k:3 * k]
    X[4 * k:5 * k, 6:9] = X[4 * k:5 * k, 0:3] + 0.5 * (X[4 * k:5 * k, 3:6] - X[4 * k:5 * k, 0:3])   # b0 on edge a
    return X * 10.0 ** rng.uniform(-3, 3, (m, 1))


# ----------------------------------------------------------------------------- exact reference
def _fr(v):
    return [Fraction(float(c)) for c in v]


def _d2(a, b):
    return sum((x - y) * (x - y) for x, y in zip(a, b))


def _dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def _sub(a, b):
    return [x - y for x, y in zip(a, b)]


def _pe2(p, e0, e1):
    e = _sub(e1, e0)
    ee = _dot(e, e)
    if ee == 0:
        return _d2(p, e0)
    t = min(max(_dot(_sub(p, e0), e) / ee, Fraction(0)), Fraction(1))
    return _d2(p, [x + t * y for x, y in zip(e0, e)])


def exact_ee2(x):
    """Exact rational squared segment-segment distance of the double-precision input."""
    a0, a1, b0, b1 = (_fr(x[3 * i:3 * i + 3]) for i in range(4))
    u, v, w = _sub(a1, a0), _sub(b1, b0), _sub(a0, b0)
    a, b, c, d, e = _dot(u, u), _dot(u, v), _dot(v, v), _dot(u, w), _dot(v, w)
    best = min(_pe2(a0, b0, b1), _pe2(a1, b0, b1), _pe2(b0, a0, a1), _pe2(b1, a0, a1))
    D = a * c - b * b
    if D > 0:
        sa, sb = (b * e - c * d) / D, (a * e - b * d) / D
        if 0 <= sa <= 1 and 0 <= sb <= 1:
            best = min(best, _d2([p + sa * q for p, q in zip(a0, u)], [p + sb * q for p, q in zip(b0, v)]))
    return best


def _split(X):
    return [np.ascontiguousarray(X[:, 3 * i:3 * i + 3]) for i in range(4)]


@pytest.mark.parametrize("kind", ["pt", "ee"])
def test_distances_match_ipctk(kind):
    rng = np.random.default_rng(2024 if kind == "pt" else 2025)
    m = 60_000
    X = pt_cases(rng, m) if kind == "pt" else ee_cases(rng, m)
    ours_fn = point_triangle_dist2_batch if kind == "pt" else edge_edge_dist2_batch
    ref_fn = ipctk.point_triangle_distance if kind == "pt" else ipctk.edge_edge_distance
    ours = np.sqrt(ours_fn(*_split(X)))
    ref = np.sqrt(np.array([ref_fn(x[0:3], x[3:6], x[6:9], x[9:12]) for x in X]))
    L = np.abs(X).max(axis=1)
    # 1e-9 relative, plus a few ulps of the coordinates for distances at rounding level
    ok = np.abs(ours - ref) <= 1e-9 * np.maximum(ours, ref) + 16 * ULP * L
    bad = np.nonzero(~ok)[0]
    # the only disagreements allowed: ill-conditioned nearly parallel edges where ours equals the
    # exact (rational arithmetic) distance of the double-precision input and ipctk does not
    assert bad.size <= m // 50
    if kind == "pt":
        assert bad.size == 0
    for i in bad:
        ex = float(np.sqrt(float(exact_ee2(X[i]))))
        assert abs(ours[i] - ex) <= 1e-12 * ex + 16 * ULP * L[i]
    # spot-check the exact reference on random edge-edge cases too
    if kind == "ee":
        for i in rng.choice(m, 300, replace=False):
            ex = float(np.sqrt(float(exact_ee2(X[i]))))
            assert abs(ours[i] - ex) <= 1e-9 * ex + 16 * ULP * L[i]


# ----------------------------------------------------------------------------- CCD
def ccd_cases(rng, m, kind):
    X0 = rng.uniform(-1, 1, (m, 12))
    X1 = X0 + rng.normal(scale=0.8, size=(m, 12))
    k = m // 4
    if kind == "pt":    # point shot straight through the triangle's plane, axis-aligned triangles
        X0[:k, 3:12] = np.tile([0, 0, 0, 1, 0, 0, 0, 1, 0], (k, 1))
        X1[:k, 3:12] = X0[:k, 3:12]
        X0[:k, 0:3] = np.c_[rng.uniform(-0.2, 1, (k, 2)), rng.uniform(0.01, 1, k)]
        X1[:k, 0:3] = X0[:k, 0:3] - [0, 0, 2.0]
    else:               # parallel edges moving into each other, and crossing edges
        X0[:k] = np.c_[np.zeros(k), np.zeros(k), np.zeros(k), np.ones(k), np.zeros(k), np.zeros(k),
                       rng.uniform(-0.5, 0.5, k), rng.uniform(-0.1, 0.1, k), rng.uniform(0.01, 0.5, k),
                       np.zeros(k), np.zeros(k), np.zeros(k)]
        X0[:k, 9:12] = X0[:k, 6:9] + [1.0, 0, 0]
        X1[:k] = X0[:k]
        X1[:k, 8] -= 1.0
        X1[:k, 11] -= 1.0
    return X0, X1


@pytest.mark.parametrize("kind", ["pt", "ee"])
def test_ccd_never_misses_an_ipctk_collision(kind):
    rng = np.random.default_rng(7 if kind == "pt" else 8)
    m = 10_000
    X0, X1 = ccd_cases(rng, m, kind)
    ours = (point_triangle_ccd_batch if kind == "pt" else edge_edge_ccd_batch)(X0, X1)
    accd = ipctk.AdditiveCCD()
    fn = accd.point_triangle_ccd if kind == "pt" else accd.edge_edge_ccd
    hit = np.zeros(m, bool)
    toi = np.ones(m)
    for i in range(m):
        a, b = X0[i], X1[i]
        hit[i], toi[i] = fn(a[0:3], a[3:6], a[6:9], a[9:12], b[0:3], b[3:6], b[6:9], b[9:12])
    assert hit.sum() > m // 10
    assert np.all(ours[hit] < 1.0)                # every ipctk collision is also flagged by us
    # conservative bound: at our time the pair is still apart by at least 10% of the start distance
    dist = point_triangle_dist2_batch if kind == "pt" else edge_edge_dist2_batch
    Xt = X0 + ours[:, None] * (X1 - X0)
    assert np.all(np.sqrt(dist(*_split(Xt))) >= 0.1 * np.sqrt(dist(*_split(X0))) * (1 - 1e-9))
    # ipctk's reported time of impact is conservative too; a collision is at or after both
    # bounds, so the true TOI (>= ipctk's value) cannot be below ours by construction. Check that
    # the tighter of the two bounds is never beyond a sampled first contact.
    ts = np.linspace(0, 1, 201)
    first = np.full(m, np.inf)
    for t in ts[::-1]:
        Xs = X0 + t * (X1 - X0)
        touch = np.sqrt(dist(*_split(Xs))) <= 1e-12
        first[touch] = t
    assert np.all(ours <= first + 1e-12)
    # agreement of booleans: our extra positives come only from the eta-gap (near misses)
    extra = (ours < 1.0) & ~hit
    assert extra.sum() <= 0.2 * m


def test_tight_inclusion_agrees_on_random_pairs():
    rng = np.random.default_rng(9)
    m = 1500
    X0 = rng.uniform(-1, 1, (m, 12))
    X1 = X0 + rng.normal(scale=0.8, size=(m, 12))
    ours = point_triangle_ccd_batch(X0, X1)
    ti = ipctk.TightInclusionCCD(tolerance=1e-6, max_iterations=100_000)
    for i in range(m):
        a, b = X0[i], X1[i]
        hit, t = ti.point_triangle_ccd(a[0:3], a[3:6], a[6:9], a[9:12], b[0:3], b[3:6], b[6:9], b[9:12])
        if hit:
            assert ours[i] < 1.0


def _sheet_stack(n=8, gap=0.02):
    u = np.linspace(0, 1, n)
    P = np.array([[a, b, 0.0] for b in u for a in u])
    f = []
    for j in range(n - 1):
        for i in range(n - 1):
            v = n * j + i
            f += [[v, v + 1, v + n + 1], [v, v + n + 1, v + n]]
    f = np.array(f, np.int32)
    Q = P + [0.031, 0.047, gap]
    Q[:, 2] += 0.01 * np.sin(7 * Q[:, 0]) * np.cos(5 * Q[:, 1])
    x = np.vstack([P, Q])
    faces = np.vstack([f, f + n * n])
    return x, faces, n * n


def test_mesh_step_size_is_collision_free_when_ipctk_sees_a_collision():
    x, faces, nv = _sheet_stack()
    edges = edges_from_faces(faces)
    mesh = CollisionMesh.build(x.shape[0], faces, edges, vertex_body=np.repeat([0, 1], nv))
    imesh = ipctk.CollisionMesh(x, edges, faces)
    for drop in (0.01, 0.05, 0.2):
        p = np.zeros_like(x)
        p[nv:, 2] = -drop
        p[nv:, 0] = 0.3 * drop
        ours = max_step_size(x, p, mesh, 1e-3)
        ref = ipctk.compute_collision_free_stepsize(imesh, x, x + p, narrow_phase_ccd=ipctk.AdditiveCCD())
        assert (ref < 1.0) <= (ours < 1.0)
        assert count_intersections(x + ours * p, faces, edges) == 0
        if ref < 1.0:
            assert ours > 0.2 * ref       # not uselessly small
