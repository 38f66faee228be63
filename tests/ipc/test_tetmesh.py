"""Tetrahedralisation and the solid-mesh checks."""
import numpy as np
import pytest

from protocol.scene import SceneError
from solver_server.model.checks import check_solid, enclosed_volume
from solver_server.model.primitives import box, icosphere
from solver_server.model.tetmesh import tetrahedralize
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


def test_nonconvex_L_shape_volume():
    a, ta = box((0.4, 0.2, 0.2), center=(0.0, 0.0, 0.0), divisions=4)
    # an L: remove nothing, just check a concave union via two boxes sharing no vertices is rejected
    V = np.concatenate([a, a + [0.0, 0.0, 0.5]])
    T = np.concatenate([ta, ta + len(a)]).astype(np.int32)
    m = tetrahedralize("two", V, T)
    vols = tet_volumes(m.nodes, m.tets)
    assert (vols > 0).all()
    # the gap between the two boxes is outside: no tet centroid there
    c = m.nodes[m.tets].mean(1)
    assert not ((c[:, 2] > 0.1 + 1e-9) & (c[:, 2] < 0.4 - 1e-9)).any()
    assert abs(vols.sum() - enclosed_volume(V, T)) < 0.02 * enclosed_volume(V, T)


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
