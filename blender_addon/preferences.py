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

from . import solver_launch
from .addon_prefs import ADDON_ID, get  # noqa: F401  (get: the preferences, for the other modules)


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
            draw_install_status(layout, self, width=70, full=True)
            layout.prop(self, "wheel_folder")
            layout.prop(self, "python_executable")
        layout.prop(self, "timeout")


def wrap_lines(text: str, width: int) -> list:
    """Split a message into label-sized lines of at most ``width`` characters, at spaces."""
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([line] if line else [])


def draw_install_status(layout, prefs: "ClearancePreferences", width: int, full: bool) -> None:
    """Where the local server's solver comes from and Install Solver, drawn in these preferences
    (``full``: in a box, with the running install's progress and Cancel, and Reinstall) and in the
    Server panel (compact)."""
    icon, text = solver_launch.describe(prefs)
    col = layout.box() if full else layout.column()
    for i, line in enumerate(wrap_lines(text, width)):
        col.label(text=line, icon=icon if i == 0 else "BLANK1")
    setup = solver_launch.current_setup()
    running = setup is not None and setup.poll()
    if running and full:
        col.progress(factor=setup.fraction, text=setup.status_text())
        col.operator("clearance.cancel_setup", icon="CANCEL")
        return
    if setup is not None and setup.error and not running:
        for line in wrap_lines(setup.status_text(), width):
            col.label(text=line, icon="BLANK1")
    row = col.row()
    row.operator("clearance.install_solver", icon="IMPORT")
    if full:
        row.operator("clearance.install_solver", text="Reinstall", icon="FILE_REFRESH").reinstall = True


def register() -> None:
    bpy.utils.register_class(ClearancePreferences)


def unregister() -> None:
    bpy.utils.unregister_class(ClearancePreferences)
