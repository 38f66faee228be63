"""Per-vertex contact kernels of the fast solver (blockdescent/vertex_contact.py) against the shared
IPC barrier and lagged friction (ipc/contact):

* barrier: the sum over a vertex's pairs of barrier_vertex equals the FD of the shared
  barrier_energy (same kappa, dhat, offsets) w.r.t. that vertex, for point-triangle pairs in every
  closest-feature region and non-parallel edge-edge pairs; each pair's block is
  kappa b''(s) c_a^2 n n^T with c_a n = dd/dx_a measured by finite differences of the distance
  alone (envelope theorem), symmetric PSD, zero across the normal; pairs beyond dhat add nothing;
  for nearly parallel (mollified) edges the only difference to the FD is the documented dropped
  mollifier-gradient term kappa b(s) dm/dx_a;
* friction: the sum of friction_vertex equals the FD of the shared friction_energy in the static
  (|u| < eps) and sliding regimes; the block is mu lambda f1(|u|)/|u| c_a^2 T T^T, symmetric PSD,
  exact across the slip direction and an upper bound of the exact Hessian (a majorizer, which keeps
  the local Newton step a descent step); the force never exceeds mu lambda |c_a| (Coulomb).
"""
import math

import numpy as np
import pytest

from solver_server.solvers.block_descent.vertex_contact import barrier_vertex, contact_scratch, friction_vertex
from solver_server.contact import (CollisionMesh, barrier_energy, friction_energy, friction_setup,
                                       find_candidates)
from solver_server.contact.barrier import barrier, barrier_first_derivative, barrier_second_derivative
from solver_server.contact.mollifier import mollifier
from solver_server.contact.pairs import contact_distances, pair_set

from .bd_fd import assert_sym_psd, fd_vertex_gradient, fd_vertex_jacobian, rel

DHAT = 0.05
KAPPA = 30.0
TRI = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)


def _pt_mesh(p, off_point=0.004, off_tri=0.002):
    x = np.vstack([TRI, p]).astype(float)
    mesh = CollisionMesh.build(4, np.array([[0, 1, 2]], np.int32), vertex_offset=np.array([off_tri] * 3 + [off_point]),
                               vertex_body=np.array([0, 0, 0, 1]), body_friction=np.array([0.4, 0.1]),
                               rest_positions=x)
    return x, mesh


def _ee_mesh(a0, a1, b0, b1, off=0.001):
    x = np.array([a0, a1, b0, b1], float)
    mesh = CollisionMesh.build(4, np.zeros((0, 3), np.int32), edges=np.array([[0, 1], [2, 3]], np.int32),
                               vertex_offset=np.full(4, off), vertex_body=np.array([0, 0, 1, 1]),
                               body_friction=np.array([0.3, 0.3]), rest_positions=x)
    return x, mesh


def _pairs(x, mesh):
    cands = find_candidates(x, mesh, DHAT)
    ps = pair_set(cands, mesh, x)
    return cands, ps


def _vertex_barrier(x, ps, v, pairs=None):
    """Sum of barrier_vertex over the pairs containing v: (g, H, [(k, slot, s, g_k, H_k)])."""
    g = np.zeros(3)
    H = np.zeros((3, 3))
    X = contact_scratch()
    per = []
    for k in range(len(ps)) if pairs is None else pairs:
        for slot in range(4):
            if ps.ids[k, slot] == v:
                gk = np.zeros(3)
                Hk = np.zeros((3, 3))
                s = barrier_vertex(x, ps.ids, ps.is_ee, ps.off, ps.epsx, k, slot, DHAT, KAPPA, gk, Hk, X)
                g += gk
                H += Hk
                per.append((k, slot, s, gk, Hk))
    return g, H, per


# point above the interior (point-plane), beyond an edge (point-edge), beyond a corner (point-point)
PT_CASES = {"interior": [0.25, 0.3, 0.02], "edge_region": [0.5, -0.012, 0.015], "corner_region": [-0.01, -0.012, 0.02],
            "beyond_dhat": [-0.04, -0.04, 0.02]}
# crossing edges (line-line), an end point over the other edge (point-edge), two end points (point-point)
EE_CASES = {"crossing": ([-0.5, 0, 0], [0.5, 0.1, 0], [0.1, -0.5, 0.02], [-0.1, 0.5, 0.03]),
            "end_on_edge": ([-0.5, 0, 0], [0.5, 0, 0], [0.1, 0.02, 0.015], [0.3, 0.5, 0.4]),
            "end_to_end": ([-0.5, 0, 0], [0.0, 0, 0], [0.01, 0.012, 0.01], [0.4, 0.5, 0.3])}


