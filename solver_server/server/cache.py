"""The job cache folder: every finished frame and the solver state to resume from it.

Layout (docs/protocol.md, "Cache folder")::

    cache_dir/scene.json              {"scene_hash": sha256 hex, "name", "frame_start", "frame_end", "bodies"}
    cache_dir/stats.json              {"frames": [{"frame", "newton_iterations", "contacts", "seconds", ...}]}
    cache_dir/frames/frame_%05d.npz   "names" (unicode array) + "p0", "p1", ... (n, 3) float32 per body
    cache_dir/state/state_%05d.npz    Backend.get_state() at that frame

Every file is written atomically (temporary file in the same folder, then os.replace), so a
job killed mid-write leaves either the old file or the new one, never half of one; leftover
temporaries are ignored and removed by :meth:`JobCache.clear` / resume.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
from typing import Optional

import numpy as np

from protocol.scene import Scene, SceneError
from protocol.scenefile import scene_bytes


def scene_hash(scene: Scene) -> str:
    """sha256 of the scene's canonical file bytes (every field and array)."""
    return hashlib.sha256(scene_bytes(scene)).hexdigest()


def _atomic_write(path: str, write) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
    os.replace(tmp, path)


class JobCache:
    """Reads and writes one job's cache folder."""

    def __init__(self, root: str):
        self.root = os.path.abspath(os.fspath(root))
        self.frames_dir = os.path.join(self.root, "frames")
        self.state_dir = os.path.join(self.root, "state")

    def frame_path(self, frame: int) -> str:
        return os.path.join(self.frames_dir, f"frame_{frame:05d}.npz")

    def state_path(self, frame: int) -> str:
        return os.path.join(self.state_dir, f"state_{frame:05d}.npz")

    def ensure(self) -> None:
        os.makedirs(self.frames_dir, exist_ok=True)
        os.makedirs(self.state_dir, exist_ok=True)

    def clear(self) -> None:
        """Remove this layout's files (and nothing else) before a fresh bake."""
        for pattern in ("frames/frame_*.npz*", "state/state_*.npz*", "stats.json", "scene.json", "*.tmp*"):
            for p in glob.glob(os.path.join(self.root, pattern)):
                os.remove(p)

    # -- scene identity ---------------------------------------------------------------------
    def write_scene_json(self, scene: Scene, digest: str) -> None:
        info = {"scene_hash": digest, "name": scene.name, "frame_start": scene.settings.frame_start,
                "frame_end": scene.settings.frame_end, "backend": scene.settings.backend,
                "bodies": [b.name for b in scene.simulated()]}
        _atomic_write(os.path.join(self.root, "scene.json"), lambda f: f.write(json.dumps(info, indent=1).encode()))

    def check_resume(self, digest: str) -> None:
        """Raise SceneError(field="scene") when the folder holds a bake of a different scene."""
        p = os.path.join(self.root, "scene.json")
        if not os.path.exists(p):
            return
        with open(p) as f:
            old = json.load(f).get("scene_hash")
        if old != digest:
            raise SceneError(f"cannot resume: the cache folder {self.root} holds a bake of a different scene "
                             "(settings, meshes or materials changed); bake from the start instead", "", "scene")

    # -- frames and states ------------------------------------------------------------------
    def write_frame(self, frame: int, positions: dict) -> None:
        names = list(positions)
        arrays = {f"p{i}": np.ascontiguousarray(positions[n], dtype=np.float32) for i, n in enumerate(names)}
        _atomic_write(self.frame_path(frame), lambda f: np.savez(f, names=np.array(names, dtype=str), **arrays))

    def read_frame(self, frame: int) -> dict:
        """body name -> (n, 3) float32 positions."""
        with np.load(self.frame_path(frame), allow_pickle=False) as z:
            names = [str(n) for n in z["names"]]
            return {n: z[f"p{i}"] for i, n in enumerate(names)}

    def write_state(self, frame: int, state: dict) -> None:
        arrays = {str(k): np.asarray(v) for k, v in state.items()}
        _atomic_write(self.state_path(frame), lambda f: np.savez(f, **arrays))

    def read_state(self, frame: int) -> dict:
        with np.load(self.state_path(frame), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def last_complete_frame(self, frame_start: int, frame_end: int) -> Optional[int]:
        """The last frame k such that every frame frame_start..k is on disk and k has a state."""
        last = None
        for f in range(frame_start, frame_end + 1):
            if not os.path.exists(self.frame_path(f)):
                break
            if os.path.exists(self.state_path(f)):
                last = f
        return last

    def frames_on_disk(self, frame_start: int, frame_end: int) -> list:
        return [f for f in range(frame_start, frame_end + 1) if os.path.exists(self.frame_path(f))]

    # -- statistics -------------------------------------------------------------------------
    def read_stats(self) -> list:
        p = os.path.join(self.root, "stats.json")
        if not os.path.exists(p):
            return []
        with open(p) as f:
            return json.load(f).get("frames", [])

    def write_stats(self, rows: list) -> None:
        data = json.dumps({"frames": rows}, indent=1).encode()
        _atomic_write(os.path.join(self.root, "stats.json"), lambda f: f.write(data))
