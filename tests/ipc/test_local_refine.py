"""Newton's local refinement (solvers/newton/newton.py local_refine, docs/solver.md "Local refinement"):
its Hessian block is the exact block of the global projected Hessian, every local step lowers the
energy and keeps the guarantee, and a step with it still meets the one stop test."""
import numpy as np
import pytest

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import grid_sheet, icosphere
from solver_server.solvers.newton import newton as NW
from solver_server.solvers.newton.integrator import IncrementalPotential
from solver_server.solvers.newton.linear_solve import solve_direct


def _drape(n=12, frames=8):
    V, T, E = grid_sheet((1.0, 1.0), (n, n), center=(0, 0, 0.3))
    S, ST = icosphere(0.25, subdivisions=2)
    cloth = Body("cloth", "cloth", V, T, E, material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5,
                                                              bending_stiffness=1e-6, friction=0.3))
    return Scene(Settings(frame_end=frames + 1, fps=24.0, solver_quality="accurate"),
                 (cloth, Body("sphere", "collider", S, ST, material=Material(friction=0.3))))


@pytest.fixture(scope="module")
def draped():
    """A 12^2 cloth in contact with the sphere (frame 6 of the drape) and the step's potential there."""
    b = MeshBackend(_drape())
    for _ in range(6):
        b.advance()
    ts = b.stepper
    x_n = ts.x.copy()
    fixed = ~ts.s.dynamic_z.astype(bool)            # the sphere's vertices (a static collider)
    ts.contact.friction_setup(x_n, ts.contact.candidates(x_n))
    ts.contact.x_prev = x_n.copy()
    ip = IncrementalPotential(ts.s, x_n, ts.v, ts.h, ts.gravity, ts.contact, fixed, np.zeros(0, np.int64),
                              np.zeros((0, 3)), 1e3, ts._pattern(fixed))
    return b, ip, x_n


def test_region_block_is_the_global_block(draped):
    b, ip, x_n = draped
    x = x_n.copy()
    ip.prepare(x)
    H = ip.hessian(x).tocsc()
    n_free = ip.free_dofs.size // 3
    rng = np.random.default_rng(3)
    contact_v = np.unique(ip.cands.pt[:, 0]) if len(ip.cands.pt) else np.zeros(0, np.int64)
    contact_v = contact_v[contact_v < n_free]         # cloth vertices (the sphere's come after them)
    assert np.isfinite(H.data).all() and len(contact_v)
    for verts in (rng.choice(n_free, 20, replace=False), contact_v[:30]):
        R = np.sort(np.concatenate([3 * verts + a for a in range(3)]))
        A = ip.region_hessian(x, R).toarray()
        B = H[R][:, R].toarray()
        assert np.abs(A - B).max() <= 1e-12 * np.abs(B).max()


def _region_of(ip, x, k=40, seed=5):
    """Free-DOF indices of k contact vertices and k random ones (whole vertices, sorted)."""
    n_free = ip.free_dofs.size // 3
    rng = np.random.default_rng(seed)
    cv = np.unique(ip.cands.pt[:, 0])
    cv = cv[cv < n_free][:k]
    v = np.unique(np.concatenate([cv, rng.choice(n_free, k, replace=False)]))
    return np.sort(np.concatenate([3 * v + a for a in range(3)]))


def test_region_objective_matches_the_whole_objective(draped):
    """The region's gradient is the whole gradient over R, and its energy changes exactly as the whole energy
    for moves inside R (every other term is constant): the local line search compares the same thing."""
    b, ip, x_n = draped
    x = x_n.copy()
    ip.prepare(x)
    R = _region_of(ip, x)
    sub = ip.region(R)
    assert sub is not None
    sub.prepare(x)
    g = ip.gradient(x)[ip.free_dofs][R]
    gr = sub.gradient(x)
    assert np.abs(gr - g).max() <= 1e-9 * np.abs(g).max()
    H = ip.hessian(x).tocsc()[R][:, R].toarray()
    assert np.abs(sub.hessian(x).toarray() - H).max() <= 1e-12 * np.abs(H).max()
    rng = np.random.default_rng(1)
    p = np.zeros(x.size)
    p[ip.free_dofs[R]] = 1e-4 * rng.standard_normal(R.size)
    x1 = x + p.reshape(-1, 3)
    E_whole = ip.line_search_energy(x, x1)
    E_sub = sub.line_search_energy(x, x1)
    dw = E_whole(x1) - E_whole(x)
    ds = E_sub(x1) - E_sub(x)
    assert abs(dw) > 0 and abs(ds - dw) <= 1e-6 * abs(dw) + 1e-12 * abs(E_whole(x))
    assert sub.max_step(x, p.reshape(-1, 3)) == ip.max_step(x, p.reshape(-1, 3))


