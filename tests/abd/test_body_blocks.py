"""Contact and friction Hessians assembled straight into the affine bodies' 12 x 12 blocks
(contact/body_blocks.py, IncrementalPotential.BODY_BLOCKS) against the vertex path (every pair's vertex blocks
summed, then DofMap.pull_coo): the same Newton matrix to round-off on a scene with body-body, body-ground and
body-cloth pairs (the cloth's pairs take the vertex path), and a bake that ends at the same positions. The
comparisons with the vertex path run with the per-pair projected Hessian (BARRIER_GAUSS_NEWTON off, what the
vertex path assembles); the Gauss-Newton body blocks are checked against a dense J^T H J of the reference pair
Hessians."""
import numpy as np
import pytest

from protocol.scene import Body, Material
import solver_server.contact.body_blocks as BB
from solver_server.contact.barrier import barrier_first_derivative, barrier_second_derivative
from solver_server.contact.barrier_pair import cross_norm2_value, pair_stencil_local
from solver_server.contact.body_blocks import friction_hessian_bodies, barrier_hessian_bodies
from solver_server.contact.pairs import pair_set
from solver_server.contact.potential import pair_barrier
from solver_server.contact.psd import project_psd
from solver_server.model.primitives import grid_sheet
from solver_server.solvers.newton.integrator import IncrementalPotential
from tests.abd.abd_scenes import Run, ground, scene, stiff_box

# the dense contact path: subdivided cubes keep every triangle (the Mesh shape would merge their flat faces)
pytestmark = pytest.mark.usefixtures("dense_mesh_shapes")


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _scene(frames, cloth=True):
    a = stiff_box("a", (0.1, 0.1, 0.1), (0.0, 0.0, 0.0505), div=3, friction=0.4)
    b = stiff_box("b", (0.1, 0.1, 0.1), (0.01, 0.0, 0.152), div=3, friction=0.4, rot=_rz(0.3),
                  velocity=(0.2, 0.0, 0.0))
    c = stiff_box("c", (0.08, 0.08, 0.08), (0.12, 0.0, 0.0405), div=2, friction=0.4, velocity=(-0.3, 0.0, 0.0))
    Vc, Tc, Ec = grid_sheet((0.3, 0.3), (6, 6), center=(0.0, 0.0, 0.21))
    cloth = Body("sheet", "cloth", Vc, Tc, Ec, material=Material(density=200.0, youngs_modulus=1e5, thickness=1e-3,
                                                                bending_stiffness=1e-6, friction=0.3))
    bodies = (a, b, c, cloth) if cloth else (a, b, c)
    return scene(*bodies, ground(friction=0.4), frame_end=frames + 1)


def _potential(run, body_blocks):
    st, s = run.b.stepper, run.s
    fixed = np.zeros(st.D.n_z, bool)
    fixed[s.bc_index] = True
    old = IncrementalPotential.BODY_BLOCKS
    IncrementalPotential.BODY_BLOCKS = body_blocks
    try:
        ip = IncrementalPotential(s, st.x, st.v, st.h, st.gravity, st.contact, fixed, np.zeros(0, np.int64),
                                  np.zeros((0, 3)), 1e3)
    finally:
        IncrementalPotential.BODY_BLOCKS = old
    ip.prepare(st.x)
    return ip


def test_body_blocks_equal_vertex_path(monkeypatch):
    monkeypatch.setattr(BB, "BARRIER_GAUSS_NEWTON", False)
    run = Run(_scene(6))
    run.advance(6)
    ref = _potential(run, False)
    new = _potential(run, True)
    assert ref._body_info is None and new._body_info is not None
    x = run.b.stepper.x
    Hr = ref.hessian(x).toarray()
    Hn = new.hessian(x).toarray()
    scale = np.abs(Hr).max()
    assert np.abs(Hn - Hr).max() <= 1e-12 * scale
    # the gradient from the same pass (body rows summed per body pair) equals the vertex path's W^T g
    f = ref.free_dofs
    gr = ref.gradient(x)[f]
    gn = new.gradient(x)[f]
    assert np.abs(gn - gr).max() <= 1e-10 * np.abs(gr).max()   # round-off of sums that cancel near rest
    assert np.array_equal(new.hessian(x).toarray(), Hn)      # the pass kept for hessian(x) after gradient(x)
    # both parts were exercised: body blocks and the vertex path (cloth pairs), for barrier and friction
    ct, info, xs = run.b.contact, new._body_info, run.s.dof_map.to_x(x)
    (rv, _, _), (blk, ga, gb) = barrier_hessian_bodies(xs, new.cands, ct.mesh, ct.dhat, ct.kappa, info)
    assert len(rv) > 0 and len(blk) > 0 and (ga != gb).any()
    (rv, _, _), (blk, ga, gb) = friction_hessian_bodies(xs, ct.x_prev, ct.fs, 1e-4 * run.b.stepper.h, info,
                                                        majorize=ct.majorize_v)
    assert len(rv) > 0 and len(blk) > 0 and (ga != gb).any()


