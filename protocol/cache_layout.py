"""The names a bake writes in its cache folder (docs/protocol.md, "Cache folder").

Shared by the server, which owns the folder while it bakes (solver_server/runtime/cache.py), and by
clients that clean it up (the add-on's Free Bake), so that neither ever removes a file the bake did
not write: a user's ``notes.txt`` in the folder, or a file behind a symbolic link, stays.

    scene.json, stats.json            the bake's identity and per-frame statistics
    clearance.lock                    the folder's lock file, only where the OS cannot lock a folder (Windows)
    frames/frame_%05d.npz             every finished frame
    state/state_%05d.npz              the solver state after that frame (resume)

and the ``<name>.tmp<pid>`` temporaries of each (atomic writes).

A client's cache folder (the add-on's Bake, and ``clearance-server bake`` of a scene that carries the
objects' world matrices) holds the server's folder above as ``server/`` and one ``.pc2`` per simulated
object beside it, named by :func:`pc2_stem` (a granular object's file is its particle object's,
:func:`particle_object_name`), in the object's space of each frame (:func:`to_local`)::

    <folder>/<pc2_stem(name)>.pc2     the object's point cache (object space; particles: world space)
    <folder>/server/...               the server's cache folder (scene.json holds the scene hash)
"""
from __future__ import annotations

import hashlib
import re

import numpy as np

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


SERVER_DIR = "server"
"""The server's cache folder inside a client's cache folder (the add-on's Bake, ``clearance-server bake`` of an
add-on scene)."""

_BAD_CHARS = [c for c in range(0xFF) if not (chr(c).isascii() and (chr(c).isalnum() or chr(c) in "-_"))]
_CLEAN = str.maketrans({c: "_" for c in _BAD_CHARS})
_WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


def clean_name(name: str) -> str:
    """``name`` with every code point below U+00FF that is not an ASCII letter, digit, ``-`` or ``_`` replaced by
    ``_``: what Blender's ``bpy.path.clean_name`` does (tests/blender/test_cache_names.py compares them), so the
    add-on and ``clearance-server bake`` name files alike without bpy."""
    return name.translate(_CLEAN)


def pc2_stem(name: str) -> str:
    """The file stem of the cache of the object called ``name``: unique and stable.

    A name that is already file-safe (:func:`clean_name` leaves it unchanged: letters, digits, ``_``, ``-``) is
    its own stem, so "Cube" writes ``Cube.pc2``. Any other name gets the cleaned name plus ``.`` and the first
    10 hex digits of the SHA-256 of the exact name: "Cube.001" -> ``Cube_001.3c1f0b2a9d.pc2``, which differs
    from "Cube_001"'s ``Cube_001.pc2``. Cleaning never leaves a ``.``, so a hashed stem can never equal a plain
    one, and two different names that clean alike differ in their hash. The stem depends on the name alone, so
    Free Bake, Resume and a farm bake find the same file.
    """
    cleaned = clean_name(name)
    if cleaned == name and name and name.casefold() not in _WINDOWS_RESERVED:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{cleaned[:100]}.{digest}"


def particle_object_name(name: str) -> str:
    """The point-cloud object a granular object's bake writes to (and whose .pc2 it is)."""
    return f"{name}_particles"


def pc2_file_name(name: str, role: str) -> str:
    """The .pc2 file name of the body ``name`` with ``role`` in a client's cache folder."""
    return pc2_stem(particle_object_name(name) if role == "granular" else name) + ".pc2"


def to_local(world: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """World positions (n, 3) -> float32 positions in the space of the world matrix ``matrix`` (4, 4): what a
    Mesh Cache modifier plays under the object's transform of that frame. The add-on's write-back and
    ``clearance-server bake`` both call this, so their .pc2 files are the same bytes."""
    inv = np.linalg.inv(np.asarray(matrix, dtype=np.float64))
    return (np.asarray(world, np.float64) @ inv[:3, :3].T + inv[:3, 3]).astype(np.float32)
