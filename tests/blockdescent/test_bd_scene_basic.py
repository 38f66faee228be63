"""Fast solver (block descent) through MeshBackend, no contact: free fall against the discrete
implicit-Euler integrator (FAST_SUBSTEPS steps of dt / FAST_SUBSTEPS per solver step), pins held at
their (moving) targets."""
import numpy as np
import pytest

from protocol.scene import Body, Material
from solver_server.solvers.block_descent.stepper import STEPS_PER_SUBSTEP as FAST_SUBSTEPS
from solver_server.model.primitives import grid_sheet
from tests.ipc.test_scene_helpers import cube

from .bd_scenes import fast_backend, fast_scene


def _free_fall_scene():
    c = cube(center=(0, 0, 1.0))
    c = Body(**{**c.__dict__, "initial_velocity": (0.5, 0.0, 1.0)})
    return fast_scene(c, frame_end=6, substeps=2)


def test_free_fall_matches_discrete_implicit_euler():
    sc = _free_fall_scene()
    b = fast_backend(sc, contact=False)
    # the fast solver takes FAST_SUBSTEPS implicit-Euler steps of dt / FAST_SUBSTEPS per solver step
    steps = sc.settings.substeps * FAST_SUBSTEPS
    h = sc.settings.dt / FAST_SUBSTEPS
    assert b.stepper.h == pytest.approx(h, rel=1e-15)
    g = np.array(sc.settings.gravity)
    x = b.system.x0.copy()
    v = np.array([0.5, 0.0, 1.0])
    errs = []
    sweeps = []
    x0 = b.system.x0
    for f in range(5):
        r = b.advance()
        sweeps.append(r.stats["newton_iterations"])
        assert r.stats["preview"] and r.stats["converged"] is False   # a budget-limited step never claims convergence
        assert r.stats["lagged_steps"] == 0
        for _ in range(steps):
            v = v + h * g            # v^{n+1} = v^n + h g
            x = x + h * v            # x^{n+1} = x^n + h v^{n+1}
        xs = b.stepper.x
        shape = np.abs((xs - xs.mean(0)) - (x0 - x0.mean(0))).max()     # 0 for a rigid translation
        errs.append((np.abs(xs - x).max(), np.abs(b.stepper.v - v).max(), shape))
        assert r.frame == sc.settings.frame_start + f + 1
        assert r.positions["cube"].shape == (len(sc.bodies[0].vertices), 3)
    ex, ev, es = np.max(errs, axis=0)
    assert ex < 1e-9, f"position error {ex:.3g} m (per frame {[f'{e[0]:.2g}' for e in errs]})"
    # the step starts at the inertia target y, exact for a rigid translation: one sweep per step
    assert sweeps == [steps] * 5, f"sweeps per frame {sweeps}"
    assert ev < 1e-7, f"velocity error {ev:.3g} m/s"
    assert es < 1e-9, f"the falling cube deformed by {es:.3g} m"


def test_pinned_vertices_follow_targets():
    V, T, E = grid_sheet((0.4, 0.4), (4, 4), center=(0, 0, 1.0))
    pins = np.array([0, 4], np.int32)   # two corners of one side
    F = 7
    targets = np.repeat(V[pins][None], F, 0).astype(np.float32)
    targets[:, :, 0] += np.linspace(0, 0.05, F)[:, None].astype(np.float32)   # slide along x
    cl = Body("sheet", "cloth", V, T, E, material=Material(density=200.0, thickness=0.002, youngs_modulus=1e6),
              pin_indices=pins, pin_targets=targets)
    sc = fast_scene(cl, frame_end=F, substeps=2)
    b = fast_backend(sc, contact=False)
    for f in range(F - 1):
        r = b.advance()
        want = targets[f + 1].astype(np.float64)
        assert np.abs(b.stepper.x[pins] - want).max() < 1e-6
        assert np.abs(r.positions["sheet"][pins] - want).max() < 1e-6
    # the free part hangs below the pins (gravity acted) and the pinned side did not stretch
    assert b.stepper.x[:, 2].min() < 1.0 - 0.1
    assert np.linalg.norm(b.stepper.x[pins[0]] - b.stepper.x[pins[1]]) == pytest.approx(0.4, abs=1e-6)
