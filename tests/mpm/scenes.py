"""Scene builders shared by the MPM tests (protocol.scene objects, SI units)."""
from __future__ import annotations

import dataclasses

import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.solvers.mpm.materials import preset
from .meshes import box


def granular(name, lo, hi, material, velocity=(0.0, 0.0, 0.0)):
    v, t = box(lo, hi)
    return Body(name=name, role="granular", vertices=v, triangles=t, material=material,
                initial_velocity=tuple(velocity))


def collider_box(name, lo, hi, friction=0.5, animation=None):
    v, t = box(lo, hi)
    return Body(name=name, role="collider", vertices=v, triangles=t, material=Material(friction=friction),
                animation=animation)


def scene(bodies, frames=4, fps=24.0, domain=((0, 0, 0), (1, 1, 1)), gravity=(0, 0, -9.81), friction=0.3):
    """An MPM scene; ``domain`` is a walled box (mpm_domain "box"), or None for the automatic open
    domain (the bodies' and colliders' bounds plus a margin)."""
    box_kw = dict(mpm_domain="auto") if domain is None else dict(
        mpm_domain="box", domain_min=tuple(domain[0]), domain_max=tuple(domain[1]))
    st = Settings(frame_start=1, frame_end=1 + frames, fps=fps, backend="mpm", gravity=gravity,
                  friction=friction, **box_kw)
    sc = Scene(settings=st, bodies=tuple(bodies))
    sc.validate()
    return sc
