"""Per-vertex elastic kernels of the fast solver (blockdescent/vertex_elastic.py) against the shared
energies of the Newton solver (ipc/membrane.py, bending.py, elastic_tet.py, rod_stretch.py):

* every per-vertex gradient equals the finite difference of the *shared* energy w.r.t. that vertex
  (so both solvers minimise the same incremental potential);
* the membrane block with clamp=False is the exact Hessian block (FD of the per-vertex gradient),
  and clamp=True only lifts the compression term q = n^T S n to 0;
* hinge / rod-bending / rod-stretch / tet blocks equal the slot's diagonal 3x3 block of the shared
  element Hessian kernels;
* every block the sweep uses is symmetric PSD.

The element's vertices sit at scattered rows of a larger array filled with junk, so a kernel that
reads the wrong rows or slot fails.
"""
import numpy as np
import pytest

from solver_server.solvers.block_descent.vertex_elastic import (bending_vertex, membrane_vertex, rod_stretch_vertex,
                                                       tet_vertex, tet_volume_moving)
from solver_server.energies import bending, elastic_tet, membrane, rod_stretch
from solver_server.energies.isotropic_models import MODEL_IDS, lame

from .bd_fd import assert_sym_psd, embed, fd_vertex_gradient, fd_vertex_jacobian, rel

N_TOTAL = 9


def _scratch():
    return np.zeros((3, 12)), np.empty((5, 3)), np.empty(3), np.empty(3)


# --- membrane (StVK) -----------------------------------------------------------------------------
TRI_X = np.array([[0, 0, 0], [0.1, 0, 0], [0.02, 0.09, 0.0]])
TRI_IDS = np.array([6, 2, 4], np.int32)


def _membrane_setup():
    Dm_inv, area = membrane.rest_shape(TRI_X, np.array([[0, 1, 2]], np.int32))
    mu, lam = lame(1e6, 0.3)
    thick = 1e-3
    tris = TRI_IDS[None].copy()
    args = (tris, Dm_inv, area, np.array([mu]), np.array([lam]), np.array([thick]))
    return args, Dm_inv[0], float(area[0] * thick), mu, lam


def _membrane_vertex(x, slot, clamp):
    args, Dm, w, mu, lam = _membrane_setup()
    g = np.zeros(3)
    H = np.zeros((3, 3))
    membrane_vertex(x, TRI_IDS, Dm, w, mu, lam, slot, g, H, clamp)
    return g, H


def _membrane_q(x, slot):
    """q = n^T S n computed independently: S the StVK second Piola stress, n = dF/dx_slot."""
    _, Dm, _, mu, lam = _membrane_setup()
    Ds = np.stack([x[TRI_IDS[1]] - x[TRI_IDS[0]], x[TRI_IDS[2]] - x[TRI_IDS[0]]], axis=1)
    F = Ds @ Dm
    E = 0.5 * (F.T @ F - np.eye(2))
    S = 2 * mu * E + lam * np.trace(E) * np.eye(2)
    n = [-(Dm[0] + Dm[1]), Dm[0], Dm[1]][slot]
    return float(n @ S @ n)


@pytest.mark.parametrize("stretch", [1.15, 1.0, 0.7])   # stretched, near rest, compressed (StVK indefinite)
def test_membrane_vertex_gradient_and_exact_block(stretch):
    rng = np.random.default_rng(11)
    args, *_ = _membrane_setup()
    E = lambda y: membrane.membrane_energy(y, *args)
    for trial in range(3):
        X = stretch * TRI_X + 0.01 * rng.standard_normal(TRI_X.shape)
        x = embed(X, N_TOTAL, TRI_IDS)
        gel = membrane.membrane_gradient_elems(x, *args)[0].reshape(3, 3)
        Hel = membrane.membrane_hessian_elems(x, *args, False)[0]
        for slot in range(3):
            v = TRI_IDS[slot]
            g, H = _membrane_vertex(x, slot, False)
            assert rel(g, fd_vertex_gradient(E, x, v)) < 1e-6
            assert rel(g, gel[slot]) < 1e-12
            # exact block: FD of the per-vertex gradient, and the shared element Hessian's diagonal block
            H_fd = fd_vertex_jacobian(lambda y: _membrane_vertex(y, slot, False)[0], x, v)
            assert rel(H, H_fd) < 1e-6
            assert rel(H, Hel[3 * slot:3 * slot + 3, 3 * slot:3 * slot + 3]) < 1e-10
            assert np.abs(H - H.T).max() <= 1e-12 * np.abs(H).max()


