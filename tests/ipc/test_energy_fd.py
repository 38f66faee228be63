"""Finite-difference checks of every elastic energy's gradient and Hessian, PSD of the projected
Hessians, zero energy/gradient at rest, rotation invariance."""
import numpy as np
import pytest

from solver_server.energies import bending, elastic_tet, membrane, rod_stretch
from solver_server.energies.fem_common import scatter_gradient
from solver_server.energies.isotropic_models import MODEL_IDS, lame


def _rot(rng):
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _fd(f_energy, f_grad, x, eps=1e-6):
    x = x.copy()
    flat = x.reshape(-1)
    g = np.zeros(flat.size)
    H = np.zeros((flat.size, flat.size))
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        ep, gp = f_energy(x), f_grad(x)
        flat[i] = old - eps
        em, gm = f_energy(x), f_grad(x)
        flat[i] = old
        g[i] = (ep - em) / (2 * eps)
        H[:, i] = (gp - gm) / (2 * eps)
    return g, H


def _rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-12)


TET_X = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.12, 0], [0.01, 0.02, 0.09]])
TETS = np.array([[0, 1, 2, 3]], np.int32)


def _tet_args(model):
    Dm_inv, vol = elastic_tet.rest_shape(TET_X, TETS)
    mu, lam = lame(1e5, 0.35)
    return (TETS, Dm_inv, vol, np.array([mu]), np.array([lam]), np.array([MODEL_IDS[model]], np.int32))


@pytest.mark.parametrize("model", list(MODEL_IDS))
def test_tet_gradient_hessian_fd(model):
    rng = np.random.default_rng(1)
    args = _tet_args(model)
    for trial in range(3):
        x = TET_X + 0.02 * rng.standard_normal(TET_X.shape)
        if elastic_tet.tet_volumes(x, TETS)[0] <= 0:
            continue
        E = lambda y: elastic_tet.tet_energy(y, *args)
        G = lambda y: elastic_tet.tet_gradient_elems(y, *args)[0]
        g_fd, H_fd = _fd(E, G, x)
        assert _rel(G(x), g_fd) < 1e-6
        H = elastic_tet.tet_hessian_elems(x, *args, False)[0]
        assert _rel(H, H_fd) < 1e-6
        Hp = elastic_tet.tet_hessian_elems(x, *args, True)[0]
        assert np.linalg.eigvalsh(Hp).min() > -1e-8 * np.abs(Hp).max()


@pytest.mark.parametrize("model", list(MODEL_IDS))
def test_tet_rest_and_rotation_invariance(model):
    args = _tet_args(model)
    rng = np.random.default_rng(2)
    assert abs(elastic_tet.tet_energy(TET_X, *args)) < 1e-9
    assert np.abs(elastic_tet.tet_gradient_elems(TET_X, *args)).max() < 1e-8
    R = _rot(rng)
    # rigid motion: zero energy; deformed + rotated: same energy, rotated gradient
    assert abs(elastic_tet.tet_energy(TET_X @ R.T + 3.0, *args)) < 1e-8
    x = TET_X + 0.01 * rng.standard_normal(TET_X.shape)
    e1, e2 = elastic_tet.tet_energy(x, *args), elastic_tet.tet_energy(x @ R.T, *args)
    assert abs(e1 - e2) < 1e-10 * abs(e1)
    g1 = elastic_tet.tet_gradient_elems(x, *args)[0].reshape(4, 3)
    g2 = elastic_tet.tet_gradient_elems(x @ R.T, *args)[0].reshape(4, 3)
    assert np.allclose(g1 @ R.T, g2, rtol=1e-8, atol=1e-8 * np.abs(g1).max())
    # internal forces: zero net force and torque
    assert np.abs(g1.sum(0)).max() < 1e-9 * np.abs(g1).max()
    assert np.abs(np.cross(x, g1).sum(0)).max() < 1e-9 * np.abs(g1).max()


@pytest.mark.parametrize("model", list(MODEL_IDS))
def test_tet_rest_hessian_matches_linear_elasticity(model):
    """Consistency with linear elasticity: the rest Hessian equals the linear-elastic stiffness."""
    args = _tet_args(model)
    H = elastic_tet.tet_hessian_elems(TET_X, *args, False)[0]
    ref = elastic_tet.tet_hessian_elems(TET_X, *_tet_args("fixed_corotated"), False)[0]
    assert _rel(H, ref) < 1e-8


def test_lame():
    mu, lam = lame(1e5, 0.4)
    assert abs(mu - 35714.2857) < 1e-3 and abs(lam - 142857.1428) < 1e-3


def test_neo_hookean_is_a_barrier_against_inversion():
    args = _tet_args("neo_hookean")
    flat = TET_X.copy()
    flat[3, 2] = 0.0
    assert elastic_tet.tet_energy(flat, *args) == np.inf
    near = TET_X.copy()
    near[3, 2] = 1e-6
    assert elastic_tet.tet_energy(near, *args) > 1e2 * elastic_tet.tet_energy(TET_X * 1.1, *args)


