"""Body-level culling of the broad phase and CCD (issue 19): leaving out every element whose box meets no
box of a body it may pair with changes nothing. On random piles of small closed bodies over a static
ground (with a self-contacting body and a second static body among them), the culled candidate sets equal
the unculled ones pair for pair, every pair within dhat is among them, CCD returns the same step bound,
and the culling does remove elements (so the comparison is not between two identical code paths)."""
import numpy as np
import pytest

from solver_server.contact import CollisionMesh, find_candidates, find_candidates_ccd
from solver_server.contact import broad_phase
from solver_server.contact.ccd import max_step_size
from solver_server.contact.pairs import contact_distances, pair_set


def _cube(div):
    """Closed triangulated unit cube surface [-0.5, 0.5]^3 with div x div quads a side: (V, 3), (F, 3)."""
    verts = {}
    faces = []
    pts = []

    def vid(p):
        k = tuple(np.round(p, 9))
        if k not in verts:
            verts[k] = len(pts)
            pts.append(p)
        return verts[k]
    t = np.linspace(-0.5, 0.5, div + 1)
    for axis in range(3):
        for side in (-0.5, 0.5):
            u, v = [a for a in range(3) if a != axis]
            for i in range(div):
                for j in range(div):
                    q = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = np.zeros(3)
                        p[axis] = side
                        p[u] = t[i + di]
                        p[v] = t[j + dj]
                        q.append(vid(p))
                    if (side > 0) == (axis == 1):
                        q = q[::-1]
                    faces += [[q[0], q[1], q[2]], [q[0], q[2], q[3]]]
    return np.array(pts), np.array(faces, np.int32)


def _pile(seed, nbodies=14, div=2):
    """Randomly placed and turned cubes (0.1 m edges, some crossing each other, which does not matter here) over a static ground quad and a static
    wall quad; body 1 self-contacting. Returns positions (n, 3) and the CollisionMesh."""
    rng = np.random.default_rng(seed)
    V, F = _cube(div)
    xs, fs, body = [], [], []
    n = 0
    for b in range(nbodies):
        c = np.array([rng.uniform(0, 0.45), rng.uniform(0, 0.45), 0.06 + rng.uniform(0, 0.3)])
        Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        xs.append(c + 0.1 * V @ Q.T)
        fs.append(F + n)
        body += [b] * len(V)
        n += len(V)
    ground = np.array([[-2, -2, 0.0], [2, -2, 0.0], [2, 2, 0.0], [-2, 2, 0.0]])
    wall = np.array([[0.52, -1, 0.0], [0.52, 1, 0.0], [0.52, 1, 1.0], [0.52, -1, 1.0]])
    for b, quad in ((nbodies, ground), (nbodies + 1, wall)):
        xs.append(quad)
        fs.append(np.array([[0, 1, 2], [0, 2, 3]], np.int32) + n)
        body += [b] * 4
        n += 4
    nb = nbodies + 2
    sc = np.zeros(nb, np.uint8)
    sc[1] = 1
    st = np.zeros(nb, np.uint8)
    st[-2:] = 1
    mesh = CollisionMesh.build(n, np.concatenate(fs), vertex_body=np.array(body, np.int32),
                               body_friction=np.full(nb, 0.5), self_contact=sc, body_static=st)
    return np.concatenate(xs), mesh


def _as_set(a):
    return set(map(tuple, np.asarray(a).tolist()))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_culled_candidates_equal_unculled(seed):
    x, mesh = _pile(seed)
    dhat = 0.01
    for x1 in (x, x + np.random.default_rng(seed + 10).normal(scale=0.01, size=x.shape) * (mesh.body_static[
            mesh.vertex_body] == 0)[:, None]):
        a = find_candidates_ccd(x, x1, mesh, dhat, cull=True)
        b = find_candidates_ccd(x, x1, mesh, dhat, cull=False)
        assert _as_set(a.pt) == _as_set(b.pt)
        assert _as_set(a.ee) == _as_set(b.ee)
    a = find_candidates(x, mesh, dhat, cull=True)
    b = find_candidates(x, mesh, dhat, cull=False)
    assert len(b) > 0 and _as_set(a.pt) == _as_set(b.pt) and _as_set(a.ee) == _as_set(b.ee)
    # every pair within dhat of the unculled set is found culled (the guarantee the barrier needs)
    ps = pair_set(b, mesh, x)
    s = contact_distances(x, ps.ids, ps.is_ee, ps.off)
    near = ps.ids[s < dhat]
    psa = pair_set(a, mesh, x)
    assert _as_set(np.sort(near, axis=1)) <= _as_set(np.sort(psa.ids, axis=1))
    # the culling removes elements here (most cube faces are far from every other body's box)
    (vlo, _, vi), (flo, _, fi), (elo, _, ei) = broad_phase.culled_boxes(x, x, mesh, 0.5 * dhat, True)
    assert len(vi) < mesh.n_verts and len(fi) < len(mesh.faces) and len(ei) < len(mesh.edges)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_culled_ccd_equals_unculled(seed):
    x, mesh = _pile(seed, div=3)
    rng = np.random.default_rng(100 + seed)
    moving = (mesh.body_static[mesh.vertex_body] == 0)
    # rigid-ish random moves of each body, large enough to make some pairs collide
    p = np.zeros_like(x)
    for b in range(mesh.n_bodies):
        sel = (mesh.vertex_body == b) & moving
        p[sel] = rng.normal(scale=0.05, size=3)
    a = max_step_size(x, p, mesh, 0.0, cull=True)
    b = max_step_size(x, p, mesh, 0.0, cull=False)
    assert a == b and 0.0 < a < 1.0      # some pair would collide along the moves: CCD cuts the step


