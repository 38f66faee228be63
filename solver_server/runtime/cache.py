"""The job cache folder: every finished frame and the solver state to resume from it.

Layout (docs/protocol.md, "Cache folder")::

    cache_dir/scene.json              {"scene_hash": sha256 hex, "name", "frame_start", "frame_end", "bodies"}
    cache_dir/stats.json              {"frames": [{"frame", "newton_iterations", "contacts", "seconds", ...}]}
    cache_dir/frames/frame_%05d.npz   "names" (unicode array) + "p0", "p1", ... (n, 3) float32 per body
    cache_dir/state/state_%05d.npz    Backend.get_state() at that frame

This module is the one owner of those files: every name the bake writes is listed here
(:func:`is_own_file`), and nothing else is ever removed or overwritten. A folder that holds
other files and no ``scene.json`` of ours is not a cache folder and is refused
(:meth:`JobCache.check_owner`), so a bake never replaces a user's ``scene.json`` or
``stats.json`` and never deletes their ``notes.tmpl``.

Every file is written atomically (``<name>.tmp<pid>`` in the same folder, then os.replace),
so a job killed mid-write leaves either the old file or the new one, never half of one;
leftover temporaries of that exact form are removed before the next bake or resume.
Reading never hangs and never crashes: only regular files are opened (a FIFO or a device
named ``scene.json`` is refused without blocking), and a damaged file raises
:class:`CacheError` naming it. Disk full, read-only and permission faults raise
:class:`CacheError` naming the file too, after removing the partial temporary.

One job at a time per folder: :meth:`JobCache.lock` takes an exclusive lock on the folder
(folder_lock.py: ``flock`` on the folder itself on POSIX, no file created; a locked
``clearance.lock`` on Windows), held for the whole bake, so a second server, a
``clearance-server bake`` or a second job reaching the same folder through a symlink is
refused with :class:`CacheBusy` instead of interleaving its frames with the first job's.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import stat
from typing import Callable, Iterator, Optional

import numpy as np

from protocol.cache_layout import (FRAMES_DIR, LOCK_FILE, OWN_TMP, SCENE_JSON, STATE_DIR, STATS_JSON,  # noqa: F401
                                   is_own_file)
from protocol.scene import Scene, SceneError
from protocol.scenefile import scene_bytes
from .folder_lock import FolderBusy, folder_lock

_TMP_OF_SCENE_JSON = re.compile(r"^scene\.json\.tmp\d+$")

SCENE_KEYS = frozenset(("scene_hash", "name", "frame_start", "frame_end", "bodies"))
"""Keys every scene.json written by Clearance has (how a cache folder is recognised)."""

MAX_JSON_BYTES = 256 * 1024 ** 2
"""Largest scene.json / stats.json read (a stats row is ~150 bytes per frame)."""

_ERRNO_HINTS = {
    errno.ENOSPC: "the disk is full; free some space or choose a cache folder on another disk",
    errno.EDQUOT: "the disk quota is exhausted; free some space or choose another cache folder",
    errno.EROFS: "the file system is read-only; choose a writable cache folder",
    errno.EACCES: "permission denied; choose a folder the server's user can write",
    errno.EPERM: "permission denied; choose a folder the server's user can write",
    errno.EFBIG: "the file is larger than the file system or the process limit allows",
    errno.ENAMETOOLONG: "the path is too long",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
}


class CacheError(Exception):
    """The cache folder cannot be used: a damaged or foreign file, a failed write (disk full,
    read-only, permissions). ``path`` is the file or folder concerned; the message names it
    and says what to do. Reported to clients with error code ``code``."""

    code = "cache"

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path


class CacheBusy(CacheError):
    """Another job (in this or another process) is baking into the same folder."""

    code = "busy"


def scene_hash(scene: Scene) -> str:
    """sha256 of the scene's canonical file bytes (every field and array)."""
    return hashlib.sha256(scene_bytes(scene)).hexdigest()


