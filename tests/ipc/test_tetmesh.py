"""Tetrahedralisation and the solid-mesh checks."""
import numpy as np
import pytest

from protocol.scene import SceneError
from solver_server.model.checks import check_solid, enclosed_volume
from solver_server.model.primitives import box, icosphere
from solver_server.model.tetmesh import tetrahedralize
from solver_server.model.winding import winding_numbers
from solver_server.energies.elastic_tet import tet_volumes


@pytest.mark.parametrize("mesh", [box((0.3, 0.2, 0.1), divisions=3), box(divisions=1), icosphere(0.4, subdivisions=2)],
                         ids=["box3", "box1", "sphere"])
def test_tets_positive_volume_matches_surface_and_keep_artist_vertices(mesh):
    V, T = mesh
    m = tetrahedralize("obj", V, T)
    vols = tet_volumes(m.nodes, m.tets)
    assert (vols > 0).all()
    assert abs(vols.sum() - enclosed_volume(V, T)) < 1e-9 * enclosed_volume(V, T)
    assert np.array_equal(m.nodes[:len(V)], V)            # artist vertices reproduced exactly
    assert m.n_surface == len(V)
    assert np.unique(m.tets).size == len(m.nodes)         # no unused node
    # every artist vertex carries mass: it belongs to a tet
    assert np.isin(np.arange(len(V)), m.tets).all()


def test_two_separate_boxes_mesh_apart():
    """Two boxes 0.3 m apart in one mesh (two closed shells): the gap between them is outside, so no tet
    may span it, and the volume is the two boxes'."""
    a, ta = box((0.4, 0.2, 0.2), center=(0.0, 0.0, 0.0), divisions=4)
    V = np.concatenate([a, a + [0.0, 0.0, 0.5]])
    T = np.concatenate([ta, ta + len(a)]).astype(np.int32)
    m = tetrahedralize("two", V, T)
    vols = tet_volumes(m.nodes, m.tets)
    assert (vols > 0).all()
    c = m.nodes[m.tets].mean(1)
    assert not ((c[:, 2] > 0.1 + 1e-9) & (c[:, 2] < 0.4 - 1e-9)).any()   # no tet centroid in the gap
    assert abs(vols.sum() - enclosed_volume(V, T)) < 0.01 * enclosed_volume(V, T)


# -- non-convex solids: a tet that bridged a notch or a hole would add volume outside the surface ---------

def voxel_surface(cells, h):
    """The closed, outward triangle surface of a union of cubes of edge ``h`` at integer ``cells``
    (faces between two occupied cells left out; vertices shared on the lattice)."""
    occ = set(map(tuple, cells))
    index, verts, tris = {}, [], []

    def vid(p):
        if p not in index:
            index[p] = len(verts)
            verts.append(p)
        return index[p]

    for cell in occ:
        for ax in range(3):
            for sgn in (-1, 1):
                nb = list(cell)
                nb[ax] += sgn
                if tuple(nb) in occ:
                    continue
                base = list(cell)
                base[ax] += sgn > 0
                u, w = (ax + 1) % 3, (ax + 2) % 3      # e_u x e_w = e_ax
                q = []
                for du, dw in ((0, 0), (1, 0), (1, 1), (0, 1)):
                    p = list(base)
                    p[u] += du
                    p[w] += dw
                    q.append(vid(tuple(p)))
                a, b, c, d = q
                tris += [(a, b, c), (a, c, d)] if sgn > 0 else [(a, c, b), (a, d, c)]
    return np.array(verts, np.float64) * h, np.array(tris, np.int32)


def l_shape(k: int = 2, h: float = 0.1):
    """An L of three h-cubes (two along x, one on top of the first), each cut into k^3 cells."""
    cells = [(i, j, z) for i in range(2 * k) for j in range(k) for z in range(k)]
    cells += [(i, j, z) for i in range(k) for j in range(k) for z in range(k, 2 * k)]
    return voxel_surface(cells, h / k)


