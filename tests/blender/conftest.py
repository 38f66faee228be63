"""Fixtures for the add-on tests in real Blender (the bpy 5.0.1 module).

bpy can be imported once per process, so every test shares it: ``blender`` resets to factory
settings with an empty scene and enables the add-on again before each test. ``server`` is a
real solver server subprocess (started once per session through the add-on's own
server_process module, on a free loopback port).
"""
from __future__ import annotations

import importlib
import os
import sys

import pytest

bpy = pytest.importorskip("bpy")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import addon_env  # noqa: E402


def addon(submodule: str):
    """A module of the enabled add-on, e.g. addon("export")."""
    return importlib.import_module(f"{addon_env.MODULE}.{submodule}")


@pytest.fixture
def blender():
    addon_env.reset()
    yield bpy
    if addon_env.is_enabled():
        addon_env.disable()


@pytest.fixture(scope="session")
def server():
    addon_env.reset()
    sp = addon("server_process")
    srv = sp.start(sys.executable, timeout=120.0)
    yield srv
    srv.stop()