def test_near_filtered_broad_phase_and_ccd_keep_every_pair(draped):
    """Candidates and CCD restricted to the elements near a vertex mask: exactly the whole search's pairs with a
    vertex in the mask, and the same step bound for steps that move only those vertices."""
    from solver_server.contact.broad_phase import find_candidates, find_candidates_ccd, touching
    from solver_server.contact.ccd import max_step_size
    b, ip, x_n = draped
    m = b.contact.mesh
    rng = np.random.default_rng(7)
    x = x_n.copy()
    for trial in range(4):
        near = np.zeros(m.n_verts, bool)
        near[rng.choice(m.n_verts, 1 + 25 * trial, replace=False)] = True
        p = np.where(near[:, None], rng.standard_normal((m.n_verts, 3)) * 0.02, 0.0)
        for got, want in ((find_candidates(x, m, 1e-3, near=near), touching(find_candidates(x, m, 1e-3), m, near)),
                          (find_candidates_ccd(x, x + p, m, 1e-3, near=near),
                           touching(find_candidates_ccd(x, x + p, m, 1e-3), m, near))):
            for a, c in ((got.pt, want.pt), (got.ee, want.ee)):
                assert set(map(tuple, np.asarray(a).tolist())) == set(map(tuple, np.asarray(c).tolist()))
        assert max_step_size(x, p, m, 1e-3, near=near) == max_step_size(x, p, m, 1e-3)


def test_local_steps_lower_the_energy_and_keep_the_guarantee(draped):
    b, ip, x_n = draped
    x = x_n.copy()
    ip.prepare(x)
    g = ip.gradient(x)[ip.free_dofs]
    H = ip.hessian(x)
    pf = -solve_direct(H, g)
    R = NW._region(H, pf, b.stepper.h, 1e-6)
    if R is None:   # more seeds than LOCAL_SEEDS: take the 20 largest moves' vertices
        pv = np.abs(pf.reshape(-1, 3)).max(axis=1)
        v = np.sort(np.argsort(pv)[-20:])
        R = np.sort(np.concatenate([3 * v + a for a in range(3)]))
    E0 = ip.energy(x)
    x1, solves = NW.local_refine(ip, x, R, b.stepper.h, 1e-6)
    assert solves >= 1
    assert ip.energy(x1) < E0
    moved = np.nonzero(np.abs(x1 - x).max(axis=1) > 0)[0]
    assert set(moved) <= set(ip.free_dofs[R] // 3)      # only the region moves
    assert b.contact.count_intersections(x1) == 0
    assert ip.valid(x1)


def test_drape_with_and_without_refinement_converges(monkeypatch):
    def run(seeds):
        monkeypatch.setattr(NW, "LOCAL_SEEDS", seeds)
        b = MeshBackend(_drape(10, 10))
        its, local = 0, 0
        for _ in range(10):
            r = b.advance()
            assert "warning" not in r.stats          # every step met the stop test
            its += r.stats["newton_iterations"]
            assert b.contact.count_intersections(b.stepper.x) == 0
        return b.stepper.x.copy(), its
    x_off, its_off = run(0)
    x_on, its_on = run(NW.LOCAL_SEEDS)
    # both answers are converged steps to 1e-2 m/s: they agree to a few mm on this small sheet
    assert np.sqrt(((x_on - x_off) ** 2).sum(axis=1).mean()) < 5e-3