def os_error_text(e: OSError, path: str, action: str = "write") -> str:
    """``cannot write <path>: <reason> (<hint>)`` for an OSError, naming the file."""
    reason = e.strerror or str(e)
    hint = _ERRNO_HINTS.get(e.errno or 0)
    return f"cannot {action} {path}: {reason}" + (f" ({hint})" if hint else "")


def _atomic_write(path: str, write: Callable) -> None:
    """Write through ``write(file)`` to a temporary and rename it into place; on any failure
    remove the temporary and raise CacheError naming ``path``.

    Nothing outside the folder of ``path`` can be written: the folder is opened without
    following a symlink (a linked ``frames/`` is refused with ELOOP), the temporary is created
    relative to that open folder with O_EXCL | O_NOFOLLOW (a link planted under its name is
    never followed), and the rename happens inside the same open folder (a rename replaces a
    link at ``path`` itself, never its target)."""
    folder, name = os.path.split(path)
    tmp = f"{name}.tmp{os.getpid()}"
    if not _DIR_FD:   # no dir_fd (Windows): plain paths, after the link checks of check_tree()
        _atomic_write_paths(path, os.path.join(folder, tmp), write)
        return
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise CacheError(_link_text(folder) if e.errno == errno.ELOOP or os.path.islink(folder)
                         else os_error_text(e, path), folder) from e
    try:
        try:
            with contextlib.suppress(FileNotFoundError):   # a stale temporary of a dead process with our pid
                os.unlink(tmp, dir_fd=dfd)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
            with open(fd, "wb") as f:
                write(f)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            if isinstance(e, OSError):
                raise CacheError(os_error_text(e, path), path) from e
            raise
    finally:
        os.close(dfd)


_DIR_FD = os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")


def _atomic_write_paths(path: str, tmp: str, write: Callable) -> None:
    try:
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(e, OSError):
            raise CacheError(os_error_text(e, path), path) from e
        raise


def _link_text(path: str) -> str:
    """The one-line refusal of a symbolic link inside a cache folder."""
    return (f"{path} is a symbolic link; a bake writes only inside its own cache folder and refuses links in it: "
            "remove the link or choose another cache folder")


def _read_regular(path: str, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    Opened non-blocking and checked with fstat before reading, so a FIFO, socket or device
    under a cache file's name is refused at once instead of blocking the reader forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
                     | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        if e.errno == errno.ELOOP or os.path.islink(path):
            raise CacheError(_link_text(path), path) from e
        raise CacheError(os_error_text(e, path, "read"), path) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"{path} is not a regular file (a FIFO, device or socket?); remove it or choose "
                             "another cache folder", path)
        if st.st_size > limit:
            raise CacheError(f"{path} is {st.st_size} bytes, more than a cache file of this kind can be "
                             f"({limit}); it is damaged or not Clearance's: remove it or choose another cache folder",
                             path)
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limit:
            raise CacheError(f"{path} grew beyond {limit} bytes while being read", path)
        return data
    except OSError as e:
        raise CacheError(os_error_text(e, path, "read"), path) from e
    finally:
        os.close(fd)


def _read_json_object(path: str) -> dict:
    """A JSON object from ``path``; CacheError naming the file when it is anything else."""
    data = _read_regular(path, MAX_JSON_BYTES)
    try:
        obj = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CacheError(f"{path} is damaged (not UTF-8 text); remove it or choose another cache folder",
                         path) from None
    except (ValueError, RecursionError) as e:
        raise CacheError(f"{path} is damaged (not valid JSON: {str(e)[:120]}); remove it or choose another "
                         "cache folder", path) from None
    if not isinstance(obj, dict):
        raise CacheError(f"{path} is damaged (a JSON {type(obj).__name__}, not an object); remove it or choose "
                         "another cache folder", path)
    return obj


