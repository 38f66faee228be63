"""Affine-body kernels: exact mass properties from the closed surface (analytic box and sphere, a
tet-mesh sum), the orthogonality energy (finite differences, zero on rotations, PSD projection, no
net force / torque), the map x = J q (chain rule g^T J and J^T H J against finite differences) and
the body energies on the solver's DOF array."""
import numpy as np
import pytest

from solver_server.bodies import (AffineBodies, BodySpec, mass_properties, orth_energy, orth_gradient, orth_hessian,
                               polar_rotation, rigidity_error, stiffness)
from solver_server.model.dof_map import DofMap
from solver_server.model.primitives import box, icosphere
from solver_server.model.tetmesh import tetrahedralize


def _rot(rng):
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _fd(f, x, eps=1e-6):
    """Central differences of a scalar or vector function of a flat vector."""
    x = np.array(x, np.float64)
    cols = []
    for i in range(x.size):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        cols.append((np.asarray(f(xp)) - np.asarray(f(xm))) / (2 * eps))
    return np.array(cols).T


def _rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-12)


# --- mass properties ----------------------------------------------------------------------------
def test_box_mass_properties_exact():
    a, b, c = 0.3, 0.5, 0.7
    rho = 780.0
    V, T = box((a, b, c), center=(0.0, 0.0, 0.0), divisions=3)
    R = _rot(np.random.default_rng(0))
    t = np.array([12.0, -40.0, 7.5])   # far from the origin: the reference shift keeps round-off small
    mp = mass_properties(V @ R.T + t, T, rho)
    m = rho * a * b * c
    assert abs(mp.volume - a * b * c) < 1e-13
    assert abs(mp.mass - m) < 1e-9 * m
    assert np.abs(mp.centre - t).max() < 1e-11
    S_local = m / 12.0 * np.diag([a * a, b * b, c * c])
    assert np.abs(mp.second - R @ S_local @ R.T).max() < 1e-10 * np.abs(S_local).max()
    I_local = m / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    assert np.abs(mp.inertia_tensor - R @ I_local @ R.T).max() < 1e-10 * I_local.max()


def test_inward_oriented_mesh_gives_negative_volume():
    V, T = box((1.0, 1.0, 1.0))
    assert mass_properties(V, T[:, ::-1].copy()).volume < 0


def test_sphere_converges_to_analytic_at_second_order():
    r = 0.4
    errs = []
    for sub in (2, 3, 4):
        V, T = icosphere(r, center=(1.0, 2.0, 3.0), subdivisions=sub)
        mp = mass_properties(V, T, 1.0)
        vol = 4.0 / 3.0 * np.pi * r ** 3
        s_axis = 4.0 * np.pi * r ** 5 / 15.0      # int x^2 dV over the ball
        errs.append(max(abs(mp.volume - vol) / vol, np.abs(np.diag(mp.second) - s_axis).max() / s_axis))
        assert np.abs(mp.centre - [1.0, 2.0, 3.0]).max() < 1e-12
        off = mp.second - np.diag(np.diag(mp.second))
        assert np.abs(off).max() < 1e-3 * s_axis
    assert errs[-1] < 0.01
    assert errs[1] / errs[2] > 3.5 and errs[0] / errs[1] > 3.5   # halving the edge quarters the error


def test_surface_integrals_equal_tet_mesh_sum():
    """A convex mesh's tetrahedralisation has the same volume: summing the tets' exact integrals
    (V, V c, V/20 (sum v v^T + s s^T)) must reproduce the surface integrals to round-off."""
    V, T = icosphere(0.3, center=(0.2, -0.1, 0.5), subdivisions=1)
    V = V * [1.0, 0.7, 1.3]
    mesh = tetrahedralize("ellipsoid", V, T)
    P = mesh.nodes[mesh.tets]                                    # (k, 4, 3)
    D = P[:, 1:] - P[:, :1]
    vol = np.linalg.det(D) / 6.0
    assert (vol > 0).all()
    s = P.sum(1)
    first = (vol[:, None] * s / 4.0).sum(0)
    second = (vol[:, None, None] / 20.0 * (np.einsum("kai,kaj->kij", P, P) + np.einsum("ki,kj->kij", s, s))).sum(0)
    c = first / vol.sum()
    second_c = second - vol.sum() * np.outer(c, c)
    mp = mass_properties(V, T, 1.0)
    assert abs(mp.volume - vol.sum()) < 1e-12 * vol.sum()
    assert np.abs(mp.centre - c).max() < 1e-12
    assert np.abs(mp.second - second_c).max() < 1e-11 * np.abs(second_c).max()


