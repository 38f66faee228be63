"""Newton's per-island step bound for affine bodies (solvers/newton/body_step.py, docs/solver.md "The body step",
item 7). References: the exact edge-triangle intersection test and the canonical CCD bound (contact/ccd.py
max_step_size) on every step the per-island search returns, the objective's own energy with a fresh broad phase
(the step is taken only when it does not raise it), and the closed form of the bend (quadratic in the step)."""
import numpy as np

from solver_server.bodies.affine import rotation_following_step
from solver_server.contact import count_intersections, max_step_size
from solver_server.solvers.newton import body_step

from .abd_scenes import Run, ground, scene, stiff_box


def _rot(rng):
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def test_bend_is_quadratic_in_the_step():
    """search_direction(x, s p) = s p + s^2 (search_direction(x, p) - p) with one s per body: what the scaled
    steps use."""
    rng = np.random.default_rng(3)
    nb = 5
    L = rng.uniform(0.03, 0.1, nb)
    z = np.zeros((2 + 4 * nb, 3))
    row0 = 2 + 4 * np.arange(nb)
    for b in range(nb):
        z[row0[b]] = rng.normal(size=3)
        z[row0[b] + 1:row0[b] + 4] = L[b] * _rot(rng).T
    p = 0.05 * rng.normal(size=z.shape)
    q = rotation_following_step(z, p, row0, L)
    s = rng.uniform(0.0, 1.0, z.shape[0])
    for b in range(nb):
        s[row0[b]:row0[b] + 4] = s[row0[b]]   # one factor per body (its 4 rows), as the islands' scales
    s = s[:, None]
    np.testing.assert_allclose(rotation_following_step(z, s * p, row0, L), s * p + s * s * (q - p), atol=1e-15)


def _thrown_boxes(n, seed):
    """n turned boxes of 4-8 cm in a 0.3 m cube, thrown at random towards its centre (1-3 m/s), over a ground."""
    rng = np.random.default_rng(seed)
    bodies, centres = [], []
    while len(centres) < n:
        c = rng.uniform([-0.15, -0.15, 0.08], [0.15, 0.15, 0.38])
        if all(np.linalg.norm(c - o) > 0.13 for o in centres):
            centres.append(c)
    for i, c in enumerate(centres):
        v = (np.array([0.0, 0.0, 0.23]) - c)
        v = rng.uniform(1.0, 3.0) * v / np.linalg.norm(v)
        bodies.append(stiff_box(f"b{i}", tuple(rng.uniform(0.04, 0.08, 3)), c, rot=_rot(rng), velocity=v))
    return bodies


def test_scaled_steps_never_cross_and_never_raise_the_energy(monkeypatch):
    """Every step the per-island search returns, in bakes of boxes thrown at each other: its straight path is
    collision free by the canonical CCD bound, its end has no edge-triangle intersection (exact test), its end
    passes the validity filter and its energy (fresh broad phase) is not above the start's. Some of them scale
    islands differently (the test is not vacuous)."""
    seen = {"steps": 0, "scaled": 0}
    inner = body_step.scaled_step

    def checked(obj, x, p, q0):
        q = inner(obj, x, p, q0)
        if q is not None:
            seen["steps"] += 1
            xs, dx = obj.D.to_x(x), obj.D.to_x(q)
            m = obj.contact.mesh
            assert max_step_size(xs, dx, m, obj.contact.dhat) >= 1.0
            assert count_intersections(np.ascontiguousarray(xs + dx), m.faces, m.edges) == 0
            assert obj.valid(x + q)
            assert obj.energy(x + q) <= obj.energy(x) + 1e-12 * abs(obj.energy(x))
            if not np.array_equal(q, q0):
                seen["scaled"] += 1
        return q

    monkeypatch.setattr(body_step, "scaled_step", checked)
    body_step.STATS["margin_mixed"] = 0
    for seed in (1, 2):
        r = Run(scene(*_thrown_boxes(8, seed), ground(), frame_start=1, frame_end=6))
        r.advance(5)    # Run checks every frame: no intersection, every body rigid
    assert seen["steps"] > 20 and seen["scaled"] > 5, seen
    # some tries mixed the two modes: a body re-bent off its path on its scaled full step, scaled islands re-bent
    assert body_step.STATS["margin_mixed"] > 0