def _load_npz(path: str, limit: int = 1 << 40) -> dict:
    """Every array of an .npz file we wrote; CacheError naming the file when it is damaged."""
    data = _read_regular(path, limit)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # BadZipFile, ValueError (pickled or bad header), EOFError, KeyError, zlib.error ...
        raise CacheError(f"{path} is damaged ({type(e).__name__}: {str(e)[:120]}); remove it (and the frames "
                         "after it) to resume from an earlier frame, or bake from the start", path) from None


def _npz_bytes(**arrays: np.ndarray) -> memoryview:
    """An .npz archive built in memory, so that the file itself is written by plain writes (a
    failing write then leaves no half-closed zip object behind to complain at exit)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getbuffer()


class JobCache:
    """Reads and writes one job's cache folder (see the module docstring for the rules)."""

    def __init__(self, root: str):
        self.root = os.path.abspath(os.fspath(root))
        self.frames_dir = os.path.join(self.root, FRAMES_DIR)
        self.state_dir = os.path.join(self.root, STATE_DIR)
        self.scene_json = os.path.join(self.root, SCENE_JSON)
        self.stats_json = os.path.join(self.root, STATS_JSON)

    def frame_path(self, frame: int) -> str:
        return os.path.join(self.frames_dir, f"frame_{frame:05d}.npz")

    def state_path(self, frame: int) -> str:
        return os.path.join(self.state_dir, f"state_{frame:05d}.npz")

    # -- the folder -------------------------------------------------------------------------
    def create(self) -> None:
        """Create the cache folder (and its parents); CacheError naming it when that fails."""
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as e:
            raise CacheError(os_error_text(e, self.root, "create the cache folder"), self.root) from e
        if not os.path.isdir(self.root):
            raise CacheError(f"cannot use {self.root} as the cache folder: it is not a folder", self.root)

    def ensure(self) -> None:
        """Create ``frames/`` and ``state/``; CacheError when either is a symlink (makedirs
        would accept a link to a folder elsewhere) or cannot be created."""
        for d in (self.frames_dir, self.state_dir):
            if os.path.islink(d):
                raise CacheError(_link_text(d), d)
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                raise CacheError(os_error_text(e, d, "create"), d) from e

    def check_tree(self) -> None:
        """Refuse the folder when anything in it, ``frames/`` and ``state/`` is a symbolic link
        (CacheError naming the first one). A link would let a bake write or remove files
        outside its folder (a linked ``frames/`` overwrote a user's files; two caches linked to
        one ``frames/`` reported each other's frames), so the whole tree the bake owns must be
        real files and folders. The folder itself was resolved by the caller (realpath)."""
        for sub in ("", FRAMES_DIR, STATE_DIR):
            for e in self._entries(sub):
                if e.is_symlink():
                    raise CacheError(_link_text(e.path), e.path)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold an exclusive lock on the folder for the ``with`` block (folder_lock: ``flock`` on
        POSIX, a locked byte of ``clearance.lock`` on Windows); CacheBusy at once when another
        process (or another open of it) holds it. Released when the block ends or the process dies."""
        try:
            with folder_lock(self.root):
                yield
        except FolderBusy:
            raise CacheBusy(f"another job is baking into {self.root} (in this server, another server or a "
                            "`clearance-server bake`); wait for it, cancel it, or use another folder",
                            self.root) from None
        except OSError as e:
            raise CacheError(os_error_text(e, self.root, "lock the cache folder"), self.root) from e

    def check_unlocked(self) -> None:
        """CacheBusy when another process holds :meth:`lock` right now (a cheap probe)."""
        with self.lock():
            pass

    def _entries(self, sub: str) -> Iterator[os.DirEntry]:
        d = os.path.join(self.root, sub) if sub else self.root
        try:
            with os.scandir(d) as it:
                yield from it
        except FileNotFoundError:
            return
        except OSError as e:
            raise CacheError(os_error_text(e, d, "list"), d) from e

    def _foreign_entry(self) -> Optional[str]:
        """For a folder without scene.json: the path of one entry that is not a trace of a bake
        (frames/ and state/ holding only our names, a scene.json temporary), or None. The bake
        writes scene.json before anything else and clear() removes it last, so any other file
        of ours implies a scene.json."""
        for e in self._entries(""):
            if e.name in (FRAMES_DIR, STATE_DIR) and e.is_dir(follow_symlinks=False):
                for e2 in self._entries(e.name):
                    if not (is_own_file(e.name, e2.name) and e2.is_file(follow_symlinks=False)):
                        return e2.path
            elif not ((_TMP_OF_SCENE_JSON.match(e.name) or e.name == LOCK_FILE) and e.is_file(follow_symlinks=False)):
                return e.path   # without our scene.json even a stats.json is someone else's
        return None

    def _scene_info(self) -> Optional[dict]:
        """The folder's scene.json when it is Clearance's, None when there is none; CacheError
        naming it when it is damaged (not a regular file, not UTF-8 JSON, not an object) or was
        written by something else."""
        if not os.path.lexists(self.scene_json):
            return None
        info = _read_json_object(self.scene_json)
        missing = SCENE_KEYS - set(info)
        if missing or not (isinstance(info.get("scene_hash"), str) and len(info["scene_hash"]) == 64):
            raise CacheError(f"{self.scene_json} was not written by Clearance (it lacks "
                             f"{sorted(missing) or ['a sha256 scene_hash']}), so {self.root} is not a Clearance "
                             "cache folder: choose an empty or new folder", self.scene_json)
        return info

    def check_owner(self) -> bool:
        """Make sure the folder is ours to write; returns True when it holds a Clearance
        scene.json (a previous bake), False when it is empty or holds only our file names.

        Raises CacheError, naming the file, when ``scene.json`` is there but damaged or not
        Clearance's, or when the folder has no scene.json and holds anything else (a user's
        folder): the bake would otherwise overwrite or delete files that are not its own; and
        when anything in the tree is a symbolic link (:meth:`check_tree`).
        """
        self.check_tree()
        if self._scene_info() is not None:
            return True
        other = self._foreign_entry()
        if other is not None:
            raise CacheError(f"{self.root} is not empty and is not a Clearance cache folder (it holds "
                             f"{os.path.relpath(other, self.root)!r} and no scene.json of a previous bake); choose "
                             "an empty or new folder so that no file of yours is overwritten or removed", self.root)
        return False

    def remove_temporaries(self) -> None:
        """Remove the ``*.tmp<pid>`` files an interrupted bake left (only names the bake writes)."""
        for sub in ("", FRAMES_DIR, STATE_DIR):
            for e in list(self._entries(sub)):
                if OWN_TMP.search(e.name) and is_own_file(sub, e.name):
                    with contextlib.suppress(FileNotFoundError):
                        self._remove(e.path)

    def clear(self) -> None:
        """Remove this layout's files (and nothing else) before a fresh bake. scene.json goes
        last: while any other file of ours is left, the folder still shows it is a cache."""
        for sub in (FRAMES_DIR, STATE_DIR, ""):
            for e in list(self._entries(sub)):
                if (is_own_file(sub, e.name) and e.name not in (SCENE_JSON, LOCK_FILE)
                        and e.is_file(follow_symlinks=False)):
                    self._remove(e.path)
        if os.path.isfile(self.scene_json):
            self._remove(self.scene_json)

    @staticmethod
    def _remove(path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise CacheError(os_error_text(e, path, "remove"), path) from e

    # -- scene identity ---------------------------------------------------------------------
    def write_scene_json(self, scene: Scene, digest: str) -> None:
        info = {"scene_hash": digest, "name": scene.name, "frame_start": scene.settings.frame_start,
                "frame_end": scene.settings.frame_end, "backend": scene.settings.backend,
                "bodies": [b.name for b in scene.simulated()]}
        _atomic_write(self.scene_json, lambda f: f.write(json.dumps(info, indent=1).encode()))

    def check_resume(self, digest: str) -> bool:
        """True when the folder holds a bake of this scene (resume from it), False when there is
        no previous bake (no scene.json; the folder must then hold only our files). Raises
        SceneError(field="scene") when it holds a bake of a different scene, CacheError (naming
        the file) when scene.json is damaged or foreign, or a link is in the tree."""
        self.check_tree()
        info = self._scene_info()
        if info is None:
            self.check_owner()
            return False
        if info["scene_hash"] != digest:
            raise SceneError(f"cannot resume: the cache folder {self.root} holds a bake of a different scene "
                             "(settings, meshes or materials changed); bake from the start instead", "", "scene")
        return True

    # -- frames and states ------------------------------------------------------------------
    def write_frame(self, frame: int, positions: dict) -> None:
        names = list(positions)
        arrays = {f"p{i}": np.ascontiguousarray(positions[n], dtype=np.float32) for i, n in enumerate(names)}
        data = _npz_bytes(names=np.array(names, dtype=str), **arrays)
        _atomic_write(self.frame_path(frame), lambda f: f.write(data))

    def read_frame(self, frame: int) -> dict:
        """body name -> (n, 3) float32 positions; CacheError naming the file when it is damaged."""
        path = self.frame_path(frame)
        z = _load_npz(path)
        try:
            names = [str(n) for n in z["names"]]
            return {n: z[f"p{i}"] for i, n in enumerate(names)}
        except (KeyError, TypeError, ValueError) as e:
            raise CacheError(f"{path} is damaged ({type(e).__name__}: {str(e)[:120]}); remove it to resume from "
                             "an earlier frame, or bake from the start", path) from None

    def write_state(self, frame: int, state: dict) -> None:
        arrays = {str(k): np.asarray(v) for k, v in state.items()}
        data = _npz_bytes(**arrays)
        _atomic_write(self.state_path(frame), lambda f: f.write(data))

    def read_state(self, frame: int) -> dict:
        """The saved Backend.get_state() of ``frame``; CacheError naming the file when damaged."""
        return _load_npz(self.state_path(frame))

    def last_complete_frame(self, frame_start: int, frame_end: int) -> Optional[int]:
        """The last frame k such that every frame frame_start..k is on disk and k has a state."""
        last = None
        for f in range(frame_start, frame_end + 1):
            if not os.path.isfile(self.frame_path(f)):
                break
            if os.path.isfile(self.state_path(f)):
                last = f
        return last

    def has_state(self, frame: int) -> bool:
        """True when a state file of ``frame`` exists (it may still be damaged)."""
        return os.path.isfile(self.state_path(frame))

    def drop_after(self, frame: int, frame_end: int) -> None:
        """Remove the frame and state files of ``frame + 1 .. frame_end`` (exact names of ours only):
        a resume that falls back to ``frame`` bakes them again, and a damaged file among them must
        not be found by the next resume."""
        for f in range(frame + 1, frame_end + 1):
            self._remove(self.frame_path(f))
            self._remove(self.state_path(f))

    def frames_on_disk(self, frame_start: int, frame_end: int) -> list:
        return [f for f in range(frame_start, frame_end + 1) if os.path.isfile(self.frame_path(f))]

    # -- statistics -------------------------------------------------------------------------
    def read_stats(self) -> list:
        """The per-frame stats rows; CacheError naming stats.json when it is damaged."""
        if not os.path.lexists(self.stats_json):
            return []
        rows = _read_json_object(self.stats_json).get("frames", [])
        if not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
            raise CacheError(f"{self.stats_json} is damaged (\"frames\" is not a list of objects); remove it or "
                             "bake from the start", self.stats_json)
        return rows

    def write_stats(self, rows: list) -> None:
        data = json.dumps({"frames": rows}, indent=1).encode()
        _atomic_write(self.stats_json, lambda f: f.write(data))
