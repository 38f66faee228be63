"""Broad phase: the spatial hash finds exactly the pairs an O(n^2) box search finds."""
import numpy as np
import pytest

from solver_server.contact import (CollisionMesh, find_candidates, find_candidates_ccd,
                                       contact_distance_array, point_triangle_dist2_batch)


def _random_scene(seed, n=120, nf=90):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, (n, 3))
    x[-3:] = [[-5, -5, 0.5], [5, -5, 0.5], [0, 5, 0.5]]          # one huge (collider) triangle
    faces = np.array([np.sort(rng.choice(n - 3, 3, replace=False)) for _ in range(nf)] + [[n - 3, n - 2, n - 1]],
                     np.int32)
    # small triangles: pull the 2nd/3rd vertices towards the first
    for f in faces[:-1]:
        x[f[1]] = x[f[0]] + 0.1 * (x[f[1]] - x[f[0]])
        x[f[2]] = x[f[0]] + 0.1 * (x[f[2]] - x[f[0]])
    body = rng.integers(0, 3, n).astype(np.int32)
    for f in faces:
        body[f] = body[f[0]]
    body[-3:] = 3
    off = np.where(body == 1, 0.004, 0.0)
    mesh = CollisionMesh.build(n, faces, vertex_body=body, vertex_offset=off,
                               body_friction=np.zeros(4), self_contact=np.array([1, 0, 1, 0]),
                               body_static=np.array([0, 0, 1, 1]))
    return x, mesh


def _brute(x0, x1, mesh, dhat):
    r = 0.5 * dhat
    lo = np.minimum(x0, x1) - (mesh.vertex_offset + r)[:, None]
    hi = np.maximum(x0, x1) + (mesh.vertex_offset + r)[:, None]

    def box(el, pad):
        return np.minimum(x0[el], x1[el]).min(axis=1) - (pad + r)[:, None], \
            np.maximum(x0[el], x1[el]).max(axis=1) + (pad + r)[:, None]
    flo, fhi = box(mesh.faces, mesh.face_offset)
    elo, ehi = box(mesh.edges, mesh.edge_offset)
    vb = mesh.vertex_body

    def ok(ba, bb):
        return not ((ba == bb and not mesh.self_contact[ba]) or (mesh.body_static[ba] and mesh.body_static[bb]))
    pt = set()
    ov = np.all((lo[:, None, :] <= fhi[None]) & (flo[None] <= hi[:, None, :]), axis=2)
    for v, f in zip(*np.nonzero(ov)):
        if v not in mesh.faces[f] and ok(vb[v], vb[mesh.faces[f, 0]]):
            pt.add((v, f))
    ee = set()
    ov = np.all((elo[:, None, :] <= ehi[None]) & (elo[None] <= ehi[:, None, :]), axis=2)
    for a, b in zip(*np.nonzero(ov)):
        if a < b and not set(mesh.edges[a]) & set(mesh.edges[b]) and ok(vb[mesh.edges[a, 0]], vb[mesh.edges[b, 0]]):
            ee.add((a, b))
    return pt, ee


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hash_matches_brute_force(seed):
    x, mesh = _random_scene(seed)
    dhat = 0.02
    c = find_candidates(x, mesh, dhat)
    pt, ee = _brute(x, x, mesh, dhat)
    got_pt = set(map(tuple, c.pt.tolist()))
    got_ee = set(map(tuple, c.ee.tolist()))
    assert len(got_pt) == c.pt.shape[0] and len(got_ee) == c.ee.shape[0]      # no duplicates
    assert got_pt == pt and got_ee == ee
    assert len(pt) > 20 and len(ee) > 20
    # swept boxes
    rng = np.random.default_rng(seed + 10)
    x1 = x + 0.05 * rng.normal(size=x.shape)
    c = find_candidates_ccd(x, x1, mesh, dhat)
    pt, ee = _brute(x, x1, mesh, dhat)
    assert set(map(tuple, c.pt.tolist())) == pt and set(map(tuple, c.ee.tolist())) == ee


def test_every_close_pair_is_a_candidate():
    x, mesh = _random_scene(4)
    dhat = 0.03
    c = find_candidates(x, mesh, dhat)
    f = mesh.faces
    V = np.array([(v, t) for v in range(mesh.n_verts) for t in range(f.shape[0]) if v not in f[t]])
    d = np.sqrt(point_triangle_dist2_batch(x[V[:, 0]], x[f[V[:, 1], 0]], x[f[V[:, 1], 1]], x[f[V[:, 1], 2]]))
    d -= mesh.vertex_offset[V[:, 0]] + mesh.face_offset[V[:, 1]]
    vb = mesh.vertex_body
    close = {(v, t) for (v, t), s in zip(V.tolist(), d) if s < dhat
             and not ((vb[v] == vb[f[t, 0]] and not mesh.self_contact[vb[v]])
                      or (mesh.body_static[vb[v]] and mesh.body_static[vb[f[t, 0]]]))}
    assert len(close) > 5
    assert close <= set(map(tuple, c.pt.tolist()))
    # contact distances reported for candidates agree with the direct computation
    s = contact_distance_array(x, c, mesh)[: c.pt.shape[0]]
    lookup = {(v, t): s_ for (v, t), s_ in zip(V.tolist(), d)}
    for (v, t), s_ in zip(c.pt.tolist(), s):
        assert s_ == pytest.approx(lookup[(v, t)], rel=1e-12, abs=1e-15)