TRI_X = np.array([[0, 0, 0], [0.1, 0, 0], [0.02, 0.09, 0.0]])
TRIS = np.array([[0, 1, 2]], np.int32)


def _mem_args():
    Dm_inv, area = membrane.rest_shape(TRI_X, TRIS)
    mu, lam = lame(1e6, 0.3)
    return (TRIS, Dm_inv, area, np.array([mu]), np.array([lam]), np.array([1e-3]))


def test_membrane_fd_psd_rest_rotation():
    rng = np.random.default_rng(3)
    args = _mem_args()
    x = TRI_X + 0.02 * rng.standard_normal(TRI_X.shape)
    E = lambda y: membrane.membrane_energy(y, *args)
    G = lambda y: membrane.membrane_gradient_elems(y, *args)[0]
    g_fd, H_fd = _fd(E, G, x)
    assert _rel(G(x), g_fd) < 1e-6
    assert _rel(membrane.membrane_hessian_elems(x, *args, False)[0], H_fd) < 1e-6
    Hp = membrane.membrane_hessian_elems(x * 0.7, *args, True)[0]  # compressed: StVK is indefinite there
    assert np.linalg.eigvalsh(Hp).min() > -1e-8 * np.abs(Hp).max()
    assert abs(E(TRI_X)) < 1e-15 and np.abs(G(TRI_X)).max() < 1e-12
    R = _rot(rng)
    assert abs(E(TRI_X @ R.T)) < 1e-12
    assert abs(E(x @ R.T) - E(x)) < 1e-10 * E(x)


def _membrane_P(F: np.ndarray, mu: float, lam: float) -> np.ndarray:
    """First Piola stress of StVK from its definition: P = F S, S = 2 mu E + lam tr(E) I."""
    E = 0.5 * (F.T @ F - np.eye(2))
    return F @ (2.0 * mu * E + lam * np.trace(E) * np.eye(2))


@pytest.mark.parametrize("scale,shear", [(0.7, 0.0), (0.95, 0.3), (1.0, 0.0), (1.2, 0.1), (0.3, 0.5), (1.1, -0.4)])
def test_membrane_projection_is_the_eigenvalue_clamp_of_dP_dF(scale, shear):
    """The projected membrane block equals an independent reference: dP/dF by central differences of
    P(F) (6x6), its negative eigenvalues set to 0 (numpy eigh), mapped to the 9x9 block by the shape
    gradients. Covers the closed-form out-of-plane clamp (membrane._clamp_out_of_plane) and its
    fallback to the full eigen-decomposition (strong compression)."""
    rng = np.random.default_rng(7)
    tris, Dm_inv, area, mu, lam, thick = _mem_args()
    x = TRI_X * scale
    x[2, 0] += shear * 0.05
    x = x + 0.004 * rng.standard_normal(x.shape)
    D = Dm_inv[0]
    dN = np.array([[-(D[0, 0] + D[1, 0]), -(D[0, 1] + D[1, 1])], [D[0, 0], D[0, 1]], [D[1, 0], D[1, 1]]])
    F = np.stack([x[1] - x[0], x[2] - x[0]], axis=1) @ D
    K = np.zeros((6, 6))
    eps = 1e-6
    for c in range(3):
        for j in range(2):
            dF = np.zeros((3, 2))
            dF[c, j] = eps
            K[:, 2 * c + j] = ((_membrane_P(F + dF, mu[0], lam[0]) - _membrane_P(F - dF, mu[0], lam[0])) / (2 * eps)).ravel()
    w, Q = np.linalg.eigh(0.5 * (K + K.T))
    Kp = (Q * np.maximum(w, 0.0)) @ Q.T
    # B maps the 9 position DOFs (vertex a, axis c) to the 6 entries (c, j) of F: dF[c, j] = sum_a x[a, c] dN[a, j]
    B = np.zeros((6, 9))
    for a in range(3):
        for c in range(3):
            for j in range(2):
                B[2 * c + j, 3 * a + c] = dN[a, j]
    H_ref = area[0] * thick[0] * B.T @ Kp @ B
    H = membrane.membrane_hessian_elems(x, tris, Dm_inv, area, mu, lam, thick, True)[0]
    assert _rel(H, H_ref) < 1e-6


HINGE_X = np.array([[0, 0, 0], [0.1, 0, 0], [0.05, 0.08, 0.0], [0.04, -0.07, 0.0]])
HINGES = np.array([[0, 1, 2, 3]], np.int32)


