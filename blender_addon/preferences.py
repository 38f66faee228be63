"""Add-on preferences: where the solver server runs and which Python starts it.

The server needs numba and scipy, which Blender's bundled Python lacks, so the embedded
local server runs in a separate Python (a venv with ``pip install clearance``). By default
that is Blender's own ``sys.executable`` when it can import ``solver_server`` (the bpy
module in a venv, a development setup), otherwise the path the user sets here.
"""
from __future__ import annotations

import importlib.util
import sys

import bpy
from bpy.props import EnumProperty, FloatProperty, StringProperty

ADDON_ID = __package__


def default_python() -> str:
    """sys.executable when it can run the server, else "" (the user must set a path)."""
    try:
        found = importlib.util.find_spec("solver_server") is not None
    except (ImportError, ValueError):
        found = False
    return sys.executable if found else ""


class ClearancePreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_ID

    server_mode: EnumProperty(
        name="Server",
        items=[("EMBEDDED", "Local Server", "Start a solver server on this machine when baking (loopback only)"),
               ("REMOTE", "Remote Server", "Connect to a server already running at the address below")],
        default="EMBEDDED")
    remote_address: StringProperty(name="Address", default="tcp://127.0.0.1:5555",
                                   description="tcp://host:port of the remote solver server")
    python_executable: StringProperty(
        name="Server Python", subtype="FILE_PATH", default="",
        description="Python that can import solver_server (runs the local server); empty: Blender's Python if it can")
    secret: StringProperty(name="Shared Secret", subtype="PASSWORD", default="",
                           description="Secret the remote server requires (never needed on loopback)")
    server_key: StringProperty(
        name="Server Public Key", default="",
        description="The remote server's public key (CurveZMQ encryption): the server.key file written by "
                    "'clearance-server keygen', or its 40 characters; empty: no encryption")
    timeout: FloatProperty(name="Timeout (s)", default=5.0, min=0.1, soft_max=60.0,
                           description="Seconds to wait for the server to answer a request")

    def draw(self, _context) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.prop(self, "server_mode")
        if self.server_mode == "REMOTE":
            layout.prop(self, "remote_address")
            layout.prop(self, "secret")
            layout.prop(self, "server_key")
        else:
            layout.prop(self, "python_executable")
            if not self.python_executable and not default_python():
                layout.label(text="Set a Python that has 'pip install clearance'", icon="ERROR")
        layout.prop(self, "timeout")


def get(context=None) -> "ClearancePreferences | None":
    """These preferences, or None when the add-on is imported without being enabled."""
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_ID)
    return addon.preferences if addon else None


def register() -> None:
    bpy.utils.register_class(ClearancePreferences)


def unregister() -> None:
    bpy.utils.unregister_class(ClearancePreferences)
