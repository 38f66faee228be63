"""Scene-level physics checks of the IPC stepper: free fall, cube on a plane, pins."""
import numpy as np
import pytest

from protocol.scene import Body, Material
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import grid_sheet
from .test_scene_helpers import cube, plane, scene


def test_free_fall_matches_discrete_implicit_euler():
    sc = scene(cube(center=(0, 0, 1.0)), frame_end=6, substeps=2)
    sc = sc.__class__(sc.settings, (sc.bodies[0].__class__(**{**sc.bodies[0].__dict__, "initial_velocity": (0.5, 0, 1.0)}),))
    b = MeshBackend(sc, contact=False)
    h = sc.settings.dt
    g = np.array(sc.settings.gravity)
    x = b.system.x0.copy()
    v = np.array([0.5, 0.0, 1.0])
    for f in range(5):
        r = b.advance()
        for _ in range(sc.settings.substeps):
            v = v + h * g          # v^{n+1} = v^n + h g
            x = x + h * v          # x^{n+1} = x^n + h v^{n+1}
        assert np.abs(b.stepper.x - x).max() < 1e-10
        assert np.abs(b.stepper.v - v).max() < 1e-8
        assert r.frame == sc.settings.frame_start + f + 1
        assert set(r.positions) == {"cube"} and r.positions["cube"].shape == (len(sc.bodies[0].vertices), 3)


def _no_penetration(b, plane_z=0.0):
    x = b.stepper.x
    assert b.contact.count_intersections(x) == 0
    assert x[:, 2][b.system.dynamic].min() > plane_z          # nothing below the plane
    assert b.system.elastic.min_tet_volume_ratio(x) > 0.0      # no inverted tet


def test_soft_cube_falls_on_plane_and_rests():
    sc = scene(cube(center=(0, 0, 0.13), youngs_modulus=1e5, friction=0.0), plane(), frame_end=25)
    b = MeshBackend(sc)
    zs = []
    for f in range(24):
        r = b.advance()
        _no_penetration(b)
        assert r.stats["min_distance"] is None or r.stats["min_distance"] > 0.0
        zs.append(b.stepper.x[:len(sc.bodies[0].vertices), 2].min())
    assert zs[0] > zs[5]                       # it fell
    assert zs[-1] < sc.settings.contact_gap    # and sits within the contact gap of the plane
    v = np.abs(b.stepper.v[b.system.dynamic]).max()
    assert v < 0.05                            # comes to rest (m/s)
    assert r.stats["contacts"] > 0


def test_pinned_vertices_follow_targets():
    V, T, E = grid_sheet((0.4, 0.4), (4, 4), center=(0, 0, 1.0))
    pins = np.array([0, 4], np.int32)  # two corners of one side
    F = 7
    targets = np.repeat(V[pins][None], F, 0).astype(np.float32)
    targets[:, :, 0] += np.linspace(0, 0.05, F)[:, None].astype(np.float32)  # slide along x
    cloth = Body("sheet", "cloth", V, T, E, material=Material(density=200.0, thickness=0.002, youngs_modulus=1e6),
                 pin_indices=pins, pin_targets=targets)
    sc = scene(cloth, frame_end=F, substeps=2)
    b = MeshBackend(sc, contact=False)
    for f in range(F - 1):
        r = b.advance()
        want = targets[f + 1].astype(np.float64)
        got = b.stepper.x[pins]
        assert np.abs(got - want).max() < 1e-6
    # the free part hangs below the pins (gravity acted)
    assert b.stepper.x[:, 2].min() < 1.0 - 0.01


def test_state_roundtrip_is_deterministic():
    sc = scene(cube(center=(0, 0, 0.12)), plane(), frame_end=6)
    a = MeshBackend(sc)
    for _ in range(2):
        a.advance()
    state = a.get_state()
    r1 = a.advance()
    b = MeshBackend(sc)
    b.set_state(state, 3)
    r2 = b.advance()
    assert r2.frame == r1.frame == 4
    assert np.array_equal(r1.positions["cube"], r2.positions["cube"])


def test_scene_starting_intersected_is_reported_with_both_names():
    from protocol.scene import SceneError
    sc = scene(cube(name="Jelly", center=(0, 0, 0.05)), plane(name="Floor"), frame_end=3)
    with pytest.raises(SceneError) as e:
        MeshBackend(sc)
    assert "Jelly" in str(e.value) and "Floor" in str(e.value)
