"""Which Python runs the local solver server, and getting it ready (Blender side of solver_setup).

In order:

1. **Server Python** set in the preferences (for TDs): that Python, with the solver's sources of
   this extension first on its path. It must have numba, scipy, pyzmq and msgpack; nothing is
   installed into it.
2. Blender's own Python (``sys.executable``: the bundled interpreter in Blender, the venv's Python
   with the bpy module) when it already imports them (a development setup).
3. Otherwise Blender's own Python with the dependencies installed on first use into the
   extension's user folder (``bpy.utils.extension_path_user``: ``solver/cp311/``), the kernel cache
   in ``state/`` beside it, and the kernels compiled ahead (:class:`solver_setup.SolverSetup`).
   Blender removes that folder when the extension is uninstalled and keeps it across updates.

The solver's sources come from the extension (``vendor/solver_server``) or, in a development
checkout, from the repository root beside ``blender_addon/``.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Callable, Optional

import bpy

from . import addon_prefs, solver_deps
from .solver_setup import DONE, RUNNING, Launch, SolverSetup, has_modules

_HERE = os.path.dirname(os.path.realpath(__file__))
_probed: dict = {}     # python -> True when it imports the solver's dependencies by itself
_ready: set = set()     # launches whose setup finished in this Blender session
_current: Optional[SolverSetup] = None
_probe_lock = threading.Lock()


def source_dir() -> Optional[str]:
    """The folder holding ``solver_server/`` and ``protocol/``: ``vendor/`` in the extension, else
    the checkout's root (development), else None."""
    for folder in (os.path.join(_HERE, "vendor"), os.path.dirname(_HERE)):
        if os.path.isfile(os.path.join(folder, "solver_server", "__init__.py")):
            return folder
    return None


def user_dir() -> str:
    """The extension's user folder (created), where the solver's dependencies and kernels go."""
    try:
        return bpy.utils.extension_path_user(addon_prefs.ADDON_ID, create=True)
    except (ValueError, KeyError, TypeError):   # enabled as a legacy add-on, not an extension
        return bpy.utils.user_resource("SCRIPTS", path=os.path.join("clearance_user"), create=True)


def self_sufficient(python: str) -> bool:
    """True when ``python`` imports the solver's dependencies without installing anything (asked
    once per Blender session, in a subprocess)."""
    if python not in _probed:
        found = has_modules(python)
        with _probe_lock:
            _probed.setdefault(python, found)   # a value set meanwhile (another probe, a test) wins
    return _probed[python]


def probe_in_background() -> None:
    """Ask :func:`self_sufficient` of Blender's Python in a thread (so the preferences can say what
    a bake will do without blocking the UI)."""
    threading.Thread(target=self_sufficient, args=(sys.executable,), daemon=True).start()


def resolve(prefs=None) -> Launch:
    """The Launch of the local server under these preferences (see the module docstring)."""
    prefs = prefs or addon_prefs.get()
    src = source_dir()
    paths = [src] if src else []
    override = bpy.path.abspath(prefs.python_executable) if prefs and prefs.python_executable else ""
    if override:
        return Launch(override, paths)
    if self_sufficient(sys.executable):
        return Launch(sys.executable, paths)
    if not src:
        raise RuntimeError("this Clearance extension has no solver sources (vendor/solver_server): reinstall it from "
                           "a release zip, or set Preferences > Add-ons > Clearance > Server Python")
    user = user_dir()
    wheels = bpy.path.abspath(prefs.wheel_folder) if prefs and prefs.wheel_folder else ""
    return Launch(sys.executable, paths, deps=solver_deps.deps_dir(user), state_dir=os.path.join(user, "state"),
                  isolated=True, wheel_folder=wheels, compile_ahead=True)


def _key(launch: Launch) -> tuple:
    return launch.python, launch.deps, tuple(launch.requirements)


def current_setup() -> Optional[SolverSetup]:
    """The setup running now or the last one of this session (the panel shows it)."""
    return _current


def setup_for(launch: Launch, force: bool = False) -> Optional[SolverSetup]:
    """The running setup for ``launch`` or a new one; None when there is nothing to do (nothing to
    install, and no compile ahead, or it already finished in this session). ``force`` runs it even
    then (Install Solver: checks, and compiles what a source update made cold)."""
    global _current
    if _current is not None and _current.state == RUNNING:
        return _current
    needed = launch.needs_install() or (launch.compile_ahead and _key(launch) not in _ready)
    if not (needed or force):
        return None
    _current = SolverSetup(launch)
    return _current


def finish(setup: SolverSetup) -> None:
    """Remember a finished setup (a later server start does not run it again in this session)."""
    if setup.state == DONE:
        _ready.add(_key(setup.launch))


def watch_in_ui(setup: SolverSetup, then: Optional[Callable[[], None]] = None) -> None:
    """Redraw the panels while ``setup`` runs (bpy.app.timers, UI only); call ``then`` if it succeeds."""
    def tick() -> Optional[float]:
        redraw()
        if setup.poll():
            return 0.5
        finish(setup)
        if setup.state == DONE and then is not None:
            then()
        redraw()
        return None
    bpy.app.timers.register(tick, first_interval=0.2)


def redraw() -> None:
    """Tag the areas that show the setup's progress for redraw."""
    wm = bpy.context.window_manager
    for window in wm.windows if wm else ():
        for area in window.screen.areas if window.screen else ():
            if area.type in {"PROPERTIES", "PREFERENCES", "VIEW_3D"}:
                area.tag_redraw()


def remove_installed(launch: Launch) -> None:
    """Delete the installed dependencies of ``launch`` (Reinstall); the kernel cache stays."""
    import shutil
    if launch.deps and os.path.isdir(launch.deps):
        shutil.rmtree(launch.deps)
    _ready.discard(_key(launch))


def describe(prefs) -> tuple:
    """(icon, text) for the preferences: what the local server will run, without starting anything."""
    if prefs.python_executable:
        return "CONSOLE", f"Server Python: {prefs.python_executable}"
    setup = _current
    if setup is not None and setup.state == RUNNING:
        return "TIME", setup.status_text()
    if _probed.get(sys.executable):
        return "CHECKMARK", "Blender's Python has the solver's dependencies"
    try:
        folder = solver_deps.deps_dir(user_dir())
    except Exception:   # no user folder (unusual installs): say what the bake will try
        folder = ""
    if folder and solver_deps.is_installed(folder):
        return "CHECKMARK", f"Solver installed ({solver_deps.python_tag()}): {folder}"
    return "IMPORT", "Solver not installed: the first Bake installs it (about 100 MB download, once)"


def register() -> None:
    probe_in_background()


def unregister() -> None:
    if _current is not None and _current.state == RUNNING:
        _current.cancel()
