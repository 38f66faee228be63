"""Clearance: penetration-free physics for Blender (extension id ``clearance``).

The add-on exports objects with a Clearance role to a solver server (IPC for soft solids,
cloth and rods; MPM for sand, snow and water), and writes the frames that stream back as
.pc2 point caches read by Mesh Cache modifiers (or as shape keys).

``protocol`` (the wire format) is vendored into ``vendor/`` in the packaged extension; in a
development checkout it is imported from the repository root, beside ``blender_addon/``.
"""
from __future__ import annotations

import os
import sys


def _add_protocol_path() -> None:
    """Put the folder holding ``protocol/`` on sys.path: ``vendor/`` in the zip, else the checkout."""
    here = os.path.dirname(os.path.realpath(__file__))
    for folder in (os.path.join(here, "vendor"), os.path.dirname(here)):
        if os.path.isfile(os.path.join(folder, "protocol", "scene.py")):
            if folder not in sys.path:
                sys.path.insert(0, folder)  # the add-on's own copy wins over any other install
            return


_add_protocol_path()

from . import preferences, properties, operators, ui, server_process, solver_launch, material_presets, scene_file, farm_load  # noqa: E402,E501

_modules = (preferences, properties, server_process, solver_launch, operators, scene_file, farm_load, ui,
            material_presets)


def register() -> None:
    for m in _modules:
        m.register()


def unregister() -> None:
    operators.stop_running_sessions()
    for m in reversed(_modules):
        m.unregister()
