"""Errors a user can act on: each is a SceneError naming the object and the field to change."""
import numpy as np
import pytest

from protocol.scene import Body, SceneError
from solver_server.backends import create
from solver_server.backends.mpm_backend import MPMBackend
from solver_server.solvers.mpm.materials import preset
from .meshes import box, open_box
from .scenes import collider_box, granular, scene


def test_open_granular_mesh():
    v, t = open_box((0.2, 0.2, 0.2), (0.4, 0.4, 0.4))
    b = Body(name="Bucket", role="granular", vertices=v, triangles=t, material=preset("sand"))
    with pytest.raises(SceneError) as e:
        MPMBackend(scene([b]))
    assert e.value.obj == "Bucket" and e.value.field == "triangles"


def test_too_many_particles_for_the_memory_limit(monkeypatch):
    monkeypatch.setenv("CLEARANCE_MPM_MEMORY_LIMIT", str(50e6))
    b = granular("Dune", (0.0, 0.0, 0.0), (1.0, 1.0, 0.5), preset("sand", particle_spacing=0.005))
    with pytest.raises(SceneError) as e:
        MPMBackend(scene([b]))
    msg = str(e.value)
    assert e.value.obj == "Dune" and e.value.field == "particle_spacing"
    assert "4,000,000" in msg and "limit" in msg  # the particle count and the limit are named


def test_granular_body_outside_domain():
    b = granular("Pile", (0.8, 0.2, 0.2), (1.2, 0.4, 0.4), preset("sand"))
    with pytest.raises(SceneError) as e:
        MPMBackend(scene([b]))
    assert e.value.obj == "Pile" and "domain" in str(e.value)


def test_collider_outside_domain():
    b = granular("Pile", (0.2, 0.2, 0.2), (0.4, 0.4, 0.4), preset("sand"))
    c = collider_box("FarRock", (3, 3, 3), (4, 4, 4))
    with pytest.raises(SceneError) as e:
        MPMBackend(scene([b, c]))
    assert e.value.obj == "FarRock"


def test_ipc_roles_are_refused_by_the_mpm_backend():
    v, t = box((0.2, 0.2, 0.6), (0.3, 0.3, 0.7))
    jelly = Body(name="Cube", role="solid", vertices=v, triangles=t)
    b = granular("Pile", (0.2, 0.2, 0.2), (0.4, 0.4, 0.4), preset("sand"))
    with pytest.raises(SceneError) as e:
        create(scene([b, jelly]))
    assert e.value.obj == "Cube" and e.value.field == "role"
