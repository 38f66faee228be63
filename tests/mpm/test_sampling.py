"""Particle sampling inside closed meshes: counts match volume / spacing^3, open meshes are refused."""
import numpy as np
import pytest

from protocol.scene import Body, SceneError
from solver_server.solvers.mpm.materials import preset
from solver_server.solvers.mpm.inside import inside_columns, is_closed
from solver_server.solvers.mpm.sampling import sample_body, sample_mesh
from .meshes import box, mesh_volume, open_box, uv_sphere


def test_cube_count_is_volume_over_spacing_cubed():
    v, t = box((0.1, 0.2, 0.3), (0.3, 0.4, 0.5))
    s = 0.02
    pts = sample_mesh(v, t, s, seed=1)
    expected = 0.2 ** 3 / s ** 3
    assert abs(pts.shape[0] - expected) <= 0.01 * expected
    assert np.all(pts >= v.min(0) - 0.15 * s) and np.all(pts <= v.max(0) + 0.15 * s)


@pytest.mark.parametrize("spacing", [0.02, 0.013])
def test_sphere_count_is_volume_over_spacing_cubed(spacing):
    v, t = uv_sphere((0.5, 0.5, 0.5), 0.2)
    pts = sample_mesh(v, t, spacing, seed=2)
    expected = mesh_volume(v, t) / spacing ** 3
    assert abs(pts.shape[0] - expected) <= 0.03 * expected
    r = np.linalg.norm(pts - 0.5, axis=1)
    assert r.max() < 0.2 + spacing


def test_spacing_is_even():
    v, t = uv_sphere((0, 0, 0), 0.15)
    s = 0.02
    pts = sample_mesh(v, t, s, seed=3)
    from scipy.spatial import cKDTree
    d, _ = cKDTree(pts).query(pts, k=2)
    nearest = d[:, 1]
    assert nearest.min() > 0.6 * s          # no clustering
    assert np.median(nearest) == pytest.approx(s, rel=0.2)


def test_inside_columns_agrees_with_analytic_sphere():
    v, t = uv_sphere((0, 0, 0), 1.0, 32, 64)
    rng = np.random.default_rng(4)
    cx = rng.uniform(-1.2, 1.2, 300)
    cy = rng.uniform(-1.2, 1.2, 300)
    inside = inside_columns(v, t, cx, cy, -1.2, 0.05, 49, 2.0)
    z = -1.2 + 0.05 * np.arange(49)
    r = np.sqrt(cx[:, None] ** 2 + cy[:, None] ** 2 + z[None, :] ** 2)
    clear = np.abs(r - 1.0) > 0.01  # away from the faceted surface
    assert np.array_equal(inside[clear], (r < 1.0)[clear])


def test_open_mesh_is_refused_naming_the_object():
    v, t = open_box((0, 0, 0), (0.2, 0.2, 0.2))
    assert is_closed(t) == (False, 4)
    body = Body(name="Sandbox", role="granular", vertices=v, triangles=t, material=preset("sand"))
    with pytest.raises(SceneError) as e:
        sample_body(body)
    assert e.value.obj == "Sandbox" and "closed" in str(e.value)


def test_initial_velocity_and_mass_from_body():
    from solver_server.backends.mpm_backend import MPMBackend
    from .scenes import granular, scene
    mat = preset("snow", particle_spacing=0.025)
    sc = scene([granular("Snow", (0.2, 0.2, 0.2), (0.4, 0.4, 0.4), mat, velocity=(1.0, -2.0, 0.5))], frames=1)
    be = MPMBackend(sc)
    s = be.solver
    assert np.allclose(s.v, [1.0, -2.0, 0.5])
    assert s.mass.sum() == pytest.approx(400.0 * 0.2 ** 3, rel=0.02)
    assert be.particle_radius("Snow") == pytest.approx(0.0125)
    pos = be.initial_positions()["Snow"]
    assert pos.dtype == np.float32 and pos.shape == (s.n, 3)
