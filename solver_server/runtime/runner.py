"""Run one bake job in the current process: backend, cache folder, resume, events.

:func:`run_job` is the single job loop used both by the server (inside a child process,
see jobs.py) and by ``clearance-server bake`` (in process, no sockets). It reports through
``emit(event)`` with plain tuples, cheap to pickle across a pipe:

    ("progress", state, frame, fraction, message)
    ("frame", frame, names, positions, stats)        # positions: list of (n, 3) float32
    ("end", state, frames_done, code, message, field, obj)   # state: done | cancelled | failed

Frames: the first streamed frame is ``frame_start`` (the initial positions), then every
solved frame up to ``frame_end``. Each is written to the cache (frame + state + stats)
before it is emitted. On resume the frames already on disk are re-sent first (so a client
can rebuild its caches) and the solver continues from the last frame with a saved state.
"""
from __future__ import annotations

import traceback
from typing import Callable

import numpy as np

from protocol.messages import PROGRESS_STATES
from protocol.scene import Scene, SceneError
from . import kernel_cache
from .cache import CacheError, JobCache, scene_hash

Emit = Callable[[tuple], None]


class JobCancelled(Exception):
    """Raised inside the job (between frames or from a progress callback) to stop it."""


def _clean_stats(stats: dict) -> dict:
    out = {}
    for k, v in stats.items():
        if isinstance(v, np.generic):
            v = v.item()
        if v is None or type(v) in (int, float, str, bool):
            out[str(k)] = v
    return out


class _Counters:
    """What the job loop has done so far (read by the error handlers of run_job)."""

    def __init__(self, frame: int):
        self.frames_done = 0
        self.current = frame   # last finished frame (progress messages report it)


def run_job(scene: Scene, cache_dir: str, resume: bool, emit: Emit,
            should_stop: Callable[[], bool] = lambda: False) -> str:
    """Bake ``scene`` into ``cache_dir``, emitting events; returns the final state.

    The folder is locked for the whole bake (a second job into it ends at once with code
    ``busy``) and released *before* the final ``end`` event, so whoever reacts to that event
    can start the next job into the same folder. A cache fault (damaged file, disk full,
    read-only, a folder that is not a Clearance cache) ends the job with code ``cache`` and a
    message naming the file; the frames finished before it stay on disk.
    """
    s = scene.settings
    n = _Counters(s.frame_start)
    try:
        scene.validate()
        cache = JobCache(cache_dir)
        cache.create()
        with cache.lock():
            _bake_locked(scene, cache, resume, emit, should_stop, n)
        end = ("end", "done", n.frames_done, "", f"baked {n.frames_done} frames", None, None)
    except JobCancelled:
        end = ("end", "cancelled", n.frames_done, "", "cancelled", None, None)
    except CacheError as e:
        kept = (f"; the {n.frames_done} frames finished before it are kept in {cache_dir} and Resume continues "
                "from them") if n.frames_done else ""
        end = ("end", "failed", n.frames_done, e.code, f"{e}{kept}", "cache_dir", None)
    except SceneError as e:
        code = "resume_mismatch" if e.field == "scene" and resume else "scene"
        end = ("end", "failed", n.frames_done, code, str(e), e.field or None, e.obj or None)
    except Exception as e:  # any backend failure: report it, keep the frames on disk
        tb = traceback.format_exc(limit=6)
        end = ("end", "failed", n.frames_done, "backend", f"{type(e).__name__}: {e}\n{tb}", None, None)
    emit(end)
    return end[1]


def _bake_locked(scene: Scene, cache: JobCache, resume: bool, emit: Emit, should_stop: Callable[[], bool],
                 n: _Counters) -> None:
    """The job loop proper, with the cache folder locked: check the folder is ours, resume or
    start over, then solve, cache and emit every frame."""
    s = scene.settings
    span = max(1, s.frame_end - s.frame_start)

    def progress(state: str, fraction: float, message: str = "") -> None:
        if should_stop():
            raise JobCancelled()
        state = state if state in PROGRESS_STATES else "solving"
        emit(("progress", state, int(n.current), float(min(1.0, max(0.0, fraction))), message))

    digest = scene_hash(scene)
    last, state, note = None, None, ""
    if resume and cache.check_resume(digest):
        last, state, note = resume_point(cache, s.frame_start, s.frame_end,
                                         cache.last_complete_frame(s.frame_start, s.frame_end))
        if note:
            progress("resuming", 0.0, note)
    elif not resume:
        cache.check_owner()   # never overwrite or clear a folder that is not a Clearance cache
    cache.remove_temporaries()  # what a killed job left half-written (exact names of ours only)
    warm = kernel_cache.is_warm(s.backend)
    progress("building" if warm else "compiling", 0.0,
             "" if warm else "first bake with this backend: compiling solver kernels (cached afterwards)")
    with _compile_progress(s.backend, s.solver_quality, emit, n):
        _solve(scene, cache, emit, should_stop, n, progress, digest, last, state, warm)


