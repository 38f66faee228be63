"""Solver backends: ``none`` (returns the input motion), ``ipc`` (penetration-free FEM/cloth/rods),
``mpm`` (sand, snow, water, jelly, mud). :func:`create` picks one by name."""
from __future__ import annotations

from typing import Optional

from protocol.scene import Scene
from .base import Backend, FrameResult, ProgressFn

__all__ = ["Backend", "FrameResult", "create", "available"]


def available() -> list:
    """Names of the backends this server can run."""
    return ["none", "ipc", "mpm"]


def create(scene: Scene, progress: Optional[ProgressFn] = None) -> Backend:
    """Build the backend named by ``scene.settings.backend``."""
    name = scene.settings.backend
    if name == "none":
        from .none_backend import NoneBackend
        return NoneBackend(scene, progress)
    if name == "ipc":
        from .mesh_backend import MeshBackend
        return MeshBackend(scene, progress)
    if name == "mpm":
        from .mpm_backend import MPMBackend
        return MPMBackend(scene, progress)
    raise ValueError(f"unknown backend {name!r}; available: {available()}")
