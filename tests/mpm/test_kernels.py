"""Quadratic B-spline identities, 3x3 SVD, and the conservation properties of the P2G/G2P transfers."""
import numpy as np
import pytest

from solver_server.solvers.mpm import materials, transfer
from solver_server.solvers.mpm.grid import GridSpec
from solver_server.solvers.mpm.kernels import bspline, dweights_1d, weights_1d
from solver_server.solvers.mpm.linalg3 import svd3
from solver_server.solvers.mpm.solver import MPMSolver


def stencil(g):
    """Nodes and 1D weights of grid coordinate g (cells)."""
    base = int(np.floor(g - 0.5))
    return base, np.array(weights_1d(g - base)), np.array(dweights_1d(g - base))


@pytest.mark.parametrize("g", np.random.default_rng(1).uniform(3.0, 4.0, 25))
def test_bspline_partition_of_unity_and_linear_reproduction(g):
    base, w, dw = stencil(g)
    nodes = base + np.arange(3)
    assert np.isclose(w.sum(), 1.0, atol=1e-14)
    assert np.isclose((w * nodes).sum(), g, atol=1e-13)            # sum w_i x_i = x_p
    assert np.isclose((w * (nodes - g) ** 2).sum(), 0.25, atol=1e-13)  # D = dx^2 / 4
    assert np.allclose(w, [bspline(n - g) for n in nodes], atol=1e-14)
    assert np.isclose(dw.sum(), 0.0, atol=1e-13)
    # dw is the derivative of w with respect to the node offset (finite differences)
    h = 1e-6
    wp = np.array(weights_1d(g - base + h))
    wm = np.array(weights_1d(g - base - h))
    assert np.allclose((wp - wm) / (2 * h), dw, atol=1e-7)


def test_svd3_reconstructs_and_is_rotation_variant():
    rng = np.random.default_rng(2)
    U = np.empty((3, 3)); V = np.empty((3, 3)); W = np.empty((3, 3)); s = np.empty(3)
    for trial in range(200):
        F = np.eye(3) + 0.6 * rng.standard_normal((3, 3))
        if trial % 5 == 0:
            F[:, 2] *= -1  # inverted
        svd3(F, U, s, V, W)
        assert np.allclose(U @ np.diag(s) @ V.T, F, atol=1e-10)
        assert np.isclose(np.linalg.det(U), 1.0) and np.isclose(np.linalg.det(V), 1.0)
        assert np.allclose(np.sort(np.abs(s)), np.sort(np.linalg.svd(F, compute_uv=False)), atol=1e-10)
        assert np.sign(s[2]) == np.sign(np.linalg.det(F))


def make_solver(n=400, seed=3, stress=True, parallel=False):
    rng = np.random.default_rng(seed)
    spec = GridSpec.from_domain((0, 0, 0), (1, 1, 1), 0.05)
    x = 0.35 + 0.3 * rng.random((n, 3))
    v = rng.standard_normal((n, 3))
    mass = 0.5 + rng.random(n)
    mat = materials.preset("elastic", youngs_modulus=1e4)
    s = MPMSolver(spec, x, v, mass, np.full(n, 1e-4), np.zeros(n, np.int32), materials.pack(mat)[None],
                  np.zeros(n), gravity=(0, 0, 0))
    s.use_threads(parallel)
    s.C[:] = rng.standard_normal((n, 3, 3))
    if stress:  # random deformation -> symmetric Kirchhoff stress
        s.F[:] = np.eye(3) + 0.2 * rng.standard_normal((n, 3, 3))
        transfer.init_stress(s.F, s.C, s.tau, s.plastic, s.mat, s.params, s.nchunks)
    return s


def node_positions(s):
    nx, ny, nz = s.spec.shape
    i, j, k = np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")
    return np.stack([i, j, k], -1) * s.spec.dx + np.array(s.spec.origin)


def particle_angular_momentum(s):
    """APIC angular momentum: sum m x × v + m D eps:C^T, D = dx^2/4."""
    C = s.C
    extra = np.stack([C[:, 2, 1] - C[:, 1, 2], C[:, 0, 2] - C[:, 2, 0], C[:, 1, 0] - C[:, 0, 1]], -1)
    return (s.mass[:, None] * (np.cross(s.x, s.v) + s.spec.dx ** 2 / 4 * extra)).sum(0)


