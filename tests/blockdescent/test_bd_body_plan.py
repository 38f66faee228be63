"""Body-parallel updates of affine bodies in the Fast solver (blockdescent/body_plan.py, affine_block.py):
the body colouring never puts two bodies that share a contact or friction pair in one colour, the
per-body pair lists are exact, the colours run on threads with exactly the sequential result, and
the body objective's gradient (closed-form orthogonality, pair-list barrier and friction) is the
derivative of its energy."""
import numba
import numpy as np

from solver_server.solvers.block_descent.affine_block import body_energy, body_grad_hess, affine_sweep
from solver_server.solvers.block_descent.body_plan import body_colors, body_pair_lists, body_pairs
from solver_server.solvers.block_descent.bounds import detect
from solver_server.solvers.block_descent.vertex_contact import contact_pack
from solver_server.contact.barrier_pair import new_scratch
from solver_server.contact.terms import EPS_V
from tests.abd.abd_scenes import Run, ground, scene, stiff_box


def _random_pairs(rng, nv, npairs):
    return rng.integers(0, nv, size=(npairs, 4)).astype(np.int32)


def test_body_colours_separate_coupled_bodies():
    """Random pair lists over 40 bodies (and free vertices): every free body gets exactly one colour,
    keyframed ones none, and no pair has two free bodies of the same colour."""
    rng = np.random.default_rng(3)
    nbod, per = 40, 5
    vbody = np.concatenate([np.repeat(np.arange(nbod), per), -np.ones(30, np.int64)]).astype(np.int32)
    presc = np.zeros(nbod, np.bool_)
    presc[[3, 17]] = True
    pids = _random_pairs(rng, len(vbody), 300)
    fids = _random_pairs(rng, len(vbody), 100)
    start, bodies = body_colors(pids, fids, vbody, presc, nbod)
    color = -np.ones(nbod, np.int64)
    for c in range(len(start) - 1):
        for b in bodies[start[c]:start[c + 1]]:
            assert color[b] == -1
            color[b] = c
    assert (color[~presc] >= 0).all() and (color[presc] == -1).all()
    for ids in (pids, fids):
        for row in ids:
            bs = {int(vbody[v]) for v in row if vbody[v] >= 0 and not presc[vbody[v]]}
            cs = [color[b] for b in bs]
            assert len(cs) == len(set(cs))
    assert len(start) - 1 < nbod          # an actual colouring, not one body per colour


def test_body_pair_lists_are_exact():
    rng = np.random.default_rng(4)
    nbod, per = 12, 6
    vbody = np.concatenate([np.repeat(np.arange(nbod), per), -np.ones(20, np.int64)]).astype(np.int32)
    pids = _random_pairs(rng, len(vbody), 200)
    s, k = body_pair_lists(pids, vbody, nbod)
    for b in range(nbod):
        expect = [i for i in range(len(pids)) if (vbody[pids[i]] == b).any()]
        assert sorted(k[s[b]:s[b + 1]].tolist()) == expect


def _pile_state():
    """Two stacks of three boxes side by side, 2 mm apart, settled for 3 frames; then the inputs of
    one body pass exactly as BlockDescentStepper.step builds them."""
    bs = []
    for i in range(6):
        col, lev = divmod(i, 3)
        bs.append(stiff_box(f"b{i}", (0.1, 0.1, 0.1), (0.102 * col, 0.001 * lev, 0.0505 + 0.1012 * lev)))
    run = Run(scene(*bs, ground(), solver_quality="fast", frame_end=5))
    run.advance(3)
    st = run.b.stepper
    s, N, h = st.s, st.s.n, st.h
    x_n = st.x.copy()
    y = x_n.copy()
    st.affine.inertia_target(x_n, st.v, h, st.gravity, y)
    target = y.copy()
    x = x_n.copy()
    ct = st.contact
    det = detect(x[:N], ct.mesh, st._query_radius(x[:N], st.affine.query_targets(y, target)), ct.dhat,
                 st.on_surface, st.gamma, st.pairs)
    CT = contact_pack(det, s.n, ct.dhat, ct.kappa)
    BD = det.bounds()
    FR = st._friction_pack(x_n[:N], EPS_V * h)
    return st, x, y, target, CT, BD, FR


def test_colours_on_threads_equal_sequential_updates():
    """One body pass on 2 threads gives bit for bit the result on 1 thread (bodies of one colour have
    separable objectives and write disjoint rows), and the colouring does run bodies side by side."""
    st, x, y, target, CT, BD, FR = _pile_state()
    N = st.s.n
    AB0 = st.affine.pack(x, y, target)
    vbody, presc = AB0.vbody, AB0.presc
    start, bodies = body_colors(CT.ids, FR.ids, vbody, presc, len(presc))
    assert np.diff(start).max() >= 2
    assert len(CT.ids) > 0 and len(FR.ids) > 0
    results = []
    old = numba.get_num_threads()
    for threads in (1, 2):
        xz, tz, yz = x.copy(), target.copy(), y.copy()
        AB = st.affine.pack(xz, yz, tz)
        out = np.zeros(3)
        numba.set_num_threads(threads)
        try:
            for _ in range(3):
                affine_sweep(xz[:N], tz[:N], 1.0 / st.h ** 2, BD, CT, FR, AB, 1e-7, out, threads > 1)
        finally:
            numba.set_num_threads(old)
        results.append(xz)
    assert np.abs(results[0] - x).max() > 0.0
    assert np.array_equal(results[0], results[1])


