"""Contact scenes: cloth on a sphere, momentum in a two-body collision, a cube squashed by a moving
collider, a fast sphere against a cloth sheet. Every frame: zero intersections, no inverted tet."""
import numpy as np
import pytest

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import box, grid_sheet, icosphere


def _check(b):
    x = b.stepper.x
    assert b.contact.count_intersections(x) == 0
    assert b.system.elastic.min_tet_volume_ratio(x) > 0.0


def _cloth(n, z, size=1.0, name="cloth"):
    V, T, E = grid_sheet((size, size), (n, n), center=(0, 0, z))
    return Body(name, "cloth", V, T, E, material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5,
                                                          bending_stiffness=1e-6, friction=0.3))


def _run_cloth_on_sphere(n, frames):
    S, ST = icosphere(0.25, subdivisions=2)
    sc = Scene(Settings(frame_end=frames + 1, solver_quality="accurate"), (_cloth(n, 0.3), Body("sphere", "collider", S, ST)))
    b = MeshBackend(sc)
    for _ in range(frames):
        r = b.advance()
        _check(b)
    return b, r


def test_cloth_drapes_on_sphere_without_intersections_small():
    b, r = _run_cloth_on_sphere(6, 10)
    assert r.stats["contacts"] > 0
    # the part of the cloth over the sphere stays above it; the rest falls past its equator
    x = b.stepper.x[:49]
    assert np.linalg.norm(x, axis=1).min() > 0.25 - 1e-9


@pytest.mark.slow
def test_cloth_drapes_on_sphere_without_intersections():
    b, r = _run_cloth_on_sphere(16, 36)
    assert b.stepper.x[:, 2].min() < -0.1


def test_two_soft_bodies_collide_and_keep_momentum():
    V1, T1 = box((0.1, 0.1, 0.1), center=(-0.08, 0, 0), divisions=1)
    V2, T2 = box((0.1, 0.1, 0.1), center=(0.08, 0.02, 0.01), divisions=1)
    m = Material(youngs_modulus=2e4, friction=0.0)
    a = Body("a", "solid", V1, T1, material=m, initial_velocity=(1.0, 0, 0))
    c = Body("b", "solid", V2, T2, material=Material(youngs_modulus=2e4, friction=0.0, density=2000.0),
             initial_velocity=(-0.5, 0, 0))
    sc = Scene(Settings(frame_end=13, gravity=(0, 0, 0), newton_tol=1e-4, solver_quality="accurate"), (a, c))
    b = MeshBackend(sc)
    M = b.system.mass[:, None]
    p0 = (M * b.stepper.v).sum(0)
    scale = np.linalg.norm(M * b.stepper.v, axis=1).sum()   # sum of |m_i v_i| (the total is ~0 here)
    touched = 0
    for _ in range(12):
        r = b.advance()
        _check(b)
        touched = max(touched, r.stats["contacts"])
        p = (M * b.stepper.v).sum(0)
        assert np.linalg.norm(p - p0) <= 1e-6 * scale
    assert touched > 0
    # they bounced: the first body no longer moves at +1 m/s
    na = b.system.blocks[0].n_nodes
    assert (M[:na] * b.stepper.v[:na]).sum(0)[0] / M[:na].sum() < 0.9


@pytest.mark.slow
def test_cube_squashed_by_moving_collider_keeps_tets_positive_and_recovers():
    V, T = box((0.2, 0.2, 0.2), center=(0, 0, 0.1005), divisions=2)
    cubeb = Body("cube", "solid", V, T, material=Material(youngs_modulus=5e4, poisson_ratio=0.3, friction=0.0))
    G, GT, _ = grid_sheet((1.0, 1.0), (2, 2))
    P, PT, _ = grid_sheet((0.6, 0.6), (2, 2), center=(0, 0, 0.21))
    F = 31
    lid = np.repeat(P[None], F, 0)
    dz = np.concatenate([np.linspace(0, -0.08, 11), np.linspace(-0.08, 0.2, 11), np.full(F - 22, 0.2)])
    lid[:, :, 2] += dz[:, None]
    sc = Scene(Settings(frame_end=F, gravity=(0, 0, 0), solver_quality="accurate"), (cubeb, Body("ground", "collider", G, GT),
                                                             Body("lid", "collider", P, PT, animation=lid.astype(np.float32))))
    b = MeshBackend(sc)
    hmin = 1.0
    for f in range(F - 1):
        b.advance()
        _check(b)
        xs = b.stepper.x[:len(V)]
        hmin = min(hmin, np.ptp(xs[:, 2]))
        assert xs[:, 2].max() < lid[f + 1, 0, 2]
    assert hmin < 0.2 * 0.7             # squashed by at least 30 %
    assert abs(np.ptp(b.stepper.x[:len(V), 2]) - 0.2) < 0.01  # recovered its height


@pytest.mark.slow
def test_fast_small_sphere_does_not_tunnel_through_cloth():
    S, ST = icosphere(0.03, center=(0, 0, 0.1), subdivisions=1)
    ball = Body("ball", "solid", S, ST, material=Material(youngs_modulus=1e6, density=1000.0),
                initial_velocity=(0, 0, -20.0))   # 0.83 m per frame: far more than the cloth's thickness
    cl = _cloth(8, 0.0, size=0.5)
    cl = Body(cl.name, cl.role, cl.vertices, cl.triangles, cl.edges, material=cl.material,
              pin_indices=np.array([0, 8, 72, 80], np.int32))
    sc = Scene(Settings(frame_end=6, gravity=(0, 0, 0), solver_quality="accurate"), (ball, cl))
    b = MeshBackend(sc)
    for _ in range(5):
        b.advance()
        _check(b)
    assert b.stepper.x[:len(S), 2].max() > b.stepper.x[b.system.blocks[1].offset:, 2].min()  # ball still above the sheet's lowest point
    assert b.stepper.x[:len(S)].mean(0)[2] > -0.5