def _check_barrier_vertex(x, mesh, verts, expect_active=True):
    cands, ps = _pairs(x, mesh)
    assert len(ps) > 0
    E = lambda y: barrier_energy(y, cands, mesh, DHAT, KAPPA)
    s_all = contact_distances(x, ps.ids, ps.is_ee, ps.off)
    assert (s_all < DHAT).any() == expect_active
    pushed = 0
    for v in verts:
        g, H, per = _vertex_barrier(x, ps, v)
        g_fd = fd_vertex_gradient(E, x, v, 1e-7)
        if expect_active:
            # vertices with c_a = 0 (e.g. the far end of a point-edge pair) feel nothing
            pushed += np.abs(g_fd).max() > 0
            assert rel(g, g_fd) < 1e-6
        else:
            assert np.abs(g).max() == 0.0 and np.abs(H).max() == 0.0 and np.abs(g_fd).max() == 0.0
        assert_sym_psd(H)
        for k, slot, s, gk, Hk in per:
            assert s == pytest.approx(s_all[k], rel=1e-13, abs=1e-15)
            if s >= DHAT:
                assert np.abs(gk).max() == 0.0 and np.abs(Hk).max() == 0.0
                continue
            # dd/dx_v = c_a n by FD of the unsigned distance of this pair alone
            dist = lambda y: contact_distances(y, ps.ids[k:k + 1], ps.is_ee[k:k + 1], ps.off[k:k + 1])[0]
            dd = fd_vertex_gradient(dist, x, v, 1e-7)
            assert rel(gk, KAPPA * barrier_first_derivative(s, DHAT) * dd) < 1e-6
            want = KAPPA * barrier_second_derivative(s, DHAT) * np.outer(dd, dd)
            assert rel(Hk, want) < 1e-6
            assert_sym_psd(Hk)
            if np.linalg.norm(dd) > 1e-9:
                nrm = dd / np.linalg.norm(dd)
                t = np.cross(nrm, [0.3, -0.5, 0.8])
                t /= np.linalg.norm(t)
                assert np.abs(Hk @ t).max() <= 1e-7 * np.abs(Hk).max()   # nothing across the (FD) normal
                assert nrm @ Hk @ nrm == pytest.approx(
                    KAPPA * barrier_second_derivative(s, DHAT) * (dd @ dd), rel=1e-6)   # kappa b'' c_a^2
                assert nrm @ Hk @ nrm > 0
    assert pushed >= (2 if expect_active else 0)


@pytest.mark.parametrize("case", list(PT_CASES))
def test_barrier_vertex_point_triangle(case):
    x, mesh = _pt_mesh(PT_CASES[case])
    _check_barrier_vertex(x, mesh, range(4), expect_active=case != "beyond_dhat")


@pytest.mark.parametrize("case", list(EE_CASES))
def test_barrier_vertex_edge_edge(case):
    x, mesh = _ee_mesh(*EE_CASES[case])
    cands, ps = _pairs(x, mesh)
    # these edges are far from parallel: the mollifier is exactly 1
    X = x.ravel()
    ea, eb = x[1] - x[0], x[3] - x[2]
    assert np.linalg.norm(np.cross(ea, eb)) ** 2 >= ps.epsx[0]
    _check_barrier_vertex(x, mesh, range(4))


def test_barrier_vertex_many_pairs_sum_to_the_shared_gradient():
    """A vertex with several active pairs at once (a point above a fan of triangles): the per-pair
    contributions add up to the FD of the total shared barrier."""
    ring = 6
    ang = np.linspace(0, 2 * np.pi, ring, endpoint=False)
    rim = np.stack([0.1 * np.cos(ang), 0.1 * np.sin(ang), np.zeros(ring)], 1)
    V = np.vstack([[0, 0, 0], rim, [0.004, 0.003, 0.01]])
    F = np.array([[0, 1 + i, 1 + (i + 1) % ring] for i in range(ring)], np.int32)
    n = len(V)
    mesh = CollisionMesh.build(n, F, vertex_offset=np.full(n, 0.001),
                               vertex_body=np.r_[np.zeros(n - 1), 1].astype(np.int32),
                               body_friction=np.zeros(2), self_contact=np.array([0, 0]), rest_positions=V)
    cands, ps = _pairs(V, mesh)
    s = contact_distances(V, ps.ids, ps.is_ee, ps.off)
    assert (s < DHAT).sum() >= 6
    _check_barrier_vertex(V, mesh, [n - 1, 0, 1])