def test_off_segment_is_per_body():
    """The distance of each vertex's tried move from the segment of its full-step move, its largest per body:
    against a sampled reference (the segment's closest point by brute force)."""
    rng = np.random.default_rng(3)
    n, ng = 60, 5
    d0 = rng.normal(size=(n, 3))
    d0[::7] = 0.0   # vertices that do not move on the full step (a resting body, a collider)
    dx = rng.normal(size=(n, 3))
    vbody = rng.integers(0, ng, n).astype(np.int64)
    got = body_step._off_segment(dx, d0, vbody, ng)
    t = np.linspace(0.0, 1.0, 200001)
    ref = np.zeros(ng)
    for i in range(n):
        d = np.sqrt(((dx[i][None, :] - t[:, None] * d0[i][None, :]) ** 2).sum(1)).min()
        ref[vbody[i]] = max(ref[vbody[i]], d)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-9)


def test_a_body_far_from_every_impact_takes_its_full_step(monkeypatch):
    """Two boxes thrown at each other and a third falling far from them: when the pair's island is scaled, the
    far box's rows are its full (bent) Newton step."""
    far = {"checked": 0}
    inner = body_step.scaled_step

    def checked(obj, x, p, q0):
        q = inner(obj, x, p, q0)
        if q is not None and not np.array_equal(q, q0):
            r = int(obj.ab.row0[2])
            np.testing.assert_array_equal(q[r:r + 4], q0[r:r + 4])
            far["checked"] += 1
        return q

    monkeypatch.setattr(body_step, "scaled_step", checked)
    a = stiff_box("a", (0.06, 0.06, 0.06), (-0.08, 0.0, 0.3), velocity=(2.0, 0.0, 0.0))
    b = stiff_box("b", (0.06, 0.06, 0.06), (0.08, 0.0, 0.3), velocity=(-2.0, 0.0, 0.0))
    c = stiff_box("c", (0.06, 0.06, 0.06), (0.6, 0.6, 0.6), velocity=(0.0, 0.0, -1.0))
    r = Run(scene(a, b, c, ground(), frame_start=1, frame_end=4))
    r.advance(3)
    assert far["checked"] > 0


def test_scaled_steps_give_the_same_bytes_whatever_the_thread_count(monkeypatch):
    """The per-island search reduces over pairs with minima, sums per group and unions only, so a bake of thrown
    boxes is byte-identical with every kernel on one thread and every kernel threaded."""
    import numba
    import pytest
    from solver_server import threads
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs numba threads")
    out = []
    for threaded in (False, True):
        monkeypatch.setattr(threads, "PARALLEL_MIN_ITEMS", 0 if threaded else 10 ** 12)
        monkeypatch.setattr(threads, "machine_has_idle_core", lambda busy_others=0.0, t=threaded: t)
        body_step.STATS["taken"] = 0
        r = Run(scene(*_thrown_boxes(8, 1), ground(), frame_start=1, frame_end=5))
        r.advance(4)
        assert body_step.STATS["taken"] > 0
        out.append(np.ascontiguousarray(r.z).tobytes())
    assert out[0] == out[1]


def test_dense_collision_shapes_keep_the_uniform_search(dense_mesh_shapes):
    """Bodies whose collision shapes average more than BODY_STEP_MAX_VERTICES vertices (Mesh shapes of subdivided
    cubes, their flat faces not merged here) take the uniform search: the per-island step's broad phase over each full step costs more than it
    saves there (100 Mesh cubes: 23.4 vs 15.3 CPU s / frame). Coarse boxes of the same scene do take it."""
    from solver_server.solvers.newton.integrator import BODY_STEP_MAX_VERTICES
    tries = []
    for div in (1, 10):
        a = stiff_box("a", (0.06, 0.06, 0.06), (-0.08, 0.0, 0.3), velocity=(2.0, 0.0, 0.0), div=div)
        b = stiff_box("b", (0.06, 0.06, 0.06), (0.08, 0.0, 0.3), velocity=(-2.0, 0.0, 0.0), div=div)
        body_step.STATS["tries"] = 0
        r = Run(scene(a, b, ground(), frame_start=1, frame_end=4))
        if div == 10:
            assert r.b.system.dof_map.slaved.size > 2 * BODY_STEP_MAX_VERTICES
        r.advance(3)
        tries.append(body_step.STATS["tries"])
    assert tries[0] > 0 and tries[1] == 0, tries


