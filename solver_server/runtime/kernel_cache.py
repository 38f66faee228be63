"""Where numba keeps compiled kernels, and whether they are already compiled.

numba's on-disk cache (``cache=True``) keys a function on its own source file, but not on the
functions it calls and inlines from other modules: after an edit (or an upgrade that keeps file
timestamps) it can load a stale kernel. Clearance therefore points ``NUMBA_CACHE_DIR`` at a folder
named by a fingerprint of the whole ``solver_server`` source tree, so any change of any source
file compiles everything afresh into a new folder, and a stale kernel is never loaded.

The same folder answers "is this the first bake after an install?": a marker per backend is
written there after its first finished frame; until then the job reports the "compiling" state
so a long first compilation never looks like a frozen bake.

Inside that folder kernels are filed by their place in the package, not by the absolute path
of their sources (numba's default), so a second checkout or an installed copy of the same
sources reuses them instead of compiling again (:mod:`solver_server.runtime.numba_locator`).

The folder is ``$CLEARANCE_STATE_DIR/numba/<fingerprint>`` (default ``~/.cache/clearance``);
setting ``NUMBA_CACHE_DIR`` yourself overrides it (and keeps numba's path-keyed layout). Only
the newest few folders are kept.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # solver_server/ (this file is in runtime/)
_KEEP = 4
LOCATORS = ",".join(("solver_server.runtime.numba_locator.PackageRelativeLocator", "UserProvidedCacheLocator",
                     "InTreeCacheLocator", "UserWideCacheLocator", "IPythonCacheLocator", "ZipCacheLocator"))
"""numba's cache locators (``NUMBA_CACHE_LOCATOR_CLASSES``): ours first, so a kernel is found
again by every later process whatever path the package is imported from
(:mod:`solver_server.runtime.numba_locator`), then numba's defaults for everything else."""
_fingerprint = None


def state_dir() -> str:
    """Clearance's per-user state folder (kernel caches, warm markers)."""
    return os.environ.get("CLEARANCE_STATE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "clearance")


def tree_fingerprint(root: str) -> str:
    """SHA-1 (16 hex digits) over the relative path and bytes of every .py file below ``root``."""
    h = hashlib.sha1()
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(d, f)
                h.update(os.path.relpath(p, root).encode())
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()[:16]


def source_fingerprint() -> str:
    """:func:`tree_fingerprint` of the solver_server package (computed once per process)."""
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = tree_fingerprint(_PACKAGE)
    return _fingerprint


def cache_dir() -> str:
    """The numba cache folder for the current sources."""
    return os.path.join(state_dir(), "numba", source_fingerprint())


def configure() -> None:
    """Point numba at :func:`cache_dir` (before numba is imported; no-op if the user set
    NUMBA_CACHE_DIR or numba is already loaded) and prune folders of older sources."""
    if "NUMBA_CACHE_DIR" in os.environ or "numba" in sys.modules:
        return
    path = cache_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return  # unwritable home: numba falls back to __pycache__ beside the sources
    os.environ["NUMBA_CACHE_DIR"] = path
    os.environ.setdefault("NUMBA_CACHE_LOCATOR_CLASSES", LOCATORS)
    _prune(os.path.dirname(path), keep=path)


def _prune(root: str, keep: str) -> None:
    try:
        entries = [os.path.join(root, e) for e in os.listdir(root)]
        entries = sorted((e for e in entries if os.path.isdir(e) and e != keep), key=os.path.getmtime, reverse=True)
        for old in entries[_KEEP - 1:]:
            shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass


def active_dir() -> str:
    """The folder numba writes this process's kernels to: ``$NUMBA_CACHE_DIR`` when set (by the
    user, or by :func:`configure`), else :func:`cache_dir`."""
    return os.environ.get("NUMBA_CACHE_DIR") or cache_dir()


def is_writable() -> bool:
    """True when :func:`active_dir` is (or can be made) a folder this process can write kernels into."""
    path = active_dir()
    try:
        os.makedirs(path, exist_ok=True)   # numba makes a missing $NUMBA_CACHE_DIR itself
    except OSError:
        return False
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def _marker(backend: str) -> str:
    return os.path.join(active_dir(), f"warm-{backend}")


def is_warm(backend: str) -> bool:
    """True once a frame of ``backend`` has finished with the current sources (kernels cached)."""
    return backend == "none" or os.path.exists(_marker(backend))


def mark_warm(backend: str) -> None:
    """Record that ``backend``'s kernels are compiled and cached for the current sources."""
    try:
        p = _marker(backend)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "a").close()
    except OSError:
        pass  # only affects the progress label