def test_barrier_vertex_mollified_edges_drop_only_the_mollifier_gradient():
    """Nearly parallel edges: the mollifier m < 1 scales value and gradient; the kernel's gradient is
    kappa m b'(s) c_a n (the docstring), so FD(total) - kernel = kappa b(s) dm/dx_a exactly."""
    x, mesh = _ee_mesh([-0.5, 0, 0], [0.5, 0, 0], [-0.3, 0.005, 0.012], [0.4, 0.02, 0.012])
    cands, ps = _pairs(x, mesh)
    assert len(ps) == 1
    X = contact_scratch()

    def cross2(y):
        return float(np.linalg.norm(np.cross(y[1] - y[0], y[3] - y[2])) ** 2)

    m, m1, _ = mollifier(cross2(x), ps.epsx[0])
    assert 0.05 < m < 0.95                          # genuinely mollified
    E = lambda y: barrier_energy(y, cands, mesh, DHAT, KAPPA)
    s = contact_distances(x, ps.ids, ps.is_ee, ps.off)[0]
    assert 0 < s < DHAT
    dist = lambda y: contact_distances(y, ps.ids, ps.is_ee, ps.off)[0]
    for v in range(4):
        g = np.zeros(3)
        H = np.zeros((3, 3))
        barrier_vertex(x, ps.ids, ps.is_ee, ps.off, ps.epsx, 0, v, DHAT, KAPPA, g, H, X)
        dd = fd_vertex_gradient(dist, x, v, 1e-7)
        assert rel(g, KAPPA * m * barrier_first_derivative(s, DHAT) * dd) < 1e-6
        assert rel(H, KAPPA * m * barrier_second_derivative(s, DHAT) * np.outer(dd, dd)) < 1e-6
        dropped = KAPPA * barrier(s, DHAT) * m1 * fd_vertex_gradient(cross2, x, v, 1e-7)
        assert rel(g + dropped, fd_vertex_gradient(E, x, v, 1e-7)) < 1e-5
        assert_sym_psd(H)


# --- friction ------------------------------------------------------------------------------------
EPS_F = 1e-4     # eps_v h (m)


def _friction_case():
    """One vertex (body 1, mu 0.1) 0.03 m above a triangle (body 0, mu 0.4): pair mu = 0.4."""
    xp, mesh = _pt_mesh([0.25, 0.3, 0.03], off_point=0.0, off_tri=0.0)
    cands = find_candidates(xp, mesh, DHAT)
    fs = friction_setup(xp, cands, mesh, DHAT, KAPPA)
    assert len(fs) == 1
    return xp, fs


def _vertex_friction(x, xp, fs, v):
    g = np.zeros(3)
    H = np.zeros((3, 3))
    for k in range(len(fs)):
        for slot in range(4):
            if fs.ids[k, slot] == v:
                friction_vertex(x, xp, fs.ids, fs.coef, fs.T, fs.mu_lambda, k, slot, EPS_F, g, H)
    return g, H


@pytest.mark.parametrize("slip", [3e-5, 2e-3])   # static (|u| < eps) and sliding (|u| > eps)
def test_friction_vertex_fd_block_and_coulomb_bound(slip):
    xp, fs = _friction_case()
    rng = np.random.default_rng(50)
    E = lambda y: friction_energy(y, xp, fs, EPS_F)
    ml = fs.mu_lambda[0]
    lam = -KAPPA * barrier_first_derivative(0.03, DHAT)
    assert ml == pytest.approx(0.4 * lam, rel=1e-12)        # pair mu = max(0.4, 0.1), lambda = kappa |b'(s)|
    for trial in range(4):
        x = xp.copy()
        d = rng.standard_normal((4, 3))
        d *= slip / np.linalg.norm(d[:, :2], axis=1).max()
        x += d
        u3 = (fs.coef[0][:, None] * (x - xp)[fs.ids[0]]).sum(0)
        u = fs.T[0].T @ u3
        y = float(np.linalg.norm(u))
        f = ml * ((1.0 / y) if y >= EPS_F else (2 * EPS_F - y) / EPS_F ** 2)
        assert (y < EPS_F) == (slip < EPS_F)
        h = 1e-10 if slip < EPS_F else 1e-8
        for v in range(4):
            g, H = _vertex_friction(x, xp, fs, v)
            ca = fs.coef[0][list(fs.ids[0]).index(v)]
            assert rel(g, fd_vertex_gradient(E, x, v, h)) < 1e-5
            assert np.linalg.norm(g) <= ml * abs(ca) * (1 + 1e-12)     # Coulomb: |force| <= mu lambda |c_a|
            assert rel(H, f * ca * ca * fs.T[0] @ fs.T[0].T) < 1e-12
            assert_sym_psd(H)
            # exact Hessian block by FD of the per-vertex gradient: H majorises it, equal across the slip
            H_fd = fd_vertex_jacobian(lambda z: _vertex_friction(z, xp, fs, v)[0], x, v, h)
            H_fd = 0.5 * (H_fd + H_fd.T)
            assert np.linalg.eigvalsh(H - H_fd).min() >= -1e-5 * np.abs(H).max()
            perp = fs.T[0] @ np.array([-u[1], u[0]]) / y
            assert perp @ H @ perp == pytest.approx(perp @ H_fd @ perp, rel=1e-5)
            nrm = np.cross(fs.T[0][:, 0], fs.T[0][:, 1])
            assert np.abs(H @ nrm).max() <= 1e-12 * np.abs(H).max()