def test_hinge_gradient_fd_and_flat_rest():
    rng = np.random.default_rng(4)
    kw, d0 = np.array([2.0]), np.array([0.0])
    E = lambda y: bending.bending_energy(0, y, HINGES, kw, d0)
    G = lambda y: bending.bending_gradient_elems(0, y, HINGES, kw, d0)[0]
    H = lambda y: bending.bending_hessian_elems(0, y, HINGES, kw, d0)[0]
    assert E(HINGE_X) < 1e-20 and np.abs(G(HINGE_X)).max() < 1e-12
    # Gauss-Newton Hessian is exact at the flat rest state
    _, H_fd = _fd(E, G, HINGE_X)
    assert _rel(H(HINGE_X), H_fd) < 1e-5
    for d0v in (0.0, 0.3):
        kwd = (kw, np.array([d0v]))
        x = HINGE_X + 0.01 * rng.standard_normal(HINGE_X.shape)
        Ef = lambda y: bending.bending_energy(0, y, HINGES, *kwd)
        Gf = lambda y: bending.bending_gradient_elems(0, y, HINGES, *kwd)[0]
        g_fd, _ = _fd(Ef, Gf, x)
        assert _rel(Gf(x), g_fd) < 1e-6
        assert np.linalg.eigvalsh(bending.bending_hessian_elems(0, x, HINGES, *kwd)[0]).min() > -1e-10
    # folding by theta gives energy ~ kw/2 theta^2 (|n_A - n_B| = 2 sin(theta/2))
    theta = 0.2
    x = HINGE_X.copy()
    x[3] = [0.04, -0.07 * np.cos(theta), 0.07 * np.sin(theta)]
    assert abs(E(x) - 0.5 * kw[0] * (2 * np.sin(theta / 2)) ** 2) < 1e-12


ROD_X = np.array([[0, 0, 0], [0.1, 0, 0], [0.2, 0.0, 0.0]])


def test_rod_stretch_fd_psd_and_bending_gradient():
    rng = np.random.default_rng(5)
    edges = np.array([[0, 1], [1, 2]], np.int32)
    rest = np.array([0.1, 0.1])
    k = np.array([50.0, 60.0])
    x = ROD_X + 0.01 * rng.standard_normal(ROD_X.shape)
    E = lambda y: rod_stretch.stretch_energy(y, edges, rest, k)
    G = lambda y: scatter_gradient(rod_stretch.stretch_gradient_elems(y, edges, rest, k), edges, 3)
    g_fd, H_fd = _fd(E, G, x)
    assert _rel(G(x), g_fd) < 1e-6
    He = rod_stretch.stretch_hessian_elems(x, edges, rest, k, False)
    Hg = np.zeros((9, 9))
    for e, (a, b) in enumerate(edges):
        idx = np.r_[3 * a:3 * a + 3, 3 * b:3 * b + 3]
        Hg[np.ix_(idx, idx)] += He[e]
    assert _rel(Hg, H_fd) < 1e-6
    Hp = rod_stretch.stretch_hessian_elems(x * 0.5, edges, rest, k, True)
    assert min(np.linalg.eigvalsh(h).min() for h in Hp) > -1e-10
    assert E(ROD_X) == 0.0
    s = np.array([[0, 1, 2]], np.int32)
    kw, d0 = np.array([0.3]), np.array([0.0])
    Eb = lambda y: bending.bending_energy(1, y, s, kw, d0)
    Gb = lambda y: bending.bending_gradient_elems(1, y, s, kw, d0)[0]
    g_fd, H_fd = _fd(Eb, Gb, x)
    assert _rel(Gb(x), g_fd) < 1e-6
    _, H_fd0 = _fd(Eb, Gb, ROD_X)
    assert _rel(bending.bending_hessian_elems(1, ROD_X, s, kw, d0)[0], H_fd0) < 1e-5


@pytest.mark.parametrize("model", [0, 1, 2, 3])
def test_energy_without_svd_equals_the_singular_value_form(model):
    """isotropic_models.psi_of_F (the energy kernels' SVD-free form) equals psi_sigma at the polar SVD's
    signed singular values, for general, near-rest, inverted and nearly flat F. Nearly flat neo-Hookean
    elements are compared looser: there psi_of_F's det F is the more accurate J (s0 s1 s2 from the SVD
    loses digits)."""
    from solver_server.energies.fem_common import polar_svd
    from solver_server.energies.isotropic_models import psi_of_F, psi_sigma

    rng = np.random.default_rng(11)
    mu, lam = 3e5, 2e5
    for k in range(400):
        kind = k % 4
        if kind == 0:
            F = np.eye(3) + 0.3 * rng.normal(size=(3, 3))
        elif kind == 1:
            F = np.eye(3) + 1e-4 * rng.normal(size=(3, 3))
        elif kind == 2:
            F = rng.normal(size=(3, 3))
        else:
            F = np.eye(3) + 0.2 * rng.normal(size=(3, 3))
            F[:, 2] = 0.5 * F[:, 0] + 0.3 * F[:, 1] + 1e-6 * rng.normal(size=3)
        U, s, V = polar_svd(F)
        a = psi_sigma(model, mu, lam, s, np.empty(3), np.empty((3, 3)), np.empty((3, 2)))
        b = psi_of_F(model, mu, lam, F)
        if np.isinf(a) or np.isinf(b):
            assert np.isinf(a) and np.isinf(b)
            continue
        tol = 1e-6 if (model == 0 and kind == 3) else 1e-11
        assert abs(a - b) <= tol * mu * max(1.0, float(np.sum(F * F))), (kind, a, b)