def test_bake_with_body_blocks_matches_vertex_path(monkeypatch):
    """Same scene baked both ways: the same iteration counts and positions within round-off. On the uniform line
    search: the per-island step (newton.BODY_STEP) compares island energies whose round-off differs between the
    two assemblies, so its choices (and the iteration counts: [17, 27, 13, 16] vs [17, 29, 13, 17]) may differ."""
    from solver_server.solvers.newton import newton as NW
    monkeypatch.setattr(NW, "BODY_STEP", False)
    monkeypatch.setattr(BB, "BARRIER_GAUSS_NEWTON", False)
    old = IncrementalPotential.BODY_BLOCKS
    zs = []
    its = []
    try:
        for on in (False, True):
            IncrementalPotential.BODY_BLOCKS = on
            run = Run(_scene(4))
            run.advance(4)
            zs.append(run.z.copy())
            its.append([s["newton_iterations"] for s in run.stats])
    finally:
        IncrementalPotential.BODY_BLOCKS = old
    assert its[0] == its[1]
    assert np.abs(zs[0] - zs[1]).max() < 1e-9


def test_gauss_newton_body_blocks_equal_dense_reference():
    """With BARRIER_GAUSS_NEWTON (the default) every body-space pair's Hessian is b''(s) grad s grad s^T (a mollified
    edge-edge pair keeps its projected exact Hessian): the blocks equal J^T H J summed densely over the reference
    pair Hessians (potential.pair_barrier, FD-checked), J the slots' weights over their bodies' rows; the
    gradient is the exact one either way."""
    assert BB.BARRIER_GAUSS_NEWTON
    run = Run(_scene(6, cloth=False))
    run.advance(6)
    ip = _potential(run, True)
    ct, info, xs = run.b.contact, ip._body_info, np.ascontiguousarray(run.s.dof_map.to_x(run.b.stepper.x))
    (rv, _, _), (blk, ga, gb) = barrier_hessian_bodies(xs, ip.cands, ct.mesh, ct.dhat, 1.0, info)
    assert len(blk) > 0 and (ga != gb).any()
    G = info.G
    got = np.zeros((12 * G, 12 * G))
    for b_, P, Q in zip(blk, ga, gb):
        got[12 * P:12 * P + 12, 12 * Q:12 * Q + 12] += b_
    ps = pair_set(ip.cands, ct.mesh, xs)
    ref = np.zeros_like(got)
    n_body = n_moll = 0
    for k in range(len(ps)):
        X = xs[ps.ids[k]].ravel()
        st = pair_stencil_local(X, ps.is_ee[k])
        s = np.sqrt(st[5]) - ps.off[k]
        v = ps.ids[k]
        bodies = {int(info.grp[w]) for w in v if info.mode[w] == 1}
        if s >= ct.dhat or not bodies or (info.mode[v] == 0).any() or len(bodies) > 2:
            continue   # inactive, on fixed vertices only, or a vertex-path pair
        g = np.zeros(12)
        H = np.zeros((12, 12))
        pair_barrier(X, st, ps.is_ee[k], ps.off[k], ps.epsx[k], ct.dhat, g, H, True, True)
        if ps.is_ee[k] and cross_norm2_value(X) < ps.epsx[k]:
            H = project_psd(H)
            n_moll += 1
        else:
            gs = g / barrier_first_derivative(s, ct.dhat)
            H = barrier_second_derivative(s, ct.dhat) * np.outer(gs, gs)
        J = np.zeros((12, 12 * G))
        for u in range(4):
            if info.mode[v[u]] == 1:
                for i in range(4):
                    for a in range(3):
                        J[3 * u + a, 12 * info.grp[v[u]] + 3 * i + a] = info.wts[v[u], i]
        ref += J.T @ H @ J
        n_body += 1
    assert n_body > 100
    assert np.abs(got - ref).max() <= 1e-10 * np.abs(ref).max()
    assert np.linalg.eigvalsh(0.5 * (got + got.T)).min() >= -1e-10 * np.abs(got).max()


