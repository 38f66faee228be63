"""Quasistatic elasticity by PBNG (position-based nonlinear Gauss-Seidel, seed 001) and by Newton.

Quasistatics drops inertia: the equilibrium x minimises E(x) = Psi(x) - f_ext . x over the free
vertices, the Dirichlet vertices held at their targets (seed 001 Sec. 3, "quasistatic"). Psi is the
scene's elastic energy, the same kernels as the dynamic solvers (ipc/elasticity.py for Newton, the
per-vertex blocks of vertex_elastic.py for PBNG); f_ext (N) is gravity m g plus any nodal load.

PBNG (seed 001 Sec. 4-5 and 9): the vertices are coloured so that no two of one colour share an
element; a sweep visits the colours in turn and, inside a colour, every vertex (in parallel) takes
one 3x3 Newton step on E with the others frozen: x_i <- x_i - H_ii^{-1} g_i, H_ii the PSD-projected
diagonal block. The step is shortened (halved) until every tet around the vertex keeps at least
VOLUME_KEEP of its volume, so no element inverts. Acceleration across sweeps:
  * Chebyshev (seed 001 Eq. 52): x^{l+1} = w_{l+1} (gamma (x_PBNG^{l+1} - x^l) + x^l - x^{l-1}) + x^{l-1},
    w = 1 (l < 2), 2 / (2 - rho^2) (l = 2), 4 / (4 - rho^2 w_l) (l > 2); rho = 0.95, gamma = 1.7
    in the paper. Its gamma is an *under*-relaxation in their words; here gamma <= 1 unless set.
  * SOR (seed 001 Eq. 53, omega = 1.7 in the paper).
An accelerated iterate that would shrink a tet below VOLUME_KEEP of its volume is dropped for the
plain sweep result and the acceleration restarts (as in sweep.run_sweeps).

Newton: projected Newton on the same E with the scene's sparse Hessian and linear solver
(ipc/linear_solve.py), backtracking line search on E with the same no-inversion filter.

The residual both report is |grad E| over the free vertices (N), the Newton residual of seed 001's
plots; benchmarks compare the two at equal residual (scripts/bench_pbng.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
from numba import njit, prange

from solver_server.ipc import elastic_tet
from solver_server.ipc.assembly import FreePattern
from solver_server.ipc.elasticity import ElasticTerms
from solver_server.ipc.isotropic_models import MODEL_IDS, lame
from solver_server.ipc.linear_solve import LinearSolver
from .incidence import color_arrays, element_tuple
from .sweep import VOLUME_KEEP, _solve3, elastic_vertex
from .vertex_elastic import tet_volume_moving

CHEB_RHO = 0.95   # seed 001 Sec. 10.4
CHEB_GAMMA = 1.0  # the paper's 1.7 diverges on the stiff stretch measured in tests/blockdescent
SOR_OMEGA = 1.7   # seed 001 Eq. 53
MAX_HALVINGS = 30


@dataclass
class QuasistaticProblem:
    """Elastic energy + external load + Dirichlet set. x0 (N, 3) m: start (Dirichlet vertices at
    their targets); fixed (N,) bool; f_ext (N, 3) N."""

    elastic: ElasticTerms
    x0: np.ndarray
    fixed: np.ndarray
    f_ext: np.ndarray

    def energy(self, x: np.ndarray) -> float:
        """E = Psi - f_ext . x (J); +inf for an invalid (inverted neo-Hookean) state."""
        return float(self.elastic.energy(x)) - float((self.f_ext * x).sum())

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """dE/dx (N, 3) in N, zero on the fixed vertices."""
        g = self.elastic.gradient(x).reshape(-1, 3) - self.f_ext
        g[self.fixed] = 0.0
        return g

    def residual(self, x: np.ndarray) -> float:
        """|grad E| (N) over the free degrees of freedom."""
        return float(np.linalg.norm(self.gradient(x)))


@dataclass
class SolveTrace:
    """Residual (N) against iterations and wall time (s), and the final positions."""

    x: np.ndarray
    iterations: List[int] = field(default_factory=list)
    seconds: List[float] = field(default_factory=list)
    residual: List[float] = field(default_factory=list)

    def seconds_to(self, residual: float) -> Optional[float]:
        """Wall time (s) at which the residual first fell to ``residual``; None if it never did."""
        for s, r in zip(self.seconds, self.residual):
            if r <= residual:
                return s
        return None


def lattice_bar(cells=(16, 4, 4), size=(0.4, 0.1, 0.1), youngs_modulus: float = 1.0e5, poisson_ratio: float = 0.3,
                model: str = "fixed_corotated", stretch: float = 1.5, twist_deg: float = 0.0, density: float = 0.0,
                gravity=(0.0, 0.0, 0.0)) -> QuasistaticProblem:
    """The seed's stretching block (001 Sec. 10.1): a bar along x (m) of nx x ny x nz cubes of 6 tets
    each (Kuhn split), both end faces clamped; the +x end is moved so the bar's length becomes
    ``stretch`` times the rest length and both ends are twisted by +-twist_deg/2 about the axis.
    The start is the rest shape with only the clamped ends moved (the hardest start for a local
    method: all of the deformation has to travel in from the ends). Units: m, Pa, kg/m^3, m/s^2."""
    nx, ny, nz = cells
    L = np.asarray(size, np.float64)
    g = np.stack(np.meshgrid(np.arange(nx + 1), np.arange(ny + 1), np.arange(nz + 1), indexing="ij"), -1)
    X = (g.reshape(-1, 3) / np.array([nx, ny, nz]) - [0.0, 0.5, 0.5]) * L
    vid = np.arange(len(X)).reshape(nx + 1, ny + 1, nz + 1)
    corner = np.array([[(c >> 0) & 1, (c >> 1) & 1, (c >> 2) & 1] for c in range(8)])
    paths = []
    for a, b, c in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
        paths.append([0, 1 << a, (1 << a) | (1 << b), 7])
    i, j, k = [q.ravel() for q in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")]
    tets = []
    for path in paths:
        tets.append(np.stack([vid[i + corner[c, 0], j + corner[c, 1], k + corner[c, 2]] for c in path], 1))
    tets = np.concatenate(tets).astype(np.int32)
    p = X[tets]
    vol = np.einsum("ij,ij->i", p[:, 1] - p[:, 0], np.cross(p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]))
    tets[vol < 0] = tets[vol < 0][:, [0, 2, 1, 3]]
    Dm_inv, vol = elastic_tet.rest_shape(X, tets)
    mu, lam = lame(youngs_modulus, poisson_ratio)
    T = len(tets)
    el = ElasticTerms(n_verts=len(X), tets=tets, tet_Dm_inv=Dm_inv, tet_vol=vol, tet_mu=np.full(T, mu),
                      tet_lam=np.full(T, lam), tet_model=np.full(T, MODEL_IDS[model], np.int32))
    left = X[:, 0] <= 1e-12 * L[0]
    right = X[:, 0] >= L[0] * (1.0 - 1e-12)
    x0 = X.copy()
    th = np.radians(twist_deg) / 2.0
    for mask, sgn in ((left, -1.0), (right, 1.0)):
        c, s_ = np.cos(sgn * th), np.sin(sgn * th)
        y, z = X[mask, 1], X[mask, 2]
        x0[mask, 1] = c * y - s_ * z
        x0[mask, 2] = s_ * y + c * z
    x0[right, 0] = stretch * L[0]
    m = np.zeros(len(X))
    np.add.at(m, tets.ravel(), np.repeat(density * vol / 4.0, 4))
    f_ext = m[:, None] * np.asarray(gravity, np.float64)[None, :]
    return QuasistaticProblem(el, x0, left | right, f_ext)


# --- PBNG kernels -----------------------------------------------------------------------------------
@njit(cache=True, fastmath=False)
def _qs_range(j0, j1, verts, x, fext, fixed, EL, omega, newp):
    """Per-vertex Newton steps of verts[j0:j1] into newp (Jacobi inside the colour), each relaxed
    by omega and halved until its tets keep VOLUME_KEEP of their volume."""
    g = np.empty(3)
    H = np.empty((3, 3))
    J = np.zeros((3, 12))
    s5 = np.empty((5, 3))
    dv = np.empty(3)
    r = np.empty(3)
    p = np.empty(3)
    tets, vT_s, vT_e, vT_k = EL[14], EL[20], EL[21], EL[22]
    for j in range(j0, j1):
        v = verts[j]
        for a in range(3):
            newp[j, a] = x[v, a]
        if fixed[v]:
            continue
        for a in range(3):
            g[a] = -fext[v, a]
            for b in range(3):
                H[a, b] = 0.0
        elastic_vertex(v, x, EL, g, H, J, s5, dv, r)
        if not _solve3(H, g, dv):
            continue
        t = omega
        for _ in range(MAX_HALVINGS):
            ok = True
            for a in range(3):
                p[a] = x[v, a] - t * dv[a]
            for k in range(vT_s[v], vT_s[v + 1]):
                e = vT_e[k]
                if tet_volume_moving(x, tets[e], vT_k[k], p) < VOLUME_KEEP * tet_volume_moving(x, tets[e], vT_k[k], x[v]):
                    ok = False
                    break
            if ok:
                for a in range(3):
                    newp[j, a] = p[a]
                break
            t *= 0.5


@njit(cache=True, fastmath=False, parallel=True)
def _qs_color_parallel(verts, x, fext, fixed, EL, omega, newp):
    nv = verts.shape[0]
    nch = max(1, min(nv, 32))
    for ch in prange(nch):
        _qs_range(ch * nv // nch, (ch + 1) * nv // nch, verts, x, fext, fixed, EL, omega, newp)


@njit(cache=True, fastmath=False)
def _tets_keep(x, ref, tets):
    """Every tet keeps at least VOLUME_KEEP of its volume at ref."""
    for e in range(tets.shape[0]):
        if tet_volume_moving(x, tets[e], 0, x[tets[e, 0]]) < VOLUME_KEEP * tet_volume_moving(ref, tets[e], 0, ref[tets[e, 0]]):
            return False
    return True


@njit(cache=True, fastmath=False)
def pbng_sweeps(n_sweeps, x, fext, fixed, EL, col_start, col_verts, mode, rho, gamma, omega_sor,
                x_prev, state, parallel):
    """n_sweeps PBNG sweeps on x (N, 3) in place. mode 0 plain, 1 Chebyshev (rho, gamma), 2 SOR
    (omega_sor, per-vertex relaxation). x_prev (N, 3) and state = (sweep count l, omega_l) carry
    the Chebyshev recurrence across calls."""
    n = x.shape[0]
    tets = EL[14]
    ncol = col_start.shape[0] - 1
    maxlen = 0
    for c in range(ncol):
        maxlen = max(maxlen, col_start[c + 1] - col_start[c])
    newp = np.empty((maxlen, 3))
    x_l = np.empty_like(x)
    relax = omega_sor if mode == 2 else 1.0
    for _ in range(n_sweeps):
        x_l[:, :] = x
        for c in range(ncol):
            verts = col_verts[col_start[c]:col_start[c + 1]]
            nv = verts.shape[0]
            if parallel and nv >= 500:
                _qs_color_parallel(verts, x, fext, fixed, EL, relax, newp[:nv])
            else:
                _qs_range(0, nv, verts, x, fext, fixed, EL, relax, newp[:nv])
            for j in range(nv):
                for a in range(3):
                    x[verts[j], a] = newp[j, a]
        if mode == 1:
            l = int(state[0]) + 1
            w = 1.0 if l < 2 else (2.0 / (2.0 - rho * rho) if l == 2 else 4.0 / (4.0 - rho * rho * state[1]))
            state[0] = l
            state[1] = w
            if l >= 2:
                x_pb = x.copy()
                for v in range(n):
                    if fixed[v]:
                        continue
                    for a in range(3):
                        x[v, a] = w * (gamma * (x_pb[v, a] - x_l[v, a]) + x_l[v, a] - x_prev[v, a]) + x_prev[v, a]
                if not _tets_keep(x, x_l, tets):
                    x[:, :] = x_pb
                    state[0] = 0.0
        x_prev[:, :] = x_l


def pbng_solve(prob: QuasistaticProblem, sweeps: int, mode: str = "chebyshev", every: int = 10,
               rho: float = CHEB_RHO, gamma: float = CHEB_GAMMA, omega: float = SOR_OMEGA,
               parallel: bool = False, x: Optional[np.ndarray] = None) -> SolveTrace:
    """Run PBNG for ``sweeps`` sweeps from prob.x0 (or x), recording the residual every ``every``
    sweeps. mode: "plain", "chebyshev" or "sor"."""
    el = prob.elastic
    n = prob.x0.shape[0]
    EL = element_tuple(el, n)
    cs, cv = color_arrays(el, n)
    x = np.ascontiguousarray(prob.x0 if x is None else x, np.float64).copy()
    fext = np.ascontiguousarray(prob.f_ext, np.float64)
    fixed = np.ascontiguousarray(prob.fixed, np.bool_)
    m = {"plain": 0, "chebyshev": 1, "sor": 2}[mode]
    x_prev = x.copy()
    state = np.zeros(2)
    tr = SolveTrace(x)
    done = 0
    tr.iterations.append(0)
    tr.seconds.append(0.0)
    tr.residual.append(prob.residual(x))
    while done < sweeps:
        k = min(every, sweeps - done)
        t = time.perf_counter()
        pbng_sweeps(k, x, fext, fixed, EL, cs, cv, m, rho, gamma, omega, x_prev, state, parallel)
        done += k
        el_t = time.perf_counter() - t
        tr.iterations.append(done)
        tr.seconds.append(tr.seconds[-1] + el_t)
        tr.residual.append(prob.residual(x))
    tr.x = x
    return tr


# --- Newton reference ---------------------------------------------------------------------------------
def newton_solve(prob: QuasistaticProblem, max_iter: int = 50, tol: float = 0.0,
                 x: Optional[np.ndarray] = None, linear_solver: str = "direct") -> SolveTrace:
    """Projected Newton on E with backtracking (Armijo-free: accept any decrease) and the no-inversion
    filter; stops after max_iter iterations or when the residual is <= tol (N)."""
    el = prob.elastic
    n = prob.x0.shape[0]
    free_dofs = np.nonzero(np.repeat(~prob.fixed, 3))[0]
    dof_map = -np.ones(3 * n, np.int64)
    dof_map[free_dofs] = np.arange(free_dofs.size)
    pattern = FreePattern(*el.patterns(), dof_map, free_dofs.size)
    tets = np.ascontiguousarray(el.tets, np.int32)
    solver = LinearSolver(linear_solver)
    x = np.ascontiguousarray(prob.x0 if x is None else x, np.float64).copy()
    tr = SolveTrace(x)
    tr.iterations.append(0)
    tr.seconds.append(0.0)
    tr.residual.append(prob.residual(x))
    for it in range(1, max_iter + 1):
        t = time.perf_counter()
        g = prob.gradient(x).ravel()[free_dofs]
        _, _, vals = el.hessian(x)
        H = pattern.matrix(vals, np.zeros(free_dofs.size))
        p = np.zeros(3 * n)
        p[free_dofs] = solver.solve(H, -g)
        p = p.reshape(-1, 3)
        E0 = prob.energy(x)
        alpha = 1.0
        while alpha > 1e-10:
            xn = x + alpha * p
            if _tets_keep(xn, x, tets) and prob.energy(xn) <= E0:  # keeps >= VOLUME_KEEP: no inversion
                break
            alpha *= 0.5
        else:
            break
        x = xn
        tr.iterations.append(it)
        tr.seconds.append(tr.seconds[-1] + time.perf_counter() - t)
        tr.residual.append(prob.residual(x))
        if tr.residual[-1] <= tol:
            break
    tr.x = x
    return tr