def torus(R: float, r: float, nu: int, nv: int):
    """A closed torus around the z axis (tube radius r at distance R), nu x nv quads split in two."""
    u = 2 * np.pi * np.arange(nu) / nu
    v = 2 * np.pi * np.arange(nv) / nv
    U, W = np.meshgrid(u, v, indexing="ij")
    V = np.stack([(R + r * np.cos(W)) * np.cos(U), (R + r * np.cos(W)) * np.sin(U), r * np.sin(W)], -1)
    i = np.arange(nu * nv).reshape(nu, nv)
    a, b, d = i, np.roll(i, -1, 0), np.roll(i, -1, 1)
    c = np.roll(b, -1, 1)
    T = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return V.reshape(-1, 3), T.astype(np.int32)


def _inside_samples(nodes, tets):
    """Per tet, 11 points strictly inside it: the centroid, one near each vertex, one near each edge's
    midpoint (a tet that crosses the surface has some of them outside)."""
    P = nodes[tets]
    c = P.mean(1, keepdims=True)
    mids = (P[:, [0, 0, 0, 1, 1, 2]] + P[:, [1, 2, 3, 2, 3, 3]]) / 2
    return np.concatenate([c, 0.7 * P + 0.3 * c, 0.8 * mids + 0.2 * c], 1)


def _check_nonconvex(V, T, name):
    m = tetrahedralize(name, V, T)
    vols = tet_volumes(m.nodes, m.tets)
    assert (vols > 0).all()
    enclosed = enclosed_volume(V, T)                  # divergence theorem on the surface
    assert abs(vols.sum() - enclosed) < 0.01 * enclosed, (vols.sum(), enclosed)
    S = _inside_samples(m.nodes, m.tets)
    w = winding_numbers(S.reshape(-1, 3), V, T.astype(np.int64)).reshape(S.shape[:2])
    assert (w > 0.5).all(), f"{int((w <= 0.5).any(1).sum())} of {len(m.tets)} tets reach outside the surface"
    return m


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("rotated", [False, True], ids=["axis", "rotated"])
def test_l_shape_volume_and_no_tet_across_the_notch(k, rotated):
    V, T = l_shape(k)
    rot = np.linalg.qr(np.random.default_rng(1).normal(size=(3, 3)))[0] if rotated else np.eye(3)
    V = V @ rot.T
    assert abs(enclosed_volume(V, T) - 3e-3) < 1e-12    # three 0.1 m cubes: the surface is right
    m = _check_nonconvex(V, T, "L")
    c = m.nodes[m.tets].mean(1) @ rot                  # back in the L's frame
    notch = (c[:, 0] > 0.1 + 1e-9) & (c[:, 2] > 0.1 + 1e-9)
    assert not notch.any()


def test_torus_volume_and_no_tet_in_the_hole():
    R, r, nu = 0.3, 0.1, 24
    V, T = torus(R, r, nu, 8)
    m = _check_nonconvex(V, T, "torus")
    c = m.nodes[m.tets].mean(1)
    rho = np.hypot(c[:, 0], c[:, 1])
    # the inner equator's chords come closest to the axis, at (R - r) cos(pi / nu)
    assert rho.min() >= (R - r) * np.cos(np.pi / nu) - 1e-9, rho.min()
    assert (np.hypot(rho - R, c[:, 2]) <= r).all()     # every centroid in the tube


def test_open_mesh_rejected_with_name():
    V, T = box(divisions=2)
    with pytest.raises(SceneError) as e:
        check_solid("Jelly", V, T[:-1])
    assert e.value.obj == "Jelly" and "open" in str(e.value)


def test_non_manifold_rejected():
    V, T = box(divisions=1)
    T2 = np.concatenate([T, T[:1]]).astype(np.int32)  # a face used twice: its edges have 3+ faces
    with pytest.raises(SceneError) as e:
        check_solid("Blob", V, T2)
    assert e.value.obj == "Blob" and "non-manifold" in str(e.value)


def test_degenerate_rejected():
    V, T = box(divisions=1)
    V2 = V.copy()
    V2[T[0, 1]] = V2[T[0, 0]]  # collapse an edge: zero-area triangles
    with pytest.raises(SceneError) as e:
        check_solid("Flat", V2, T)
    assert e.value.obj == "Flat" and "zero area" in str(e.value)
    Vf = V.copy()
    Vf[:, 2] = 0.0  # flattened box: closed but no volume
    with pytest.raises(SceneError):
        check_solid("Flat", Vf, T)