def test_apart_bodies_skip_only_far_pairs():
    """The body-sphere shortcut of the per-island search's pair passes (body_step._apart): on a pile of props moved
    by random rigid motions (some far apart, some touching, some thrown through others), every pair it does not
    skip gets the full computation's results; every skipped pair is one the full computation also finds neither
    touching at the start nor near at the end, with its true contact distance above dhat all along the move (the
    exact distance sampled at 41 points), and toi 1 (the full computation's ACCD may return less only by looking
    past the move's end, which these configurations do not hit). Pairs are skipped (not vacuous). The same for the
    CCD rounds' pass."""
    from benchmarks.rigid_scenes import make
    from solver_server.backends.mesh_backend import MeshBackend
    from solver_server.contact.ccd import gather_motion, pair_of, stencil_dist2
    sc, _ = make("bin", 4, 1, 60)
    b = MeshBackend(sc)
    b.advance()
    b.advance()
    st = b.stepper
    ct = st.contact
    m = ct.mesh
    xs = np.ascontiguousarray(st.D.to_x(st.x), np.float64)
    vb = np.ascontiguousarray(m.vertex_body, np.int64)
    nb = int(m.body_static.shape[0])
    rng = np.random.default_rng(5)
    dx = np.zeros_like(xs)
    for body in range(nb):
        if m.body_static[body]:
            continue
        sel = vb == body
        c = xs[sel].mean(0)
        R = _rot(rng) if rng.random() < 0.5 else np.eye(3)
        w = 0.05 * (R - np.eye(3))   # a small turn about the centre
        dx[sel] = rng.normal(0.0, 0.03, 3) + (xs[sel] - c) @ w.T
    dhat = float(ct.dhat)
    cands = ct.candidates_swept(xs, xs + dx, dhat=3.0 * dhat)
    spheres = body_step._body_spheres(xs, dx, vb, nb)
    skipped, collide = 0, 0
    X0, P, ids = np.empty(12), np.empty(12), np.empty(4, np.int64)
    for mode, pairs in ((0, cands.pt), (1, cands.ee)):
        pairs = np.ascontiguousarray(np.asarray(pairs).reshape(-1, 2), np.int64)
        args = (xs, dx, pairs, mode, m.faces, m.edges, m.vertex_offset, m.face_offset, m.edge_offset, vb, dhat,
                body_step.ETA, spheres)
        fast = body_step._pair_tois(*args, True)
        full = body_step._pair_tois(*args, False)
        skip = np.isinf(fast[4])
        skipped += int(skip.sum())
        collide += int((full[0] < 1.0).sum())
        for name, a, f in zip(("toi", "touch", "ga", "gb", "dist", "near1"), fast, full):
            np.testing.assert_array_equal(a[~skip], f[~skip], err_msg=name)
        np.testing.assert_array_equal(full[2], fast[2])
        assert (fast[0][skip] == 1.0).all() and not fast[1][skip].any() and not fast[5][skip].any()
        assert not full[1][skip].any() and not full[5][skip].any() and (full[4][skip] > dhat).all()
        assert (full[0][skip] == 1.0).all()
        for k in np.flatnonzero(skip)[::7]:
            off = pair_of(mode, pairs[k, 0], pairs[k, 1], m.faces, m.edges, m.vertex_offset, m.face_offset,
                          m.edge_offset, ids)
            gather_motion(xs, dx, ids, X0, P)
            for t in np.linspace(0.0, 1.0, 41):
                assert np.sqrt(stencil_dist2(X0 + t * P, mode == 1)) - off > dhat
        half = 0.5 * dx
        sp_half = body_step._body_spheres(xs, half, vb, nb)
        margs = (xs, half, pairs, mode, m.faces, m.edges, m.vertex_offset, m.face_offset, m.edge_offset,
                 body_step.ETA, vb, dhat)
        t1, g1, m1 = body_step._pair_tois_moved(*margs, sp_half, True)
        t0, g0, m0 = body_step._pair_tois_moved(*margs, sp_half, False)
        np.testing.assert_array_equal(t1, t0)
        np.testing.assert_array_equal(np.where(m1, g1 < dhat, False), np.where(m0, g0 < dhat, False))
    assert skipped > 100 and collide > 100