# --- orthogonality energy -------------------------------------------------------------------------
def test_orthogonality_zero_on_rotations_positive_off():
    rng = np.random.default_rng(1)
    kV = 1e8 * 0.01
    for _ in range(5):
        R = _rot(rng)
        assert orth_energy(R.ravel(), kV) < 1e-20 * kV
        assert np.abs(orth_gradient(R.ravel(), kV)).max() < 1e-8 * kV
        assert orth_energy((1.01 * R).ravel(), kV) > 0
    assert rigidity_error(np.eye(3)) == 0.0
    assert stiffness(1e5) == 1e8 and stiffness(2e9) == 2e9


def test_orthogonality_gradient_hessian_fd():
    rng = np.random.default_rng(2)
    kV = 3.0
    for _ in range(4):
        a = (_rot(rng) + 0.2 * rng.standard_normal((3, 3))).ravel()
        g = orth_gradient(a, kV)
        g_fd = _fd(lambda y: orth_energy(y, kV), a)
        assert _rel(g, g_fd) < 1e-6
        H = orth_hessian(a, kV, False)
        H_fd = _fd(lambda y: orth_gradient(y, kV), a)
        assert _rel(H, H_fd) < 1e-6
        assert np.abs(H - H.T).max() < 1e-12 * np.abs(H).max()
        Hp = orth_hessian(a, kV, True)
        assert np.linalg.eigvalsh(Hp).min() > -1e-10 * np.abs(Hp).max()
    # a compressed A has negative curvature that the projection removes
    a = (0.5 * np.eye(3)).ravel()
    assert np.linalg.eigvalsh(orth_hessian(a, kV, False)).min() < 0


def test_orthogonality_no_torque():
    """E(R A) = E(A): the generalised force G = dE/dA satisfies G A^T symmetric (zero torque)."""
    rng = np.random.default_rng(3)
    A = _rot(rng) + 0.1 * rng.standard_normal((3, 3))
    G = orth_gradient(A.ravel(), 5.0).reshape(3, 3)
    T = G @ A.T
    assert np.abs(T - T.T).max() < 1e-12 * np.abs(T).max()


def test_polar_rotation():
    rng = np.random.default_rng(4)
    R = _rot(rng)
    P = np.eye(3) + 0.01 * np.diag([1.0, -2.0, 0.5])
    assert np.abs(polar_rotation(R @ P) - R).max() < 1e-12


# --- x = J q and the chain rule ------------------------------------------------------------------
def _one_body(rng, extra_free=2):
    """A DofMap with `extra_free` free vertices, a small closed mesh as one affine body, and its rows."""
    V, T = box((0.2, 0.3, 0.4), center=(0.1, 0.0, 0.5), divisions=1)
    n = len(V)
    off = extra_free
    spec = BodySpec("b", V, T, 900.0, 1e8, off, off + n)
    ab = AffineBodies([spec])
    sl, ptr, rows, w = ab.map_arrays()
    D = DofMap(off + n, off + n + 4, sl, ptr, rows, w)
    z = np.zeros((off + n + 4, 3))
    z[:off] = rng.standard_normal((off, 3))
    z[off + n:] = ab.rest_rows()
    return V, T, ab, D, z


def test_map_reproduces_rest_and_affine_motion():
    rng = np.random.default_rng(5)
    V, T, ab, D, z = _one_body(rng)
    x = D.to_x(z)
    assert np.abs(x[2:] - V).max() < 1e-14
    A = _rot(rng) @ np.diag([1.0, 1.1, 0.9])
    p = np.array([0.3, -0.2, 1.0])
    r = int(ab.row0[0])
    z[r] = p
    z[r + 1:r + 4] = (ab.L[0] * A).T
    x = D.to_x(z)
    X = V - ab.props[0].centre
    assert np.abs(x[2:] - (X @ A.T + p)).max() < 1e-14
    assert np.abs(ab.A(z, 0) - A).max() < 1e-14


