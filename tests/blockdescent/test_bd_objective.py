"""Both solver families minimise the same incremental potential: the per-vertex gradient the sweep
assembles (sweep._vertex_step over the stepper's incidence lists, contact detection and lagged
friction) equals, for every free vertex, the gradient of the Newton solver's objective
(ipc/integrator.IncrementalPotential) divided by h^2, term by term (inertia + gravity, elasticity of
cloth, tets and rods, barrier, friction), and its 3x3 block is symmetric positive definite with at
least the inertia m/h^2 on the diagonal. The one documented difference (vertex_contact.py) is the
edge-edge mollifier's gradient kappa b(s) dm/dx, which the fast solver drops; the cloth lies along the
ground's edges here, so mollified (nearly parallel) edge pairs are present and that term is accounted
for exactly.

This test drives internal pieces of blockdescent (stepper.EL, _friction_pack, bounds.detect,
sweep._vertex_step) on purpose: the glue between kernels, incidence lists and scene arrays is where
an index or scale slip would make the fast solver minimise a different energy.
"""
import numpy as np
import pytest

from protocol.scene import Body, Material
from solver_server.solvers.block_descent.bounds import detect
from solver_server.solvers.block_descent.dihedral_cache import dihedrals_all
from solver_server.solvers.block_descent.vertex_contact import contact_pack, contact_scratch, no_contact
from solver_server.solvers.block_descent.sweep import _vertex_step
from solver_server.contact.barrier import barrier
from solver_server.contact.barrier_pair import cross_norm2_value
from solver_server.contact.mollifier import cross_norm2_grad_hess, mollifier
from solver_server.contact.pairs import contact_distances
from solver_server.contact.terms import EPS_V
from solver_server.solvers.newton.integrator import IncrementalPotential
from solver_server.model.primitives import box
from tests.ipc.test_scene_helpers import plane

from .bd_scenes import block_of, cloth, fast_backend, fast_scene


def _scene():
    cl = cloth(4, 0.0008, size=0.2, friction=0.4)                      # 0.3 mm above the ground (s < dhat)
    cl = Body(cl.name, cl.role, cl.vertices - [0.3, 0, 0], cl.triangles, cl.edges, material=cl.material)
    V, T = box((0.1, 0.1, 0.1), center=(0.3, 0.0, 0.0504), divisions=1)  # 0.4 mm above the ground
    cubeb = Body("cube", "solid", V, T, material=Material(youngs_modulus=1e5, friction=0.5))
    t = np.linspace(0, 0.3, 6)
    R = np.column_stack([t - 0.15, np.full(6, 0.3), 0.05 + 0.02 * np.sin(10 * t)])
    edges = np.column_stack([np.arange(5), np.arange(1, 6)]).astype(np.int32)
    rod = Body("rod", "rod", R, np.zeros((0, 3), np.int32), edges,
               material=Material(youngs_modulus=1e7, thickness=2e-3, bending_stiffness=1e-3))
    return fast_scene(cl, cubeb, rod, plane(friction=0.2), frame_end=3)


def _deformed(b, rng):
    """x^n: every body deformed (elastic forces on), all pairs still apart; x: x^n plus a small slip."""
    x = b.system.x0.copy()
    for name, s in (("cloth", 1.04), ("cube", 0.97), ("rod", 1.03)):
        blk = block_of(b, name)
        sl = slice(blk.offset, blk.offset + blk.n_nodes)
        c = x[sl].mean(0)
        x[sl, :2] = c[:2] + s * (x[sl, :2] - c[:2])
        if name == "cube":
            bottom = x[sl, 2].min()
            x[sl, 2] = bottom + s * (x[sl, 2] - bottom)
    dyn = b.system.dynamic
    x_n = x.copy()
    x = x_n.copy()
    x[dyn, :2] += 5e-5 * rng.standard_normal((dyn.sum(), 2))           # tangential slip: friction active
    x[dyn, 2] += 2e-5 * rng.standard_normal(dyn.sum())
    return x_n, x


