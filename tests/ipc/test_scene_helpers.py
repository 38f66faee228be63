"""Shared builders for the IPC scene tests (small meshes so the default suite stays fast)."""
import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.model.primitives import box, grid_sheet


def cube(name="cube", size=0.2, center=(0.0, 0.0, 0.15), div=2, **mat):
    V, T = box((size, size, size), center=center, divisions=div)
    return Body(name, "solid", V, T, material=Material(**mat))


def plane(name="ground", size=2.0, z=0.0, friction=0.0, tilt_deg=0.0):
    V, T, _ = grid_sheet((size, size), (2, 2), center=(0.0, 0.0, 0.0))
    if tilt_deg:
        th = np.radians(tilt_deg)
        R = np.array([[np.cos(th), 0, -np.sin(th)], [0, 1, 0], [np.sin(th), 0, np.cos(th)]])
        V = V @ R.T
    V = V + [0.0, 0.0, z]
    return Body(name, "collider", V, T, material=Material(friction=friction))


def scene(*bodies, **settings):
    """A scene for the Newton IPC tests: solver_quality "accurate" unless the caller says otherwise."""
    settings.setdefault("solver_quality", "accurate")
    return Scene(Settings(**settings), tuple(bodies))