@pytest.mark.parametrize("parallel", [False, True])
def test_p2g_conserves_mass_momentum_and_angular_momentum(parallel):
    s = make_solver(parallel=parallel)
    assert np.abs(s.tau).max() > 1.0  # the stress term is really exercised
    p_before = s.total_momentum()
    L_before = particle_angular_momentum(s)
    s.p2g(dt=1e-3)  # stress impulse included: it must not change momentum
    assert np.isclose(s.gm.sum(), s.mass.sum(), rtol=1e-12)
    p_grid = s.gv.reshape(-1, 3).sum(0)
    assert np.allclose(p_grid, p_before, rtol=0, atol=1e-10 * np.abs(s.mass[:, None] * s.v).sum())
    L_grid = np.cross(node_positions(s), s.gv).reshape(-1, 3).sum(0)
    assert np.allclose(L_grid, L_before, rtol=0, atol=1e-10 * np.abs(L_before).sum())


@pytest.mark.parametrize("parallel", [False, True])
def test_full_step_conserves_linear_momentum_and_g2p_angular_momentum(parallel):
    s = make_solver(parallel=parallel)
    p0 = s.total_momentum()
    s.p2g(dt=1e-3)
    s.grid_update(dt=1e-3)  # no gravity, particles far from walls
    v_grid = s.gv.copy()
    mom = s.gm[..., None] * v_grid
    L_grid = np.cross(node_positions(s), mom).reshape(-1, 3).sum(0)
    x_before = s.x.copy()
    s.g2p(dt=0.0)  # dt = 0: particles stay where the grid angular momentum was measured
    assert np.array_equal(s.x, x_before)
    scale = np.abs(s.mass[:, None] * s.v).sum()
    assert np.allclose(s.total_momentum(), p0, rtol=0, atol=1e-10 * scale)
    assert np.allclose(particle_angular_momentum(s), L_grid, rtol=0, atol=1e-10 * np.abs(L_grid).sum())


def test_g2p_reproduces_affine_velocity_field_exactly():
    s = make_solver(stress=False)
    rng = np.random.default_rng(5)
    a = rng.standard_normal(3)
    B = rng.standard_normal((3, 3))
    s.gv[:] = a + node_positions(s) @ B.T
    x0 = s.x.copy()
    s.g2p(dt=0.0)
    assert np.allclose(s.v, a + x0 @ B.T, atol=1e-12)
    assert np.allclose(s.C, np.broadcast_to(B, s.C.shape), atol=1e-11)


def test_apic_round_trip_keeps_affine_particle_field():
    """P2G then G2P of particles carrying one affine field v = a + B x returns that field (APIC
    transfers affine fields losslessly where particles fill the stencils)."""
    rng = np.random.default_rng(6)
    spec = GridSpec.from_domain((0, 0, 0), (1, 1, 1), 0.05)
    g = np.arange(0.3, 0.7, 0.0125)
    x = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    x += (rng.random(x.shape) - 0.5) * 0.004
    a = rng.standard_normal(3)
    B = rng.standard_normal((3, 3))
    n = x.shape[0]
    mat = materials.preset("elastic")
    s = MPMSolver(spec, x, a + x @ B.T, np.ones(n), np.full(n, 1e-6), np.zeros(n, np.int32),
                  materials.pack(mat)[None], np.zeros(n), gravity=(0, 0, 0))
    s.C[:] = B
    s.tau[:] = 0.0
    s.p2g(dt=0.0)
    s.grid_update(dt=0.0)
    x0 = s.x.copy()
    s.g2p(dt=0.0)
    inner = np.all((x0 > 0.36) & (x0 < 0.64), axis=1)  # stencils fully covered by particles
    assert inner.sum() > 1000
    assert np.allclose(s.v[inner], (a + x0 @ B.T)[inner], atol=1e-9)
    assert np.allclose(s.C[inner], B, atol=1e-8)


def test_threaded_and_serial_kernels_give_the_same_bits():
    """The single-threaded kernels and the colour-blocked threaded ones, on one and on two of numba's
    threads, add every grid node's sum in the same order: the same steps, bit for bit (bakes must not
    depend on the thread count, tests/server/test_determinism.py). p2g_serial scattering in particle
    order (before) agreed only up to summation order (x to 1e-12 m)."""
    import numba

    runs = []
    old = numba.get_num_threads()
    try:
        for parallel, threads in ((False, 1), (True, 1), (True, 2)):
            if threads > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(threads)
            s = make_solver(n=3000, parallel=parallel)   # nchunks from the thread count
            for _ in range(3):
                s.step(1e-3)
            runs.append(s)
    finally:
        numba.set_num_threads(old)
    assert len(runs) >= 2
    for s in runs[1:]:
        for key in ("x", "v", "C", "F", "tau", "plastic"):
            assert np.array_equal(getattr(runs[0], key), getattr(s, key)), key
