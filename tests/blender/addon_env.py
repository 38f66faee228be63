"""Enable the add-on in the bpy module the way a user would: a local extensions repository
whose folder holds ``clearance`` (a symlink to the checkout's blender_addon/), then
``addon_utils.enable("bl_ext.<repo>.clearance")``."""
from __future__ import annotations

import os
import tempfile

import bpy
import addon_utils

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO_MODULE = "clearance_dev"
MODULE = f"bl_ext.{REPO_MODULE}.clearance"
_repo_dir = None


def repo_dir() -> str:
    """A folder holding ``clearance`` -> <checkout>/blender_addon (made once per process)."""
    global _repo_dir
    if _repo_dir is None:
        _repo_dir = tempfile.mkdtemp(prefix="clearance_ext_repo_")
        os.symlink(os.path.join(ROOT, "blender_addon"), os.path.join(_repo_dir, "clearance"))
    return _repo_dir


def ensure_repo() -> None:
    repos = bpy.context.preferences.extensions.repos
    if not any(r.module == REPO_MODULE for r in repos):
        repos.new(name="Clearance dev", module=REPO_MODULE, custom_directory=repo_dir(), source="USER")


def enable() -> None:
    ensure_repo()
    mod = addon_utils.enable(MODULE, default_set=True, handle_error=_raise)
    assert mod is not None, "the add-on did not enable"


def disable() -> None:
    addon_utils.disable(MODULE, default_set=True, handle_error=_raise)


def _raise(exc):
    raise exc


def is_enabled() -> bool:
    return MODULE in bpy.context.preferences.addons


def reset(enable_addon: bool = True) -> None:
    """Factory settings with an empty scene, then the add-on enabled again."""
    if is_enabled():
        disable()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if enable_addon:
        enable()
