"""The add-on's identity and where Blender keeps its preferences: the one place both the preferences
panel (preferences.py) and the solver launcher (solver_launch.py) read them, so neither imports the other."""
from __future__ import annotations

import bpy

ADDON_ID = __package__


def get(context=None):
    """The add-on's preferences (preferences.ClearancePreferences), or None when the add-on is imported
    without being enabled."""
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_ID)
    return addon.preferences if addon else None