@pytest.mark.parametrize("stretch", [1.15, 0.7, 0.4])
def test_membrane_vertex_clamp_lifts_only_the_compression_term(stretch):
    rng = np.random.default_rng(12)
    seen_negative_q = False
    for trial in range(5):
        X = stretch * TRI_X + 0.01 * rng.standard_normal(TRI_X.shape)
        x = embed(X, N_TOTAL, TRI_IDS)
        for slot in range(3):
            g0, H0 = _membrane_vertex(x, slot, False)
            g1, H1 = _membrane_vertex(x, slot, True)
            assert np.array_equal(g0, g1)                         # the gradient never changes
            q = _membrane_q(x, slot)
            seen_negative_q |= q < 0
            s = np.abs(H0).max()
            assert np.abs(H1 - (H0 + max(-q, 0.0) * _membrane_setup()[2] * np.eye(3))).max() <= 1e-10 * s
            assert_sym_psd(H1)                                    # what the sweep uses is PSD
    if stretch < 1.0:
        assert seen_negative_q                                    # the clamp was exercised


# --- hinge and rod bending -----------------------------------------------------------------------
HINGE_X = np.array([[0, 0, 0], [0.1, 0, 0], [0.05, 0.08, 0.0], [0.04, -0.07, 0.0]])
HINGE_IDS = np.array([3, 7, 0, 5], np.int32)
ROD_X = np.array([[0, 0, 0], [0.1, 0, 0], [0.2, 0.0, 0.0]])
ROD_IDS = np.array([8, 1, 4], np.int32)


def _bend_vertex(kind, x, ids, kw, d0, slot):
    g = np.zeros(3)
    H = np.zeros((3, 3))
    J, s5, dv, r = _scratch()
    bending_vertex(kind, x, ids, kw, d0, slot, g, H, J, s5, dv, r)
    return g, H


@pytest.mark.parametrize("kind,d0", [(0, 0.0), (0, 0.3), (1, 0.0), (1, 0.25)])
def test_bending_vertex_gradient_fd_and_block_is_shared_gauss_newton(kind, d0):
    rng = np.random.default_rng(20 + kind)
    X0, ids = (HINGE_X, HINGE_IDS) if kind == 0 else (ROD_X, ROD_IDS)
    kw = 2.0 if kind == 0 else 0.3
    st = ids[None].copy()
    kwa, d0a = np.array([kw]), np.array([d0])
    E = lambda y: bending.bending_energy(kind, y, st, kwa, d0a)
    k = len(ids)
    for trial in range(3):
        X = X0 + 0.015 * rng.standard_normal(X0.shape)
        x = embed(X, N_TOTAL, ids)
        gel = bending.bending_gradient_elems(kind, x, st, kwa, d0a)[0].reshape(k, 3)
        Hel = bending.bending_hessian_elems(kind, x, st, kwa, d0a)[0]
        assert np.abs(gel).max() > 1e-3 * kw   # a genuinely bent configuration
        for slot in range(k):
            g, H = _bend_vertex(kind, x, ids, kw, d0, slot)
            assert rel(g, fd_vertex_gradient(E, x, ids[slot])) < 1e-6
            assert rel(g, gel[slot]) < 1e-12
            assert rel(H, Hel[3 * slot:3 * slot + 3, 3 * slot:3 * slot + 3]) < 1e-12
            assert_sym_psd(H)