def test_body_gradient_is_the_derivative_of_its_energy():
    """Central differences of E_b (inertia, orthogonality, barrier and friction over the body's pair
    lists) match body_grad_hess's gradient for every body of the settled pile."""
    st, x, y, target, CT, BD, FR = _pile_state()
    N = st.s.n
    AB = st.affine.pack(x, y, target)
    vbody = AB.vbody
    nbod = len(AB.presc)
    bl = body_pairs(CT.ids, FR.ids, vbody, nbod)
    inv_h2 = 1.0 / st.h ** 2
    zb, yb = AB.rows, AB.inertia
    X, pos, a, wi, wj = np.empty(12), np.empty(3), np.empty(9), np.empty(4), np.empty(4)
    g, H = np.empty(12), np.empty((12, 12))
    touched = 0
    for b in range(nbod):
        q = zb[4 * b:4 * b + 4].copy()
        yq = yb[4 * b:4 * b + 4]
        touched += bl.bp_pair[bl.bp_start[b]:bl.bp_start[b + 1]].size > 0
        body_grad_hess(b, q, x[:N], yq, inv_h2, AB, CT, FR, bl, g, H, new_scratch(), X, pos, a, wi, wj)
        eps = 1e-9                       # the central-difference error falls as eps^2 down to here
        fd = np.zeros(12)
        for i in range(12):
            qp, qm = q.copy(), q.copy()
            qp.reshape(-1)[i] += eps
            qm.reshape(-1)[i] -= eps
            fd[i] = (body_energy(b, qp, x[:N], yq, inv_h2, AB, CT, FR, bl, X, pos, a)
                     - body_energy(b, qm, x[:N], yq, inv_h2, AB, CT, FR, bl, X, pos, a)) / (2 * eps)
        assert np.abs(fd - g).max() < 1e-6 * np.abs(g).max(), (b, fd, g)
        assert np.linalg.eigvalsh(0.5 * (H + H.T)).min() > 0.0
    assert touched == nbod


def test_joint_body_step_is_a_newton_step_of_the_coupled_bodies():
    """joint_bodies.py on the settled pile: its gradient is the derivative of the bodies' total objective
    (each pair once), the assembled 12 nb system (diagonal body blocks + blocks of pairs spanning two
    bodies) is symmetric positive definite, CG solves it, and the step lowers the total objective."""
    from solver_server.solvers.block_descent import joint_bodies as J
    from solver_server.solvers.block_descent.body_plan import coupling_keys
    st, x, y, target, CT, BD, FR = _pile_state()
    N = st.s.n
    AB = st.affine.pack(x, y, target)
    nbod = len(AB.presc)
    inv_h2 = 1.0 / st.h ** 2
    keys = coupling_keys(CT.ids, FR.ids, AB.vbody, AB.presc, nbod)
    assert len(keys) >= 4
    free, nbr_s, G, Hd, Ho, pm, fm = J.joint_system(x[:N], inv_h2, CT, FR, AB, keys)
    Q0 = AB.rows.copy()

    def E(Q):
        return J.joint_energy(Q, x[:N], inv_h2, AB, CT, FR, free, pm, fm)

    eps = 1e-9
    for b in range(nbod):
        for i in range(12):
            Qp, Qm = Q0.copy(), Q0.copy()
            Qp[4 * b + i // 3, i % 3] += eps
            Qm[4 * b + i // 3, i % 3] -= eps
            assert abs((E(Qp) - E(Qm)) / (2 * eps) - G[b, i]) < 1e-6 * np.abs(G).max()
    n = 12 * nbod
    Hf = np.zeros((n, n))
    for b in range(nbod):
        Hf[12 * b:12 * b + 12, 12 * b:12 * b + 12] = Hd[b]
    for e, k in enumerate(keys):
        b, c = divmod(int(k), nbod)
        Hf[12 * b:12 * b + 12, 12 * c:12 * c + 12] = Ho[e]
    assert np.abs(Hf - Hf.T).max() < 1e-12 * np.abs(Hf).max()
    assert np.linalg.eigvalsh(Hf).min() > 0.0
    assert np.abs(Ho).max() > 0.0
    dq = J.joint_direction(G, Hd, Ho, keys, nbr_s, free)
    exact = np.linalg.solve(Hf, -G.reshape(-1))
    assert np.abs(dq.reshape(-1) - exact).max() < 1e-6 * np.abs(exact).max()
    Q1 = Q0.copy()
    for b in range(nbod):
        Q1[4 * b:4 * b + 4] += dq[b].reshape(4, 3)
    assert E(Q1) < E(Q0)
