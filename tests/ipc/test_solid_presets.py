"""Solid presets (protocol/solid_presets.py) against linear elasticity: a column sagging under its own
weight.

A square column (0.1 m tall, 0.025 m wide, tetrahedralised) of each soft preset stands on a
frictionless floor, so its sides and its base are free to spread and the stress is uniaxial,
sigma_zz(z) = -rho g (H - z). Its height then shortens by

    delta = rho g H^2 / (2 E)

whatever the Poisson ratio (Timoshenko & Goodier, *Theory of Elasticity*, a prism under its own
weight). Gravity is scaled per preset so the largest strain rho g H / E is 1% (small-strain regime of
the neo-Hookean model; real gravity would give jelly 20% and rubber 0.07%), and one implicit step of
1 s (far longer than the column's vibration periods, milliseconds) lands on the static state. The
Accurate solver must give delta within 2% for each preset's E and density. Wood (E = 10 GPa) has no
cheap test: 1% strain in a 0.1 m column needs 2e6 m/s^2, beyond the accepted gravity; the same
column with E and g scaled together is the rubber case.
"""
import numpy as np
import pytest

from protocol.scene import Body, Material, Scene, Settings
from protocol.solid_presets import SOLID_PRESETS
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import box, grid_sheet

H, W, STRAIN = 0.1, 0.025, 0.01


@pytest.mark.parametrize("name", [n for n in SOLID_PRESETS if n != "wood"])
def test_column_sags_under_its_weight_as_linear_elasticity_says(name):
    fields = SOLID_PRESETS[name][1]
    rho, E = fields["density"], fields["youngs_modulus"]
    g = STRAIN * E / (rho * H)
    delta = rho * g * H * H / (2.0 * E)                       # = STRAIN * H / 2 = 0.5 mm
    gap = 1e-4
    V, T = box((W, W, H), center=(0.0, 0.0, H / 2 + 0.3 * gap), divisions=2)
    column = Body("column", "solid", V, T, material=Material(**{**fields, "friction": 0.0}))
    FV, FT, _ = grid_sheet((0.4, 0.4), (2, 2))
    floor = Body("floor", "collider", FV, FT, material=Material(friction=0.0))
    settings = Settings(frame_end=2, fps=1.0, gravity=(0.0, 0.0, -g), contact_gap=gap, friction=0.0,
                        newton_tol=0.05 * delta, max_newton_iterations=60, solver_quality="accurate")
    backend = MeshBackend(Scene(settings, (column, floor)), tet_spacing={"column": W / 3})
    assert len(backend.system.elastic.tets) > 50                # a real volume mesh, several layers tall
    backend.advance()
    x = backend.stepper.x[:len(V)]
    top, bottom = V[:, 2] > V[:, 2].max() - 1e-9, V[:, 2] < V[:, 2].min() + 1e-9   # end faces
    shortening = H - (x[top, 2].mean() - x[bottom, 2].mean())
    assert shortening == pytest.approx(delta, rel=0.02), (name, shortening, delta)
    assert x[:, 2].min() > 0.0
    assert np.abs(x[bottom, 2] - x[bottom, 2].mean()).max() < 0.05 * delta   # the base stays on the floor