def test_bending_vertex_block_is_exact_at_flat_rest():
    """At the flat rest state the Gauss-Newton block is the exact Hessian block."""
    for kind, X0, ids, kw in ((0, HINGE_X, HINGE_IDS, 2.0), (1, ROD_X, ROD_IDS, 0.3)):
        x = embed(X0, N_TOTAL, ids)
        for slot in range(len(ids)):
            g, H = _bend_vertex(kind, x, ids, kw, 0.0, slot)
            assert np.abs(g).max() < 1e-12
            H_fd = fd_vertex_jacobian(lambda y: _bend_vertex(kind, y, ids, kw, 0.0, slot)[0], x, ids[slot], 1e-6)
            if np.abs(H_fd).max() > 0:
                assert rel(H, H_fd) < 1e-5
            assert_sym_psd(H)


def test_hinge_fold_energy_gradient_matches_angle_law():
    """Physics check: folding the flat hinge by theta gives E ~ kw/2 (2 sin(theta/2))^2, and the per-vertex
    gradient of the folding vertex is the derivative of that law along its circular path."""
    kw = 2.0
    theta = 0.2
    X = HINGE_X.copy()
    X[3] = [0.04, -0.07 * np.cos(theta), 0.07 * np.sin(theta)]
    x = embed(X, N_TOTAL, HINGE_IDS)
    g, _ = _bend_vertex(0, x, HINGE_IDS, kw, 0.0, 3)
    tangent = np.array([0.0, 0.07 * np.sin(theta), 0.07 * np.cos(theta)])   # d x3 / d theta
    dE = kw * (2 * np.sin(theta / 2)) * np.cos(theta / 2)                  # d/dtheta of kw/2 (2 sin(theta/2))^2
    assert g @ tangent == pytest.approx(dE, rel=1e-10)


# --- rod stretch -----------------------------------------------------------------------------------
EDGE_X = np.array([[0, 0, 0], [0.1, 0.02, -0.01]])
EDGE_IDS = np.array([5, 2], np.int32)


@pytest.mark.parametrize("q_scale", [1.3, 1.0, 0.8, 0.5])   # stretched, rest, mildly and strongly compressed
def test_rod_stretch_vertex_gradient_fd_and_projected_block(q_scale):
    rng = np.random.default_rng(30)
    rest = float(np.linalg.norm(EDGE_X[1] - EDGE_X[0]))
    k = 50.0
    edges = EDGE_IDS[None].copy()
    E = lambda y: rod_stretch.stretch_energy(y, edges, np.array([rest]), np.array([k]))
    for trial in range(3):
        X = EDGE_X.copy()
        X[1] = X[0] + q_scale * (EDGE_X[1] - EDGE_X[0]) + 0.003 * rng.standard_normal(3)
        x = embed(X, N_TOTAL, EDGE_IDS)
        Hp = rod_stretch.stretch_hessian_elems(x, edges, np.array([rest]), np.array([k]), True)[0]
        Hx = rod_stretch.stretch_hessian_elems(x, edges, np.array([rest]), np.array([k]), False)[0]
        for slot in range(2):
            g = np.zeros(3)
            H = np.zeros((3, 3))
            rod_stretch_vertex(x, EDGE_IDS, rest, k, slot, g, H)
            assert rel(g, fd_vertex_gradient(E, x, EDGE_IDS[slot])) < 1e-6
            assert rel(H, Hp[3 * slot:3 * slot + 3, 3 * slot:3 * slot + 3]) < 1e-12
            assert_sym_psd(H)
            if q_scale > 1.05:   # stretched: nothing to project, the block is the exact Hessian block
                assert rel(H, Hx[3 * slot:3 * slot + 3, 3 * slot:3 * slot + 3]) < 1e-12


# --- tetrahedra ----------------------------------------------------------------------------------
TET_X = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.12, 0], [0.01, 0.02, 0.09]])
TET_IDS = np.array([7, 0, 3, 5], np.int32)