def resume_point(cache: JobCache, frame_start: int, frame_end: int, last) -> tuple:
    """Where a resume really continues: ``(frame, state, note)``.

    ``last`` is the last frame k with frames ``frame_start..k`` and the state of k on disk. When one of
    those files is damaged (a disk fault, a killed copy), the resume falls back to the latest frame
    before it whose state loads and whose frames all load, drops the files after that frame, and
    ``note`` says which file was damaged and what is baked again; with no usable state at all it
    returns ``(None, None, note)`` and the bake starts over. Without this a damaged last state
    failed every Resume on the same file until the user deleted it by hand."""
    if last is None:
        return None, None, ""
    damaged, good = None, last
    for f in range(frame_start, last + 1):
        try:
            cache.read_frame(f)
        except CacheError as e:
            damaged, good = e, f - 1
            break
    for k in range(good, frame_start - 1, -1):
        if not cache.has_state(k):
            continue
        try:
            state = cache.read_state(k)
        except CacheError as e:
            damaged = damaged or e
            continue
        if damaged is None:
            return k, state, ""
        cache.drop_after(k, frame_end)
        return k, state, (f"{damaged.path} is damaged: resuming after frame {k} instead of {last}; "
                          f"frames {k + 1}-{last} are baked again")
    return None, None, (f"cannot resume: {damaged.path} is damaged and no earlier frame has a usable state; "
                        "baking from the start")


def _compile_progress(backend: str, quality: str, emit: Emit, n: _Counters):
    """Report every kernel numba compiles during the job as a "compiling" progress message
    ("compiling solver kernels 12/~58: module.kernel (41 s)"), whenever it happens (a cold first frame,
    or a kernel first needed later). Emitted directly, never raising JobCancelled inside numba's
    compiler: cancel is checked between kernels by the job loop and the server's terminate."""
    if backend == "none":
        import contextlib
        return contextlib.nullcontext()
    from .compile_progress import CompileProgress, key_of, message

    def report(done: int, expected: int, name: str, seconds: float) -> None:
        frac = min(done / expected, 0.99) if expected else 0.0
        emit(("progress", "compiling", int(n.current), float(frac), message(done, expected, name, seconds)))

    return CompileProgress(report, key_of(backend, quality))


def _solve(scene: Scene, cache: JobCache, emit: Emit, should_stop: Callable[[], bool],
           n: _Counters, progress: Callable, digest: str, last, state, warm: bool) -> None:
    """Build the backend, then resume (from frame ``last``, whose loaded state is ``state``) or start
    over (``last`` None), then solve, cache and emit every frame."""
    s = scene.settings
    span = max(1, s.frame_end - s.frame_start)
    from solver_server.backends import create
    backend = create(scene, lambda st, fr: progress(st, (n.current - s.frame_start + fr) / span))
    # Only a scene the backend accepted replaces the previous job's cache: a refused re-bake
    # (bad mesh, starting intersection) keeps the old frames and their resume state.
    if last is None:
        cache.clear()
    cache.ensure()
    cache.write_scene_json(scene, digest)
    stats_rows = cache.read_stats() if last is not None else []
    if last is not None:
        progress("resuming", (last - s.frame_start) / span, f"resuming after frame {last}")
        by_frame = {r.get("frame"): r for r in stats_rows}
        stats_rows = [r for r in stats_rows if _row_frame(r, s.frame_end + 1) <= last]
        for f in range(s.frame_start, last + 1):
            pos = cache.read_frame(f)
            st = {k: v for k, v in by_frame.get(f, {}).items() if k != "frame"}
            emit(("frame", f, list(pos), list(pos.values()), _clean_stats(st)))
            n.frames_done += 1
        backend.set_state(state, last)
        n.current = last
    else:
        pos = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in backend.initial_positions().items()}
        cache.write_frame(s.frame_start, pos)
        cache.write_state(s.frame_start, backend.get_state())
        emit(("frame", s.frame_start, list(pos), list(pos.values()), {}))
        n.frames_done += 1
    first = True
    while backend.frame < s.frame_end:
        if should_stop():
            raise JobCancelled()
        if not first or warm:
            progress("solving", (backend.frame - s.frame_start) / span, f"frame {backend.frame + 1}")
        r = backend.advance()
        n.current = r.frame
        pos = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in r.positions.items()}
        stats = _clean_stats(r.stats)
        cache.write_frame(r.frame, pos)
        cache.write_state(r.frame, backend.get_state())
        stats_rows.append({"frame": r.frame, **stats})
        cache.write_stats(stats_rows)
        emit(("frame", r.frame, list(pos), list(pos.values()), stats))
        n.frames_done += 1
        if first and not warm:
            kernel_cache.mark_warm(s.backend)
        first = False


def _row_frame(row: dict, default: int) -> int:
    """The frame number of a stats row (``default`` when the row has none or a bad one)."""
    f = row.get("frame", default)
    return f if type(f) is int else default


def exit_with_parent() -> None:
    """In a job's child process: exit at once when the server process dies (kill -9, crash).

    Without this an orphaned job kept baking and kept its folder's lock, so a new server's
    Resume into that folder was refused as busy until the orphan finished. The exit is as
    abrupt as a kill: every finished frame is already on disk (written to a temporary file and
    renamed), a half-written temporary is removed by the next Resume, and the kernel releases
    the folder's lock. Waits on multiprocessing's parent sentinel (no polling)."""
    import multiprocessing
    import os
    import threading
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        parent.join()          # returns when the parent's end of the sentinel pipe closes
        os._exit(75)

    threading.Thread(target=watch, name="clearance-exit-with-server", daemon=True).start()


def child_main(scene: Scene, cache_dir: str, resume: bool, conn, cancel_event) -> None:
    """Entry point of the job's child process: run the job, send events through ``conn``."""
    exit_with_parent()
    try:
        run_job(scene, cache_dir, resume, conn.send, cancel_event.is_set)
    finally:
        try:
            conn.close()
        except OSError:
            pass
