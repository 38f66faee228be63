"""Add-on preferences: where the solver server runs and how its Python gets the solver.

The local server runs Blender's own Python with the solver's dependencies (numba, scipy...)
installed on first use into the extension's user folder (:mod:`solver_launch`): nothing to set.
*Install Solver* does it ahead (and compiles the kernels); *Wheel Folder* installs offline from
wheels fetched with ``pip download``; *Server Python* (for TDs) runs the server in a Python of
your own that already has the dependencies.
"""
from __future__ import annotations

import bpy
from bpy.props import EnumProperty, FloatProperty, StringProperty

ADDON_ID = __package__


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
        description="A Python of your own that has numba, scipy, pyzmq and msgpack to run the local server; "
                    "empty: Blender's Python, with the solver installed into the extension's folder on first use")
    wheel_folder: StringProperty(
        name="Wheel Folder", subtype="DIR_PATH", default="",
        description="Offline install: a folder of wheels made with 'pip download' (docs/addon.md); empty: "
                    "download from pypi.org on first use")
    secret: StringProperty(name="Shared Secret", subtype="PASSWORD", default="",
                           description="Secret the remote server requires (never needed on loopback)")
    server_key: StringProperty(
        name="Server Public Key", default="",
        description="The remote server's public key (CurveZMQ encryption): the server.key file written by "
                    "'clearance-server keygen', or its 40 characters; empty: no encryption")
    client_key: StringProperty(
        name="Client Key", subtype="FILE_PATH", default="",
        description="This machine's secret key file (NAME.key_secret from 'clearance-server keygen --client NAME') "
                    "for a remote server that admits only listed clients (--authorized-keys); empty: "
                    "$CLEARANCE_CLIENT_KEY_FILE, else a fresh key per connection. Used only with a Server Public Key")
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
            row = layout.row()
            row.active = bool(self.server_key.strip())   # a client key only means something with encryption
            row.prop(self, "client_key")
        else:
            from . import solver_launch   # imported here: solver_launch imports this module
            icon, text = solver_launch.describe(self)
            box = layout.box()
            box.label(text=text, icon=icon)
            setup = solver_launch.current_setup()
            if setup is not None and setup.poll():
                box.progress(factor=setup.fraction, text=setup.status_text())
                box.operator("clearance.cancel_setup", icon="CANCEL")
            else:
                if setup is not None and setup.error:
                    for line in _wrap(setup.status_text(), 70):
                        box.label(text=line, icon="BLANK1")
                row = box.row()
                row.operator("clearance.install_solver", icon="IMPORT")
                row.operator("clearance.install_solver", text="Reinstall", icon="FILE_REFRESH").reinstall = True
            layout.prop(self, "wheel_folder")
            layout.prop(self, "python_executable")
        layout.prop(self, "timeout")


def _wrap(text: str, width: int) -> list:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


def get(context=None) -> "ClearancePreferences | None":
    """These preferences, or None when the add-on is imported without being enabled."""
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_ID)
    return addon.preferences if addon else None


def register() -> None:
    bpy.utils.register_class(ClearancePreferences)


def unregister() -> None:
    bpy.utils.unregister_class(ClearancePreferences)
