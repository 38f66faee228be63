"""Cloth bending energy (ipc/shell_bending.py): derivatives by finite differences, PSD Gauss-Newton
Hessian, invariances, the dihedral-angle law on a single fold, boundary (missing flap) handling, and the
block-descent vertex block (one slot) equal to the full element's derivatives."""
import numpy as np
import pytest

from solver_server.solvers.block_descent.vertex_elastic import shell_vertex_scratch
from solver_server.energies import shell_bending as sb
from solver_server.energies.fem_common import scatter_gradient

# a fan of four triangles: the centre triangle (0, 1, 2) has all three flaps (3, 4, 5)
FAN_V = np.array([[0.0, 0, 0], [0.1, 0, 0], [0.04, 0.09, 0], [0.09, 0.08, 0], [-0.05, 0.06, 0], [0.06, -0.07, 0]])
FAN_T = np.array([[0, 1, 2], [2, 1, 3], [0, 2, 4], [1, 0, 5]], np.int32)


def _setup(B=0.02):
    st = sb.shell_stencils(FAN_T)
    K = sb.shell_stiffness(FAN_V, st, B)
    return st, K


def _fd_grad(E, x, eps=1e-7):
    g = np.zeros(x.size)
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        d = d.reshape(x.shape)
        g[i] = (E(x + d) - E(x - d)) / (2 * eps)
    return g


def test_stencils_find_flaps_and_mark_boundary_edges():
    st = sb.shell_stencils(FAN_T)
    assert st[0].tolist() == [0, 1, 2, 3, 4, 5]      # edge j opposite v_j: (1,2)->3, (2,0)->4, (0,1)->5
    for t in range(1, 4):                             # outer triangles: one flap (the centre's vertex)
        assert (st[t, 3:] != st[t, :3]).sum() == 1


@pytest.mark.parametrize("curved_rest", [False, True])
def test_gradient_fd_hessian_psd_and_exact_at_rest(curved_rest):
    rng = np.random.default_rng(1)
    st, K = _setup()
    rest = FAN_V + (0.01 * rng.standard_normal(FAN_V.shape) if curved_rest else 0.0)
    th0 = sb.rest_thetas(rest, st)
    assert (np.abs(th0).max() > 1e-3) == curved_rest
    E = lambda y: sb.shell_energy(y, st, K, th0)  # noqa: E731
    G = lambda y: scatter_gradient(sb.shell_gradient_elems(y, st, K, th0), st, len(y))  # noqa: E731
    assert abs(E(rest)) < 1e-18 and np.abs(G(rest)).max() < 1e-12
    x = rest + 0.01 * rng.standard_normal(rest.shape)
    g_fd = _fd_grad(E, x)
    assert np.abs(G(x) - g_fd).max() < 1e-6 * np.abs(g_fd).max()
    # Gauss-Newton Hessian: PSD everywhere, equal to the exact Hessian at the rest state
    He = sb.shell_hessian_elems(x, st, K, th0)
    for h in He:
        assert np.linalg.eigvalsh(h).min() > -1e-9 * np.abs(h).max()
    n = len(rest)
    Hfull = np.zeros((3 * n, 3 * n))
    for e, h in zip(st, sb.shell_hessian_elems(rest, st, K, th0)):
        idx = (3 * e[:, None] + np.arange(3)).ravel()   # a missing flap repeats v_j: accumulate
        np.add.at(Hfull, (idx[:, None], idx[None, :]), h)
    eps = 1e-6
    H_fd = np.zeros_like(Hfull)
    for i in range(3 * n):
        d = np.zeros(3 * n)
        d[i] = eps
        H_fd[:, i] = (G(rest + d.reshape(-1, 3)) - G(rest - d.reshape(-1, 3))) / (2 * eps)
    assert np.abs(Hfull - H_fd).max() < 1e-5 * np.abs(H_fd).max()


def test_rigid_motion_invariance():
    rng = np.random.default_rng(2)
    st, K = _setup()
    th0 = sb.rest_thetas(FAN_V, st)
    x = FAN_V + 0.01 * rng.standard_normal(FAN_V.shape)
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    Q *= np.sign(np.linalg.det(Q))
    e = sb.shell_energy(x, st, K, th0)
    assert e > 0
    assert abs(sb.shell_energy(x @ Q.T + [0.3, -1, 2], st, K, th0) - e) < 1e-10 * e
    assert sb.shell_energy(FAN_V @ Q.T + 5.0, st, K, th0) < 1e-18


def test_single_fold_angle_law_and_monotone_to_a_full_fold():
    """Folding a boundary flap of a two-triangle hinge by theta: E = K_jj theta^2 / 2 exactly (the signed
    angle, not a chord), increasing all the way to 179 degrees (no spurious minimum beyond 90)."""
    V = np.array([[0.0, 0, 0], [0.1, 0, 0], [0.05, 0.08, 0], [0.04, -0.07, 0]])
    T = np.array([[0, 1, 2], [1, 0, 3]], np.int32)
    st = sb.shell_stencils(T)
    K = sb.shell_stiffness(V, st, 1e-3)
    th0 = sb.rest_thetas(V, st)
    es = []
    for deg in (10, 45, 90, 135, 179):
        t = np.radians(deg)
        x = V.copy()
        x[3] = [0.04, -0.07 * np.cos(t), 0.07 * np.sin(t)]
        es.append(sb.shell_energy(x, st, K, th0))
        kjj = K[0, 2, 2] + K[1, 2, 2]          # edge (0,1) is edge 2 of both triangles
        assert abs(es[-1] - 0.5 * kjj * t * t) < 1e-9 * es[-1]
    assert np.all(np.diff(es) > 0)


def test_block_descent_vertex_block_equals_element_slot():
    rng = np.random.default_rng(3)
    st, K = _setup()
    th0 = sb.rest_thetas(FAN_V + 0.01 * rng.standard_normal(FAN_V.shape), st)
    J, s5, r = np.zeros((3, 12)), np.zeros((5, 3)), np.zeros(3)
    for _ in range(50):
        x = FAN_V + 0.02 * rng.standard_normal(FAN_V.shape)
        ge = sb.shell_gradient_elems(x, st, K, th0)
        He = sb.shell_hessian_elems(x, st, K, th0)
        for e in range(len(st)):
            for a in range(6):
                g, H = np.zeros(3), np.zeros((3, 3))
                shell_vertex_scratch(x, st[e], K[e], th0[e], a, g, H, J, s5, r)
                if st[e, a] == st[e, a - 3] and a >= 3:   # a missing flap's slot contributes nothing
                    assert np.abs(g).max() == 0 and np.abs(H).max() == 0
                    continue
                np.testing.assert_allclose(g, ge[e, 3 * a:3 * a + 3], rtol=1e-9, atol=1e-12)
                np.testing.assert_allclose(H, He[e, 3 * a:3 * a + 3, 3 * a:3 * a + 3], rtol=1e-9, atol=1e-12)