def _turn(x, mesh, rng, angle, shift):
    """x with every non-static body turned by up to ``angle`` (rad) about its centre and shifted by up to ``shift`` (m)."""
    x = x.copy()
    for b in range(mesh.n_bodies):
        sel = mesh.vertex_body == b
        if mesh.body_static[b]:
            continue
        ax = rng.normal(size=3)
        ax /= np.linalg.norm(ax)
        a = rng.uniform(-angle, angle)
        K = np.array([[0, -ax[2], ax[1]], [ax[2], 0, -ax[0]], [-ax[1], ax[0], 0]])
        R = np.eye(3) + np.sin(a) * K + (1 - np.cos(a)) * K @ K
        c = x[sel].mean(0)
        x[sel] = (x[sel] - c) @ R.T + c + rng.uniform(-shift, shift, 3)
    return x


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_region_cut_finds_the_same_pairs_in_the_same_order(seed, monkeypatch):
    """find_candidates_padded with the partner-region cut (broad_phase.region_culled_boxes) returns the arrays of
    the body-box cut alone, pair for pair and in the same order, on swept boxes of turned and shifted bodies (and of
    bodies deformed vertex by vertex, where the directions are no longer the faces' normals), with per-body pads; the
    pairs are those of the unculled brute-force reference; and the cut does leave out elements the body-box cut keeps."""
    x, mesh = _pile(seed, div=3)
    rng = np.random.default_rng(200 + seed)
    vpad = rng.uniform(0.002, 0.01, mesh.n_bodies)[mesh.vertex_body]
    moving = (mesh.body_static[mesh.vertex_body] == 0)[:, None]
    cases = [(x, None), (x, _turn(x, mesh, rng, 0.3, 0.02)),
             (_turn(x, mesh, rng, 0.5, 0.0), None),
             (x + moving * rng.normal(scale=0.004, size=x.shape), x + moving * rng.normal(scale=0.004, size=x.shape))]
    cut = 0
    for x0, x1 in cases:
        monkeypatch.setattr(broad_phase, "REGION_CULL", False)
        a = broad_phase.find_candidates_padded(x0, mesh, vpad, x1)
        monkeypatch.setattr(broad_phase, "REGION_CULL", True)
        b = broad_phase.find_candidates_padded(x0, mesh, vpad, x1)
        assert len(a) > 0
        assert np.array_equal(a.pt, b.pt) and np.array_equal(a.ee, b.ee)
        monkeypatch.setattr(broad_phase, "CULL", False)
        c = broad_phase.find_candidates_padded(x0, mesh, vpad, x1)
        monkeypatch.setattr(broad_phase, "CULL", True)
        assert _as_set(c.pt) == _as_set(b.pt) and _as_set(c.ee) == _as_set(b.ee)
        pads = (vpad, vpad[mesh.faces[:, 0]], vpad[mesh.edges[:, 0]])
        xe = x0 if x1 is None else x1
        body = broad_phase.culled_boxes(x0, xe, mesh, pads, True)
        region = broad_phase.region_culled_boxes(x0, xe, mesh, pads)[0]
        for (_, _, i), (_, _, j) in zip(body, region):
            assert np.all(np.isin(j, i))
            cut += len(i) - len(j)
    assert cut > 0


