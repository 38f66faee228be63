"""Structured box meshes of linear or quadratic tets and a static (quasistatic) solve, for the
cantilever, patch and locking tests of tests/ipc/test_tet10.py. SI units."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from solver_server.energies import elastic_tet, elastic_tet10
from solver_server.energies.elasticity import ElasticTerms
from solver_server.energies.isotropic_models import MODEL_IDS, lame

# Kuhn split of the unit cube (corner k has bits x=1, y=2, z=4) into 6 tets around the 0-7 diagonal
_KUHN = [(0, 1, 3, 7), (0, 1, 5, 7), (0, 2, 3, 7), (0, 2, 6, 7), (0, 4, 5, 7), (0, 4, 6, 7)]


def box_mesh(size, cells, jitter: float = 0.0, seed: int = 0) -> tuple:
    """Nodes (N, 3) and positively oriented linear tets (6 per cell) of a box [0, size] split into
    ``cells`` (nx, ny, nz) cubes; ``jitter`` moves interior nodes by that fraction of a cell."""
    nx, ny, nz = cells
    g = np.stack(np.meshgrid(*[np.linspace(0.0, size[i], cells[i] + 1) for i in range(3)], indexing="ij"), -1)
    X = g.reshape(-1, 3).copy()
    idx = np.arange(X.shape[0]).reshape(nx + 1, ny + 1, nz + 1)
    tets = []
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                c = [idx[i + (b & 1), j + ((b >> 1) & 1), k + ((b >> 2) & 1)] for b in range(8)]
                tets += [[c[a] for a in t] for t in _KUHN]
    tets = np.array(tets, np.int32)
    if jitter:
        h = np.array(size) / np.array(cells)
        inner = np.all((X > 1e-9) & (X < np.array(size) - 1e-9), axis=1)
        X[inner] += jitter * h * np.random.default_rng(seed).uniform(-1, 1, (int(inner.sum()), 3))
    _, vol = elastic_tet.rest_shape(X, tets)
    flip = vol < 0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]
    return X, tets


def elastic_terms(X, tets, E, nu, model="neo_hookean", quadratic=False, mixed=True) -> tuple:
    """(nodes, ElasticTerms, per-node lumped mass for density 1) of the mesh, linear or quadratic
    (``mixed``: the quadratic element's mean-dilatation volumetric term, else the plain 4-point rule)."""
    mu, lam = lame(E, nu)
    if quadratic:
        nodes, t10 = elastic_tet10.add_midedge_nodes(X, tets)
        Dm_inv, vol = elastic_tet.rest_shape(nodes, t10[:, :4])
        T = len(t10)
        el = ElasticTerms(n_verts=len(nodes), tets10=t10, tet10_Dm_inv=Dm_inv, tet10_vol=vol,
                          tet10_mu=np.full(T, mu), tet10_lam=np.full(T, lam),
                          tet10_model=np.full(T, MODEL_IDS[model], np.int32), tet10_mixed=mixed)
        m = elastic_tet10.lumped_mass(t10, vol, 1.0, len(nodes))
    else:
        nodes = X
        Dm_inv, vol = elastic_tet.rest_shape(X, tets)
        T = len(tets)
        el = ElasticTerms(n_verts=len(X), tets=tets, tet_Dm_inv=Dm_inv, tet_vol=vol, tet_mu=np.full(T, mu),
                          tet_lam=np.full(T, lam), tet_model=np.full(T, MODEL_IDS[model], np.int32))
        m = np.zeros(len(X))
        np.add.at(m, tets.ravel(), np.repeat(vol / 4.0, 4))
    return nodes, el, m


def static_solve(el: ElasticTerms, x0: np.ndarray, force: np.ndarray, fixed: np.ndarray, x_fixed=None,
                 iters: int = 30, tol: float = 1e-11) -> np.ndarray:
    """Equilibrium of el under nodal forces (N, 3) with the ``fixed`` nodes held at x_fixed (default
    their x0): Newton on E_el(x) - f.x with a backtracking line search; positions (N, 3)."""
    x = x0.copy()
    if x_fixed is not None:
        x[fixed] = x_fixed
    free = np.nonzero(np.repeat(~fixed, 3))[0]
    fmap = -np.ones(x.size, np.int64)
    fmap[free] = np.arange(free.size)
    rows, cols = el.patterns()
    keep = (fmap[rows] >= 0) & (fmap[cols] >= 0)
    f = force.reshape(-1)

    def obj(y):
        return el.energy(y) - float(f @ y.reshape(-1))

    for _ in range(iters):
        g = (el.gradient(x) - f)[free]
        _, _, v = el.hessian(x, True)
        H = sp.csr_matrix((v[keep], (fmap[rows[keep]], fmap[cols[keep]])), shape=(free.size, free.size))
        p = spla.spsolve(H.tocsc(), -g)
        step = np.zeros(x.size)
        step[free] = p
        step = step.reshape(-1, 3)
        a, e0 = 1.0, obj(x)
        while a > 1e-8 and not obj(x + a * step) <= e0 + 1e-14 * abs(e0):
            a *= 0.5
        x = x + a * step
        if np.abs(p).max() < tol * max(1.0, np.abs(x).max()):
            break
    return x