def test_body_blocks_same_bytes_on_one_and_two_threads(monkeypatch):
    """The groups of pairs are summed per body pair by one thread each, in key order: the blocks do not depend on
    the thread count."""
    import numba
    import solver_server.threads as th
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread")
    run = Run(_scene(5))
    run.advance(5)
    ip = _potential(run, True)
    ct, info, xs = run.b.contact, ip._body_info, run.s.dof_map.to_x(run.b.stepper.x)
    monkeypatch.setattr(th, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(th, "machine_has_idle_core", lambda *a, **k: True)
    outs = []
    old = numba.get_num_threads()
    try:
        for n in (1, 2):
            numba.set_num_threads(n)
            (_, _, vv), (blk, ga, gb) = barrier_hessian_bodies(xs, ip.cands, ct.mesh, ct.dhat, ct.kappa, info)
            (_, _, fv), (fblk, _, _) = friction_hessian_bodies(xs, ct.x_prev, ct.fs, 1e-4 * run.b.stepper.h, info,
                                                               majorize=ct.majorize_v)
            outs.append((vv.tobytes(), blk.tobytes(), ga.tobytes(), gb.tobytes(), fv.tobytes(), fblk.tobytes()))
    finally:
        numba.set_num_threads(old)
    assert outs[0] == outs[1]


def _pairs_within(ct, x, cands):
    """(point-triangle, edge-edge) pairs of cands with contact distance below dhat at x, as sets."""
    from solver_server.contact.pairs import pair_set, contact_distances
    ps = pair_set(cands, ct.mesh, x)
    s = contact_distances(np.ascontiguousarray(x), ps.ids, ps.is_ee, ps.off)
    pt = np.asarray(cands.pt).reshape(-1, 2)
    ee = np.asarray(cands.ee).reshape(-1, 2)
    act = s < ct.dhat
    npt = len(pt)
    return ({tuple(r) for r in pt[act[:npt]]}, {tuple(r) for r in ee[act[npt:]]})


def test_candidate_list_holds_every_active_pair_while_within_the_skin():
    """The Verlet list built at x_b (contact.terms.CandidateList) has the active pairs of a fresh broad phase at
    points and on segments within skin / 2 of x_b, and is rebuilt beyond."""
    from solver_server.contact.terms import CandidateList
    run = Run(_scene(5))
    run.advance(5)
    ct = run.b.contact
    xb = np.ascontiguousarray(run.x)
    cl = CandidateList(ct, ct.dhat)
    c0 = cl.at(xb)
    rng = np.random.default_rng(0)
    for _ in range(4):
        d = rng.normal(size=xb.shape)
        d *= 0.49 * ct.dhat / np.linalg.norm(d, axis=1).max()     # every vertex within skin / 2
        x = xb + d
        assert cl.at(x) is c0 and cl.builds == 1
        fresh = _pairs_within(ct, x, ct.candidates(x))
        got = _pairs_within(ct, x, c0)
        assert fresh == got and len(fresh[0]) > 0
        assert cl.segment(xb, x) is c0
    far = xb.copy()
    far[0] += 0.6 * ct.dhat
    assert cl.segment(xb, far) is not c0
    assert cl.at(far) is not c0 and cl.builds == 2


def test_candidate_list_rebuilt_for_a_segment_holds_every_active_pair_along_it():
    """A segment on which one body moves far (1.5 mm, the others 0.1 mm): the list rebuilt for it (that body's
    skin widened) has the active pairs of a fresh broad phase all along the segment, and the next points
    within the skins reuse it; a body moving further than SKIN_MAX allows gets a list over the segment's swept boxes,
    which holds every active pair along that segment too."""
    from solver_server.contact.terms import CandidateList
    run = Run(_scene(5))
    run.advance(5)
    ct = run.b.contact
    x0 = np.ascontiguousarray(run.x)
    vb = ct.mesh.vertex_body
    rng = np.random.default_rng(1)
    move = rng.normal(size=(int(vb.max()) + 1, 3))
    move *= 1e-4 / np.linalg.norm(move, axis=1, keepdims=True)
    move[vb[0]] *= 15.0
    x1 = x0 + move[vb] + 1e-6 * rng.normal(size=x0.shape)
    cl = CandidateList(ct, ct.dhat)
    cl.at(x0)
    c = cl.segment(x0, x1)
    assert cl.builds == 2
    for t in (0.0, 0.3, 0.7, 1.0):
        x = x0 + t * (x1 - x0)
        assert _pairs_within(ct, x, c) == _pairs_within(ct, x, ct.candidates(x))
    assert cl.segment(x0 + 0.5 * (x1 - x0), x1) is c and cl.at(x1) is c and cl.builds == 2
    x2 = x0 + 3.0 * (x1 - x0)
    c2 = cl.segment(x0, x2)
    assert cl.builds == 3 and c2 is not c
    assert cl.segment(x0 + 0.5 * (x2 - x0), x2) is c2 and cl.at(x0 + 0.25 * (x2 - x0)) is c2
    for t in (0.0, 0.5, 1.0):
        x = x0 + t * (x2 - x0)
        assert _pairs_within(ct, x, c2) == _pairs_within(ct, x, ct.candidates(x))


def test_bake_with_candidate_list_matches_broad_phase_per_query():
    """Bodies only (the list is used when nothing but affine bodies moves): the same iterations and positions
    within round-off (the pairs are summed in another order)."""
    from solver_server.solvers.newton.integrator import TimeStepper
    old = TimeStepper.VERLET_SKIN
    zs, its = [], []
    try:
        for skin in (0.0, 1.0):
            TimeStepper.VERLET_SKIN = skin
            run = Run(_scene(6, cloth=False))
            run.advance(6)
            zs.append(run.z.copy())
            its.append([s["newton_iterations"] for s in run.stats])
    finally:
        TimeStepper.VERLET_SKIN = old
    assert its[0] == its[1]
    assert np.abs(zs[0] - zs[1]).max() < 1e-9


def test_ccd_on_the_candidate_list_equals_the_full_sweep():
    """Newton's CCD bound on scenes of affine bodies reads the step's candidate list (contact/ccd.py
    max_step_candidates over CandidateList.segment's pairs): the same bound as the swept broad phase and CCD of
    every element (max_step_size), on moves that stop short of contact, cross it, and reuse a list."""
    from solver_server.contact.ccd import max_step_candidates, max_step_size
    from solver_server.contact.terms import CandidateList
    run = Run(_scene(5, cloth=False))
    run.advance(5)
    ct = run.b.contact
    x0 = np.ascontiguousarray(run.x)
    vb = ct.mesh.vertex_body
    static = np.asarray(ct.mesh.body_static, bool)
    rng = np.random.default_rng(3)
    cl = CandidateList(ct, ct.dhat)
    seen = set()
    for scale in (1e-5, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2):
        move = rng.normal(size=(int(vb.max()) + 1, 3)) * scale
        move[static] = 0.0
        p = move[vb] + 0.05 * scale * rng.normal(size=x0.shape) * ~static[vb][:, None]
        c = cl.segment(x0, x0 + p)
        a_full = max_step_size(x0, p, ct.mesh, ct.dhat)
        a_list = max_step_candidates(x0, p, c, ct.mesh)
        assert a_list == a_full
        seen.add(a_full < 1.0)
        # a shorter step on the same segment reuses the list and the bound scales
        c2 = cl.segment(x0, x0 + 0.5 * p)
        assert c2 is c
        assert max_step_candidates(x0, 0.5 * p, c2, ct.mesh) == max_step_size(x0, 0.5 * p, ct.mesh, ct.dhat)
    assert seen == {True, False}


def test_segment_sub_list_keeps_every_pair_that_comes_within_dhat_and_the_same_ccd_bound():
    """ContactTerms.narrowed cuts a segment's list to the pairs whose swept primitive boxes come within dhat: on
    moves that stop short of contact and cross it, the pairs within dhat anywhere along the segment (sampled) and at
    points whose every vertex stays in the box of its two ends are all kept, their energy and body derivatives are
    the full list's, and the CCD bound is the same value (the dropped pairs cannot reach contact); most of the list
    is dropped on small moves (here a tight list: ~8%; on the Mesh pile, whose lists grow skins while it lands, 55-67%)."""
    from solver_server.contact.ccd import max_step_candidates
    from solver_server.contact.terms import CandidateList
    run = Run(_scene(5, cloth=False))
    run.advance(5)
    ct = run.b.contact
    ip = _potential(run, True)
    info = ip._body_info
    x0 = np.ascontiguousarray(run.x)
    vb = ct.mesh.vertex_body
    static = np.asarray(ct.mesh.body_static, bool)
    rng = np.random.default_rng(5)
    cl = CandidateList(ct, ct.dhat)
    fractions = []
    for scale in (1e-5, 1e-4, 1e-3, 3e-3, 1e-2):
        move = rng.normal(size=(int(vb.max()) + 1, 3)) * scale
        move[static] = 0.0
        p = move[vb] + 0.05 * scale * rng.normal(size=x0.shape) * ~static[vb][:, None]
        c = cl.segment(x0, x0 + p)
        sub = ct.narrowed(c, x0, x0 + p)
        fractions.append(len(sub) / len(c))
        assert max_step_candidates(x0, p, sub, ct.mesh) == max_step_candidates(x0, p, c, ct.mesh)
        # a point inside the segment's vertex boxes but off the segment: every vertex at its own fraction
        t_v = rng.uniform(0.0, 1.0, size=(x0.shape[0], 1))
        for x in [x0 + t * p for t in (0.0, 0.25, 0.5, 0.75, 1.0)] + [x0 + t_v * p]:
            x = np.ascontiguousarray(x)
            full = _pairs_within(ct, x, c)
            assert _pairs_within(ct, x, sub) == full
            ef, es = ct.energy(x, c), ct.energy(x, sub)
            if not np.isfinite(ef):   # past contact on the moves that cross it
                assert es == ef
                continue
            assert abs(es - ef) <= 1e-12 * abs(ef) + 1e-300
            gf = ct.derivatives_bodies(x, c, info)[1]
            gs = ct.derivatives_bodies(x, sub, info)[1]
            assert np.abs(gs - gf).max() <= 1e-12 * max(np.abs(gf).max(), 1e-300)
    assert fractions[0] < 0.95 and all(f <= 1.0 for f in fractions)


def test_friction_groups_kept_on_the_frozen_pairs_give_the_same_bytes():
    """The friction pairs' body-pair groups are kept on the frozen FrictionSet (body_blocks._friction_groups): a
    second assembly reuses them and returns the bytes of an assembly that groups afresh; new slot arrays regroup."""
    run = Run(_scene(4))
    run.advance(4)
    ct, st = run.b.contact, run.b.stepper
    ip = _potential(run, True)
    info, xs = ip._body_info, run.s.dof_map.to_x(st.x)
    fs = ct.fs
    assert fs is not None and len(fs)

    def assemble():
        (rv, cv, vv), (blk, ga, gb) = friction_hessian_bodies(xs, ct.x_prev, fs, 1e-4 * st.h, info,
                                                              majorize=ct.majorize_v)
        return b"".join(np.ascontiguousarray(a).tobytes() for a in (rv, cv, vv, blk, ga, gb))

    if hasattr(fs, "_groups"):
        del fs._groups
    first = assemble()
    kept = fs._groups
    assert assemble() == first and fs._groups is kept           # reused
    fs.ids = fs.ids.copy()                                       # other slot arrays: grouped again, same bytes
    assert assemble() == first and fs._groups is not kept
    assert len(kept[4][0]) > 0 and len(kept[4][2]) > 1          # pairs in more than one body pair