def test_a_target_whose_cells_share_a_bucket_is_reported_once():
    """Cells (11, 38, 0) and (12, 39, 0) hash to the same bucket of a 1,024-bucket table, so a target box covering both
    is hashed into that bucket twice; a query whose overlap with it starts in (12, 39, 0) finds the pair once (it
    was reported twice, and its barrier counted twice, before the scan skipped the repeated entry)."""
    assert broad_phase._hash(11, 38, 0, 1024) == broad_phase._hash(12, 39, 0, 1024)
    tlo, thi = np.array([[11.5, 38.5, 0.5]]), np.array([[12.5, 39.5, 1.5]])
    qlo, qhi = np.array([[12.2, 39.2, 0.6]]), np.array([[12.4, 39.4, 0.8]])
    faces = np.array([[1, 2, 3]], np.int32)
    edges = np.zeros((0, 2), np.int32)
    vbody = np.array([0, 1, 1, 1], np.int32)
    flags = (np.zeros(2, np.uint8), np.zeros(2, np.uint8))
    pairs = broad_phase.overlapping_box_pairs(qlo, qhi, tlo, thi, 0, faces, edges, vbody, *flags,
                                              grid=(np.zeros(3), 1.0, 1024))
    assert pairs.tolist() == [[0, 0]]


def _culled_pile_boxes(seed):
    """The region cut's culled boxes (vertices, faces, edges, and the two grids) of a pile of subdivided cubes
    moved by ~5 mm, and the pair filter's mesh arrays."""
    x, mesh = _pile(seed, div=3)
    x1 = x + np.random.default_rng(seed).normal(scale=0.005, size=x.shape) * (mesh.body_static[
        mesh.vertex_body] == 0)[:, None]
    vpad = np.full(mesh.n_verts, 0.005)
    ff, ef = mesh.faces[:, 0], mesh.edges[:, 0]
    ((vlo, vhi, vi), (flo, fhi, fi), (elo, ehi, ei)), gpt, gee = broad_phase.region_culled_boxes(
        x, x1, mesh, (vpad, vpad[ff], vpad[ef]))
    filt = (mesh.faces, mesh.edges, mesh.vertex_body, mesh.self_contact, mesh.body_static)
    return (vlo, vhi, vi, flo, fhi, fi, elo, ehi, ei, gpt, gee), filt


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairs_and_their_order_do_not_depend_on_the_hash_table(seed):
    """The bucket a cell hashes to never changes the pairs nor their order (broad_phase._hash): the same arrays from
    hash tables of 1,024 buckets (many cells share one) up to 2^20, on the culled boxes of the region cut and on
    every element, point-triangle and edge-edge."""
    (vlo, vhi, vi, flo, fhi, fi, elo, ehi, ei, gpt, gee), filt = _culled_pile_boxes(seed)
    for qlo, qhi, tlo, thi, mode, qi, ti, grid in ((vlo, vhi, flo, fhi, 0, vi, fi, gpt),
                                                    (elo, ehi, elo, ehi, 1, ei, ei, gee)):
        ref = broad_phase.overlapping_box_pairs(qlo, qhi, tlo, thi, mode, *filt, qi, ti, grid=grid)
        assert len(ref) > 20
        for size in (1024, 4096, 1 << 20):
            got = broad_phase.overlapping_box_pairs(qlo, qhi, tlo, thi, mode, *filt, qi, ti,
                                                    grid=(grid[0], grid[1], size))
            assert got.tobytes() == ref.tobytes()


@pytest.mark.parametrize("seed", [0, 1])
def test_threaded_box_pairs_equal_the_one_thread_pass(seed):
    """The threaded pass (each chunk of queries into its own slab, copied out in query order) gives the one-thread
    pass's pairs in the same order: with room for every chunk, and with no room (every chunk rescans into place)."""
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    (vlo, vhi, vi, flo, fhi, fi, elo, ehi, ei, gpt, gee), filt = _culled_pile_boxes(seed)
    old = numba.get_num_threads()
    try:
        for qlo, qhi, tlo, thi, mode, qi, ti, grid in ((vlo, vhi, flo, fhi, 0, vi, fi, gpt),
                                                        (elo, ehi, elo, ehi, 1, ei, ei, gee)):
            numba.set_num_threads(1)
            ref = broad_phase.overlapping_box_pairs(qlo, qhi, tlo, thi, mode, *filt, qi, ti, grid=grid)
            assert len(ref) > 20
            numba.set_num_threads(2)
            for slab in (broad_phase.CHUNK_SLAB, 0):
                got = broad_phase.overlapping_box_pairs(qlo, qhi, tlo, thi, mode, *filt, qi, ti, grid=grid,
                                                        slab_per_query=slab)
                assert got.tobytes() == ref.tobytes()
    finally:
        numba.set_num_threads(old)
