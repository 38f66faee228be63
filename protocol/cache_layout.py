"""The names a bake writes in its cache folder (docs/protocol.md, "Cache folder").

Shared by the server, which owns the folder while it bakes (solver_server/runtime/cache.py), and by
clients that clean it up (the add-on's Free Bake), so that neither ever removes a file the bake did
not write: a user's ``notes.txt`` in the folder, or a file behind a symbolic link, stays.

    scene.json, stats.json            the bake's identity and per-frame statistics
    clearance.lock                    the folder's lock file, only where the OS cannot lock a folder (Windows)
    frames/frame_%05d.npz             every finished frame
    state/state_%05d.npz              the solver state after that frame (resume)

and the ``<name>.tmp<pid>`` temporaries of each (atomic writes).
"""
from __future__ import annotations

import re

SCENE_JSON = "scene.json"
STATS_JSON = "stats.json"
LOCK_FILE = "clearance.lock"
FRAMES_DIR = "frames"
STATE_DIR = "state"

_TMP = r"(\.tmp\d+)?"
OWN_NAMES = {
    "": re.compile(rf"^(scene|stats)\.json{_TMP}$|^{re.escape(LOCK_FILE)}$"),
    FRAMES_DIR: re.compile(rf"^frame_-?\d+\.npz{_TMP}$"),
    STATE_DIR: re.compile(rf"^state_-?\d+\.npz{_TMP}$"),
}
"""Names the bake writes, per sub-folder ("" is the cache folder itself), with their temporaries."""
OWN_TMP = re.compile(r"\.tmp\d+$")
"""The suffix of an atomic write's temporary."""


def is_own_file(subdir: str, name: str) -> bool:
    """True when ``name`` inside ``subdir`` ("" for the cache folder, "frames", "state") is a
    file the bake writes (including its atomic-write temporaries and the lock file)."""
    pat = OWN_NAMES.get(subdir)
    return bool(pat and pat.match(name))
