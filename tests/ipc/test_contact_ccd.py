"""Additive CCD: conservative times of impact, kept gap, and the mesh-level step-size filter."""
import numpy as np
import pytest

from solver_server.contact import (find_candidates, min_distance, max_step_size,
                                       point_triangle_ccd_batch, edge_edge_ccd_batch,
                                       point_triangle_dist2_batch, edge_edge_dist2_batch)
from solver_server.contact.intersection import count_intersections

from .test_contact_barrier import _two_sheets

ETA = 0.1


def test_normal_approach_gives_exactly_one_minus_eta_of_the_time_of_impact():
    X0 = np.array([[0.2, 0.2, 0.5, 0, 0, 0, 1, 0, 0, 0, 1, 0]])
    X1 = X0.copy()
    X1[0, 2] = -0.5                                        # true TOI = 0.5
    t = point_triangle_ccd_batch(X0, X1, eta=ETA)[0]
    assert t == pytest.approx(0.9 * 0.5, rel=1e-12)
    t = point_triangle_ccd_batch(X0, X1, eta=ETA, offset=0.1)[0]   # thickness: contact at z = 0.1
    assert t == pytest.approx(0.9 * 0.4, rel=1e-12)
    X1[0, 2] = 0.3                                         # stops short: no impact
    assert point_triangle_ccd_batch(X0, X1, eta=ETA)[0] == 1.0


def _path_dist(fn, X0, X1, ts):
    """Distances (len(ts), m) along the straight paths."""
    out = []
    for t in ts:
        X = (1 - t) * X0 + t * X1
        out.append(np.sqrt(fn(X[:, 0:3], X[:, 3:6], X[:, 6:9], X[:, 9:12])))
    return np.array(out)


@pytest.mark.parametrize("kind", ["pt", "ee"])
def test_random_pairs_are_conservative_and_keep_the_gap(kind):
    rng = np.random.default_rng(11)
    m = 3000
    X0 = rng.uniform(-1, 1, (m, 12))
    X1 = X0 + rng.normal(scale=1.0, size=(m, 12))
    # some pairs nearly touching, sliding, or parallel
    X1[: m // 4, 0:3] = X0[: m // 4, 0:3] + [0.0, 0.0, 2.0]
    ccd = point_triangle_ccd_batch if kind == "pt" else edge_edge_ccd_batch
    dist = point_triangle_dist2_batch if kind == "pt" else edge_edge_dist2_batch
    toi = ccd(X0, X1, eta=ETA)
    ts = np.linspace(0, 1, 401)
    D = _path_dist(dist, X0, X1, ts)                       # (401, m)
    d0 = D[0]
    for k in range(m):
        hit = np.nonzero(D[:, k] <= 1e-9)[0]
        if hit.size:
            assert toi[k] <= ts[hit[0]]                    # never past a sampled contact
        safe = ts <= toi[k]
        assert D[safe, k].min() > 0.0                      # path up to toi is collision-free (sampled)
    Xt = X0 + toi[:, None] * (X1 - X0)
    dt = np.sqrt(dist(Xt[:, 0:3], Xt[:, 3:6], Xt[:, 6:9], Xt[:, 9:12]))
    assert np.all(dt >= ETA * d0 * (1 - 1e-9))            # the gap kept at the returned time
    assert np.sum(toi < 1.0) > 100


def test_mesh_step_size_stops_before_contact():
    x, mesh = _two_sheets(gap=0.05)
    p = np.zeros_like(x)
    p[9:, 2] = -0.035                                      # push the bent upper sheet into the lower one
    alpha = max_step_size(x, p, mesh, 0.01)
    assert 0.0 < alpha < 1.0
    y = x + alpha * p
    cands = find_candidates(y, mesh, 0.01)
    d0 = min_distance(x, find_candidates(x, mesh, 1.0), mesh)
    assert min_distance(y, cands, mesh) >= ETA * d0 * (1 - 1e-9)
    assert count_intersections(y, mesh.faces, mesh.edges) == 0
    assert count_intersections(x + p, mesh.faces, mesh.edges) > 0   # the full step would intersect
    # lateral motion only: no contact possible
    p[:] = 0.0
    p[9:, 0] = 0.3
    assert max_step_size(x, p, mesh, 0.01) == 1.0


def test_fused_mesh_step_size_equals_min_over_candidate_pairs():
    """max_step_size (broad + narrow phase fused, running minimum as time bound) returns exactly
    the minimum of the per-pair ACCD times over the explicit swept-box candidate list."""
    from solver_server.contact import find_candidates_ccd
    rng = np.random.default_rng(5)
    hits = 0
    for trial in range(4):
        x, mesh = _two_sheets(gap=0.05)
        x = x + rng.normal(size=x.shape) * 0.003
        p = rng.normal(size=x.shape) * 0.02
        p[9:, 2] -= 0.04 * (trial + 1)
        c = find_candidates_ccd(x, x + p, mesh, 0.0)
        y = x + p
        f, e = mesh.faces, mesh.edges
        PT0 = np.concatenate([x[c.pt[:, 0]], x[f[c.pt[:, 1]]].reshape(-1, 9)], axis=1)
        PT1 = np.concatenate([y[c.pt[:, 0]], y[f[c.pt[:, 1]]].reshape(-1, 9)], axis=1)
        EE0 = np.concatenate([x[e[c.ee[:, 0]]].reshape(-1, 6), x[e[c.ee[:, 1]]].reshape(-1, 6)], axis=1)
        EE1 = np.concatenate([y[e[c.ee[:, 0]]].reshape(-1, 6), y[e[c.ee[:, 1]]].reshape(-1, 6)], axis=1)
        ref = min(1.0, point_triangle_ccd_batch(PT0, PT1, eta=ETA).min(initial=1.0),
                  edge_edge_ccd_batch(EE0, EE1, eta=ETA).min(initial=1.0))
        alpha = max_step_size(x, p, mesh, 0.01)
        assert alpha == pytest.approx(ref, rel=1e-12)     # batch uses (x + p) - x, not p: last-ulp rounding
        hits += alpha < 1.0
    assert hits >= 3