def _tet_setup(model):
    Dm_inv, vol = elastic_tet.rest_shape(TET_X, np.array([[0, 1, 2, 3]], np.int32))
    mu, lam = lame(1e5, 0.35)
    tets = TET_IDS[None].copy()
    args = (tets, Dm_inv, vol, np.array([mu]), np.array([lam]), np.array([MODEL_IDS[model]], np.int32))
    return args, Dm_inv[0], float(vol[0]), mu, lam, MODEL_IDS[model]


def _tet_vertex(model, x, slot, project):
    _, Dm, vol, mu, lam, mid = _tet_setup(model)
    g = np.zeros(3)
    H = np.zeros((3, 3))
    tet_vertex(x, TET_IDS, Dm, vol, mu, lam, mid, slot, g, H, project)
    return g, H


@pytest.mark.parametrize("model", list(MODEL_IDS))
@pytest.mark.parametrize("scale", [1.0, 0.6])   # mild deformation, strong compression (projection active)
def test_tet_vertex_gradient_fd_and_blocks(model, scale):
    rng = np.random.default_rng(40)
    args, *_ = _tet_setup(model)
    E = lambda y: elastic_tet.tet_energy(y, *args)
    checked = 0
    for trial in range(4):
        X = scale * TET_X + 0.02 * rng.standard_normal(TET_X.shape)
        x = embed(X, N_TOTAL, TET_IDS)
        if elastic_tet.tet_volumes(x, args[0])[0] <= 0.2 * elastic_tet.tet_volumes(embed(TET_X, N_TOTAL, TET_IDS),
                                                                                  args[0])[0]:
            continue
        checked += 1
        gel = elastic_tet.tet_gradient_elems(x, *args)[0].reshape(4, 3)
        Hx = elastic_tet.tet_hessian_elems(x, *args, False)[0]
        Hp = elastic_tet.tet_hessian_elems(x, *args, True)[0]
        for slot in range(4):
            v = TET_IDS[slot]
            g, H_exact = _tet_vertex(model, x, slot, False)
            g2, H_proj = _tet_vertex(model, x, slot, True)
            assert np.array_equal(g, g2)
            assert rel(g, fd_vertex_gradient(E, x, v)) < 1e-6
            assert rel(g, gel[slot]) < 1e-12
            blk = slice(3 * slot, 3 * slot + 3)
            assert rel(H_exact, Hx[blk, blk]) < 1e-10
            assert rel(H_proj, Hp[blk, blk]) < 1e-10
            H_fd = fd_vertex_jacobian(lambda y: _tet_vertex(model, y, slot, False)[0], x, v)
            assert rel(H_exact, H_fd) < 1e-6
            assert_sym_psd(H_proj)
    assert checked >= 2


def test_tet_volume_moving_is_the_signed_volume_and_affine_in_one_vertex():
    rng = np.random.default_rng(41)
    tets = TET_IDS[None].copy()
    for trial in range(20):
        X = TET_X + 0.05 * rng.standard_normal(TET_X.shape)
        x = embed(X, N_TOTAL, TET_IDS)
        V = elastic_tet.tet_volumes(x, tets)[0]
        for slot in range(4):
            v = TET_IDS[slot]
            assert tet_volume_moving(x, TET_IDS, slot, x[v].copy()) == pytest.approx(V, rel=1e-12, abs=1e-18)
            p, q = rng.standard_normal(3) * 0.1, rng.standard_normal(3) * 0.1
            y = x.copy()
            y[v] = q
            assert tet_volume_moving(x, TET_IDS, slot, q) == pytest.approx(elastic_tet.tet_volumes(y, tets)[0],
                                                                           rel=1e-12, abs=1e-18)
            # affine: V(p + t (q - p)) = (1 - t) V(p) + t V(q)
            t = rng.uniform(-1, 2)
            lhs = tet_volume_moving(x, TET_IDS, slot, p + t * (q - p))
            rhs = (1 - t) * tet_volume_moving(x, TET_IDS, slot, p) + t * tet_volume_moving(x, TET_IDS, slot, q)
            assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-15)