def test_friction_force_opposes_slip_with_full_coulomb_magnitude_when_sliding():
    """Physics: a point sliding 2 mm (>> eps) along +x feels -mu lambda x^ (c_point = 1)."""
    xp, fs = _friction_case()
    x = xp.copy()
    x[3] += [2e-3, 0, 0]
    g, _ = _vertex_friction(x, xp, fs, 3)
    assert g == pytest.approx([fs.mu_lambda[0], 0, 0], rel=1e-12, abs=1e-12 * fs.mu_lambda[0])


def test_may_be_active_never_skips_a_pair_in_contact():
    """vertex_contact.may_be_active skips a pair only when s(x) >= dhat is certain: random
    point-triangle and edge-edge pairs, random moves of their vertices from the detection point, the
    exact distance after the move checked for every skipped pair; and it does skip most far pairs."""
    from solver_server.solvers.block_descent.vertex_contact import may_be_active, moves_from_centre
    rng = np.random.default_rng(7)
    dhat = 0.01
    skipped = tight = 0
    for trial in range(4000):
        c = rng.normal(0.0, 0.05, (4, 3))
        is_ee = np.array([trial % 2], np.uint8)
        ids = np.arange(4, dtype=np.int32).reshape(1, 4)
        s0 = contact_distances(c, ids, is_ee, np.zeros(1))
        scale = rng.choice([0.001, 0.01, 0.05])
        x = c + rng.normal(0.0, scale, (4, 3)) * rng.uniform(0, 1, (4, 1))
        s = contact_distances(x, ids, is_ee, np.zeros(1))[0]
        D = np.empty(4)
        moves_from_centre(x, c, np.zeros(0, np.int32), D)
        if not may_be_active(D, ids, is_ee, s0, 0, dhat):
            skipped += 1
            assert s >= dhat, (trial, s, s0)
            tight += s < 2 * dhat
    assert skipped > 1000 and tight > 0, (skipped, tight)


def test_sweeps_keep_the_move_lengths_current(monkeypatch):
    """may_be_active reads each vertex's move from the detection point from CT's cache D, which the
    sweep updates after every colour and at every sweep's start (colliders, bodies and the
    acceleration move vertices outside the colours), and gradient_all at its entry. After every batch
    of sweeps of a cloth dropped on a sphere (contact on), D equals |x - centre| for every vertex:
    a stale D could skip a barrier term that is active."""
    import solver_server.solvers.block_descent.stepper as stp
    from protocol.scene import Body
    from solver_server.model.primitives import icosphere
    from .bd_scenes import cloth, fast_backend, fast_scene
    S, ST = icosphere(0.25, subdivisions=2)
    b = fast_backend(fast_scene(cloth(10, 0.27), Body("sphere", "collider", S, ST), frame_end=6))
    seen = []
    real = stp.run_sweeps

    def checked(*a):
        real(*a)
        x, CT = a[1], a[12]
        if len(CT.ids):
            seen.append(float(np.abs(CT.D - np.linalg.norm(x - CT.centre, axis=1)).max()))
    monkeypatch.setattr(stp, "run_sweeps", checked)
    for _ in range(4):
        b.advance()
    assert len(seen) > 10
    assert max(seen) == 0.0, max(seen)
