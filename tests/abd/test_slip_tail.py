"""Issue 19's bounded exact friction tail (solvers/newton/newton.py SLIP_TAIL, docs/solver.md "The body step", item 16):
the slip bound (contact/friction.py slip_depth_bound) against a sampled numpy reference, and a body coming to rest
across the friction kink, where the majorizer alone crawls."""
import numpy as np
import scipy.sparse as sp

from solver_server.contact.friction import (FrictionSet, f0, friction_energy, friction_gradient, friction_hessian,
                                            slip_depth_bound)
from solver_server.integrators import stop_test
from solver_server.solvers.newton import newton


def _slips(x, x_prev, ids, coef, T):
    d = np.einsum("ki,kij->kj", coef, (x - x_prev)[ids])
    return np.einsum("kj,kjt->kt", d, T)


def test_slip_depth_bound_against_sampled_slips():
    """Random pairs and moves: below the returned fraction t no pair's slip |u(s)| falls below its floor
    min(|u(0)|, eps) - depth eps (sampled on 4,001 fractions), and at t (when < 1) one pair is on its floor; the
    count is the number of pairs that reach their floor within the move."""
    rng = np.random.default_rng(7)
    n, K, eps, depth = 30, 200, 4e-6, 0.25
    x_prev = rng.normal(size=(n, 3))
    ids = rng.integers(0, n, size=(K, 4)).astype(np.int32)
    coef = rng.normal(size=(K, 4))
    T = np.linalg.qr(rng.normal(size=(K, 3, 3)))[0][:, :, :2].copy()
    s = np.linspace(0.0, 1.0, 4001)
    seen_bound = 0
    for trial in range(12):
        scale = (1e-7, 1e-6, 3e-6)[trial % 3]
        x0 = x_prev + scale * rng.normal(size=(n, 3))
        x1 = x0 + scale * rng.normal(size=(n, 3))
        k = rng.integers(0, K, size=8)
        x1[ids[k, 0]] = x0[ids[k, 0]]       # some pairs barely move
        t, cnt = slip_depth_bound(x0, x1, x_prev, ids, coef, T, eps, depth)
        u0, u1 = _slips(x0, x_prev, ids, coef, T), _slips(x1, x_prev, ids, coef, T)
        floor = np.minimum(np.linalg.norm(u0, axis=1), eps) - depth * eps
        y = np.linalg.norm(u0[None] + s[:, None, None] * (u1 - u0)[None], axis=2)   # (S, K)
        below = (y < floor[None]) & (floor[None] > 0)
        first = np.where(below.any(0), s[np.argmax(below, axis=0)], np.inf)
        ref_t = min(1.0, first.min())
        assert ref_t - 1.0 / 4000 <= t <= ref_t + 1e-12
        assert cnt == int((first <= 1.0).sum()) or abs(cnt - int((first <= 1.0).sum())) <= 1   # a root on the grid's edge
        if t < 1.0:
            seen_bound += 1
            ut = u0 + t * (u1 - u0)
            gap = np.linalg.norm(ut, axis=1) - floor
            assert np.min(np.where(floor > 0, np.abs(gap), np.inf)) < 1e-9 * eps
    assert seen_bound > 0
    t, cnt = slip_depth_bound(x0, x0, x_prev, ids, coef, T, eps, depth)
    assert t == 1.0 and cnt == 0       # no move, no bound


class _Slider:
    """A point mass (0.5 kg, one free vertex) on a fixed one, one lagged friction pair between them: the incremental
    potential M/2 |x - x~|^2 + h^2 mu lambda f0(|u|), with x~ chosen so that the minimiser's slip is just inside the
    sticking zone (y* = 0.98 eps), where the majorizer's curvature mu lambda / y stands ~1,700 times above the mass."""
    free_dofs = np.arange(3)
    local_refinement = False

    def __init__(self, h, eps, ml, m):
        self.h, self.eps, self.m = h, eps, m
        self.mass_dofs = np.full(3, m)
        self.fs = FrictionSet(np.array([[0, 1, 0, 0]], np.int32), np.array([[1.0, -1.0, 0.0, 0.0]]),
                              np.array([[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]]), np.array([ml]))
        self.x_prev = np.zeros((2, 3))
        y = 0.98 * eps
        f1 = 2 * y / eps - y * y / eps ** 2
        k = h * h * ml
        d = np.array([0.6, 0.8, 0.0])
        self.xt = np.zeros((2, 3))
        self.xt[0] = (y + k * f1 / m) * d         # M (y - y~) + k f1(y) = 0 along d
        self.exact_friction = False
        self.solves = 0

    def prepare(self, x):
        pass

    def accepted(self, x):
        pass

    def energy(self, x):
        return 0.5 * self.m * np.sum((x[0] - self.xt[0]) ** 2) + self.h ** 2 * friction_energy(x, self.x_prev, self.fs, self.eps)

    def gradient(self, x):
        g = self.h ** 2 * friction_gradient(x, self.x_prev, self.fs, self.eps)
        g[:3] += self.m * (x[0] - self.xt[0])
        return g

    def hessian(self, x):
        self.solves += 1
        r, c, v = friction_hessian(x, self.x_prev, self.fs, self.eps,
                                   majorize=None if self.exact_friction else np.array([10.0, 10.0]))
        H = sp.coo_matrix((self.h ** 2 * v, (r, c)), shape=(6, 6)).tocsr()[:3, :3] + self.m * sp.eye(3)
        return H.tocsc()

    def max_step(self, x, p):
        return 1.0

    def line_search_energy(self, x0, x1):
        return self.energy

    def valid(self, x):
        return True

    def slip_depth_bound(self, x, p, depth):
        t, n = slip_depth_bound(x, x + p, self.x_prev, self.fs.ids, self.fs.coef, self.fs.T, self.eps, depth)
        return float(t), int(n)


ML = 2.0
MASS = 0.5
TOL = 1e-4   # m/s: a tolerance tight enough for one pair to show the crawl


def _solve(on):
    h, eps = 1.0 / 24, 1e-4 / 24
    obj = _Slider(h, eps, ML, MASS)
    x = obj.xt.copy()                         # the inertial prediction: sliding 7 mm a step
    old = newton.SLIP_TAIL
    newton.SLIP_TAIL = on
    try:
        r = newton.projected_newton(obj, x, h, TOL, 100)
    finally:
        newton.SLIP_TAIL = old
    return r, obj


def test_body_coming_to_rest_converges_without_the_crawl():
    """From a 7 mm slide the step's answer is a slip of 0.98 eps, just inside the sticking zone: under the majorizer
    alone the force residual crawls (35 iterations to a tolerance of 1e-4 m/s); the bounded exact tail converges in
    7, closer to the answer."""
    off, _ = _solve(False)
    on, obj = _solve(True)
    assert off.converged and off.iterations >= 30, off.iterations
    assert on.converged and on.iterations <= 10, on.iterations
    y_on, y_off = np.linalg.norm(on.x[0]), np.linalg.norm(off.x[0])
    assert abs(y_on - 0.98 * obj.eps) < 0.01 * obj.eps
    assert abs(y_on - 0.98 * obj.eps) < abs(y_off - 0.98 * obj.eps)
    g = obj.gradient(on.x)[:3]
    assert stop_test.body_residual(g, obj.mass_dofs, None, obj.h) < TOL