def _dropped_mollifier_gradient(x, det, dhat, kappa):
    """sum over mollified edge-edge pairs of kappa b(s) dm/dx (n, 3): what barrier_vertex leaves out."""
    out = np.zeros_like(x)
    s_all = contact_distances(x, det.ids, det.is_ee, det.off)
    for k in np.nonzero(det.is_ee)[0]:
        X = np.ascontiguousarray(x[det.ids[k]].ravel())
        if cross_norm2_value(X) >= det.epsx[k] or s_all[k] >= dhat:
            continue
        gc = np.zeros(12)
        c = cross_norm2_grad_hess(X, gc, np.zeros((12, 12)), False)
        m1 = mollifier(c, det.epsx[k])[1]
        for i in range(4):
            out[det.ids[k, i]] += kappa * barrier(s_all[k], dhat) * m1 * gc[3 * i:3 * i + 3]
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_vertex_gradient_is_the_newton_objective_gradient(seed):
    sc = _scene()
    b = fast_backend(sc)
    st, s, ct = b.stepper, b.system, b.contact
    h = st.h
    rng = np.random.default_rng(seed)
    x_n, x = _deformed(b, rng)
    v_n = 0.1 * rng.standard_normal(x.shape) * s.dynamic[:, None]
    assert ct.count_intersections(x) == 0 and ct.min_distance(x, ct.candidates(x)) > 0

    # the Newton objective (prescribed collider vertices fixed, no pin penalty)
    fixed = st.presc.copy()
    ip = IncrementalPotential(s, x_n, v_n, h, st.gravity, ct, fixed, np.zeros(0, np.int64), np.zeros((0, 3)), 0.0)
    # the fast solver's pieces at the same state: y, lagged friction frozen at x^n, contact detection at x
    y = x_n.copy()
    y[s.dynamic] += h * v_n[s.dynamic] + h * h * st.gravity
    FR = st._friction_pack(x_n, EPS_V * h)
    assert len(FR.ids) > 0 and ct.fs is not None and len(ct.fs) == len(FR.ids)   # friction pairs exist
    det = detect(x, ct.mesh, 0.0, ct.dhat, st.on_surface)
    CT = contact_pack(det, s.n, ct.dhat, ct.kappa)
    ip.prepare(x)
    G = ip.gradient(x).reshape(-1, 3) / h ** 2

    # term by term, so a slip in one term is not hidden by the others
    parts = {
        "elastic": s.elastic.gradient(x).reshape(-1, 3),
        "barrier": ct.gradient(x, ip.cands).reshape(-1, 3),
        "friction": ct.friction_gradient(x, h).reshape(-1, 3),
    }
    assert all(np.abs(p[s.dynamic]).max() > 0 for p in parts.values())
    dropped = _dropped_mollifier_gradient(x, det, ct.dhat, ct.kappa)
    assert np.abs(dropped).max() > 1e-6 * np.abs(parts["barrier"]).max()   # the mollified case is exercised
    inertia = s.mass[:, None] / h ** 2 * (x - y)
    np.testing.assert_allclose(G[s.dynamic], (inertia + sum(parts.values()))[s.dynamic],
                               rtol=1e-9, atol=1e-9 * np.abs(G[s.dynamic]).max())

    J, s5, dv, r, X, p = np.zeros((3, 12)), np.empty((5, 3)), np.empty(3), np.empty(3), contact_scratch(), np.empty(3)
    SH = st.SH
    dihedrals_all(x, SH.quad, SH.theta, SH.grad, SH.ok)            # the sweep's dihedral cache, filled at x
    inv_h2 = 1.0 / h ** 2
    mass = np.ascontiguousarray(s.mass, np.float64)
    empty_ct = no_contact(s.n, ct.dhat, ct.kappa)
    FR0 = FR._replace(mu_lambda=np.zeros_like(FR.mu_lambda))      # the same friction pairs with mu lambda = 0
    free = np.nonzero(s.dynamic & ~st.presc)[0]
    gscale = np.abs(G[s.dynamic]).max()
    for v in free:
        g = np.empty(3)
        H = np.empty((3, 3))
        # full gradient
        _vertex_step(v, x, y, mass, inv_h2, st.EL, SH, CT, FR, g, H, J, s5, dv, r, X, p)
        np.testing.assert_allclose(g, G[v] - dropped[v], rtol=1e-9, atol=1e-10 * gscale)
        assert np.abs(H - H.T).max() <= 1e-12 * np.abs(H).max()
        assert np.linalg.eigvalsh(H - mass[v] * inv_h2 * np.eye(3)).min() >= -1e-9 * np.abs(H).max()
        assert np.allclose(p, x[v] - np.linalg.solve(H, g), rtol=0, atol=1e-12)
        # elastic only (y = x kills inertia, no contact, no friction)
        _vertex_step(v, x, x, mass, inv_h2, st.EL, SH, empty_ct, FR0, g, H, J, s5, dv, r, X, p)
        np.testing.assert_allclose(g, parts["elastic"][v], rtol=1e-9, atol=1e-9 * np.abs(parts["elastic"]).max())
        # barrier only = (elastic + barrier) - elastic
        ge = g.copy()
        _vertex_step(v, x, x, mass, inv_h2, st.EL, SH, CT, FR0, g, H, J, s5, dv, r, X, p)
        np.testing.assert_allclose(g - ge, parts["barrier"][v] - dropped[v], rtol=1e-9,
                                   atol=1e-9 * np.abs(parts["barrier"]).max())
        # friction only
        gb = g.copy()
        _vertex_step(v, x, x, mass, inv_h2, st.EL, SH, CT, FR, g, H, J, s5, dv, r, X, p)
        np.testing.assert_allclose(g - gb, parts["friction"][v], rtol=1e-9,
                                   atol=1e-9 * np.abs(parts["friction"]).max())