def test_chain_rule_gradient_and_hessian_fd():
    """A nonlinear energy of the vertex positions (pairwise springs between body and free vertices):
    W^T g_x and W^T H_x W must equal the finite-difference gradient / Hessian in z."""
    rng = np.random.default_rng(6)
    V, T, ab, D, z = _one_body(rng)
    nx = D.n_x
    pairs = np.array([[0, 3], [1, 7], [4, 9], [2, 5], [0, 1]])

    def e_x(x):
        d = x[pairs[:, 0]] - x[pairs[:, 1]]
        return float(((d * d).sum(1) ** 2).sum())

    def g_x(x):
        d = x[pairs[:, 0]] - x[pairs[:, 1]]
        f = 4.0 * (d * d).sum(1)[:, None] * d
        g = np.zeros_like(x)
        np.add.at(g, pairs[:, 0], f)
        np.add.at(g, pairs[:, 1], -f)
        return g.ravel()

    def h_x_coo(x):
        rows, cols, vals = [], [], []
        for a, b in pairs:
            d = x[a] - x[b]
            Hb = 4.0 * ((d @ d) * np.eye(3) + 2.0 * np.outer(d, d))
            for (i, si) in ((a, 1), (b, -1)):
                for (j, sj) in ((a, 1), (b, -1)):
                    for ci in range(3):
                        for cj in range(3):
                            rows.append(3 * i + ci)
                            cols.append(3 * j + cj)
                            vals.append(si * sj * Hb[ci, cj])
        return np.array(rows), np.array(cols), np.array(vals)

    def grad_z(zf):
        zz = zf.reshape(-1, 3)
        return D.pull_gradient(g_x(D.to_x(zz)))

    zf = z.ravel().copy()
    g = grad_z(zf)
    g_fd = _fd(lambda y: e_x(D.to_x(y.reshape(-1, 3))), zf)
    slaved = np.repeat(D.is_slaved, 3)
    assert np.abs(g[slaved]).max() == 0.0
    assert _rel(g[~slaved], g_fd[~slaved]) < 1e-6
    r, c, v = D.pull_coo(*h_x_coo(D.to_x(z)))
    H = np.zeros((zf.size, zf.size))
    np.add.at(H, (r, c), v)
    H_fd = _fd(grad_z, zf)
    free = ~slaved
    assert _rel(H[np.ix_(free, free)], H_fd[np.ix_(free, free)]) < 1e-6
    assert nx == 10


def test_body_energies_fd_and_mass_matrix():
    """Inertia + gravity + orthogonality on the body rows: gradient and Hessian by finite differences;
    the inertia Hessian is the exact 12 x 12 mass matrix Mbar (x) I_3 with Mbar = int rho w w^T dV
    (translation block m I, no coupling to A about the centre, and a rigid rotation's kinetic energy
    equal to 1/2 w^T I w with the analytic box inertia tensor)."""
    rng = np.random.default_rng(7)
    V, T, ab, D, z = _one_body(rng, extra_free=0)
    r = int(ab.row0[0])
    z[r:r + 4] += 0.05 * rng.standard_normal((4, 3))
    zt = z + 0.01 * rng.standard_normal(z.shape)
    g = np.array([0.0, 0.0, -9.81])
    h2 = (1.0 / 24.0) ** 2
    shape = z.shape

    def E(y):
        return ab.energy(y.reshape(shape), zt, g, h2)

    def G(y):
        return ab.gradient(y.reshape(shape), zt, g, h2)

    zf = z.ravel()
    idx = np.arange(3 * r, 3 * r + 12)
    assert _rel(G(zf)[idx], _fd(E, zf, 1e-7)[idx]) < 1e-5
    ro, co, vo = ab.hessian(z, h2, project=False)
    H = np.zeros((zf.size, zf.size))
    np.add.at(H, (ro, co), vo)
    H_fd = _fd(G, zf, 1e-7)
    assert _rel(H[np.ix_(idx, idx)], H_fd[np.ix_(idx, idx)]) < 1e-5
    # at rest the inertia block alone is the mass matrix: translation block m I, cross blocks 0
    ro, co, vo = ab.hessian(D.sync(np.concatenate([V, ab.rest_rows()])), 0.0)
    H = np.zeros((zf.size, zf.size))
    np.add.at(H, (ro, co), vo)
    m = ab.props[0].mass
    assert np.abs(H[3 * r:3 * r + 3, 3 * r:3 * r + 3] - m * np.eye(3)).max() < 1e-12 * m
    assert np.abs(H[3 * r:3 * r + 3, 3 * r + 3:3 * r + 12]).max() < 1e-12 * m
    # kinetic energy of a rigid rotation from the mass matrix equals 1/2 w^T I w
    w = np.array([0.3, -1.2, 2.0])
    Wx = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
    v = np.zeros_like(z)
    v[r + 1:r + 4] = (Wx @ (ab.L[0] * np.eye(3))).T
    ke = 0.5 * float(sum(v[r:r + 4, c] @ ab.mbar[0] @ v[r:r + 4, c] for c in range(3)))
    a, b, c = 0.2, 0.3, 0.4
    I_box = m / 12.0 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    assert abs(ke - 0.5 * w @ I_box @ w) < 1e-12 * ke
