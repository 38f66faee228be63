"""One bake from submit to the last frame, independent of how it is driven.

The modal operator calls :meth:`BakeSession.poll` from a window-manager timer; background
mode (``blender -b``, the bpy module, where timers never fire) calls :meth:`BakeSession.run`,
a blocking loop over the same :meth:`poll`. Tests drive either directly. Every frame is written
to Blender (``writeback.BodyCache``) the moment it arrives, so a cancelled, failed or crashed
bake keeps everything it finished; ``resume=True`` continues a cache where it stopped.

A fresh bake replaces the previous one only when the server's first frame arrives, i.e. once the
solver has accepted the scene: a scene it refuses (objects intersecting at the start frame, a
backend error while building) leaves the previous bake's caches in place and playable.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Optional, TextIO

import bpy

from protocol.cache_layout import SERVER_DIR
from protocol.convergence import ConvergenceReport
from protocol.errors import RemoteError, ServerUnreachable
from protocol.messages import Done, Error, Frame, Progress

from .export import ExportResult
from .writeback import BodyCache, free_object

RUNNING, DONE, CANCELLED, FAILED = "running", "done", "cancelled", "failed"


def error_text(message: str, obj: Optional[str]) -> str:
    """The server's message, prefixed with the object's name when it does not already say it."""
    if obj and obj not in message:
        return f"{obj}: {message}"
    return message


class BakeSession:
    """Submit ``export.scene`` with ``client`` and write every returned frame into ``folder``.

    ``output`` is "PC2" or "SHAPE_KEYS". Status goes to ``scene.clearance`` (progress,
    status, last_error, frames_baked, job_id, is_baking) for the panel.
    """

    def __init__(self, scene: bpy.types.Scene, export: ExportResult, client, folder: str,
                 output: str = "PC2", resume: bool = False):
        self.scene = scene
        self.export = export
        self.client = client
        self.folder = folder
        self.output = output
        self.resume = resume
        self.job_id: Optional[str] = None
        self.state = RUNNING
        self.error = ""
        self.message = ""
        self.last_frame: Optional[int] = None
        s = export.scene.settings
        self.frame_start, self.frame_end = s.frame_start, s.frame_end
        self.last_news = time.monotonic()  # when the last message of this job arrived (stall detection)
        self.compiling = ""  # the server's "compiling kernels" notice, shown until the first solved frame
        self.convergence = ConvergenceReport()  # solved frames whose solver steps missed their tolerance
        self.warning = ""    # the bake's warning (frames that did not converge), set when it ends
        self._log: Optional[TextIO] = None   # where run() echoes each status (blender -b stdout)
        self._echoed = ""
        self._replaced = resume  # a resumed bake keeps its cache; a fresh one replaces it at its first frame
        self.caches = {b.name: BodyCache(export.objects[b.name], b.role, export.matrices[b.name], folder,
                                         s.frame_start, output, resume, radius=0.5 * b.material.particle_spacing,
                                         rest=b.vertices, prescribed=b.animation is not None)
                       for b in export.scene.simulated()}

    # -- status shown in the panel ----------------------------------------------------------
    def _status(self, message: str, progress: Optional[float] = None) -> None:
        self.message = message
        self._echo(message)
        st = self.scene.clearance
        st.status = message
        if progress is not None:
            st.progress = min(max(progress, 0.0), 1.0)

    def _fail(self, text: str) -> None:
        self.state = FAILED
        self.error = text
        self.scene.clearance.last_error = text
        self._status(f"Failed: {text}")

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> str:
        """Submit the scene; returns the job id. Nothing is written until the first frame arrives.

        Raises RemoteError when the server refuses the scene at submit (e.g. an invalid field);
        refusals found while the job builds the solver arrive later as a failed Done.
        """
        st = self.scene.clearance
        st.last_error = ""
        st.last_warning = ""
        os.makedirs(self.folder, exist_ok=True)
        self._status("Submitting…", 0.0)
        try:
            self.job_id = self.client.submit(self.export.scene, os.path.join(self.folder, SERVER_DIR), self.resume)
        except Exception:
            self.close()
            raise
        st.job_id = self.job_id
        st.is_baking = True
        self._status(f"Baking frames {self.frame_start}–{self.frame_end}", 0.0)
        return self.job_id

    def handle(self, ev) -> None:
        """Apply one server message (Frame, Progress, Done, Error)."""
        if getattr(ev, "job_id", None) not in (None, self.job_id):
            return
        self.last_news = time.monotonic()
        if isinstance(ev, Frame):
            self._replace_previous_bake()
            for name, pos in zip(ev.names, ev.positions):
                cache = self.caches.get(name)
                if cache is not None:
                    cache.write(int(ev.frame), pos)
            self.last_frame = int(ev.frame)
            if self.last_frame != self.frame_start:
                self.convergence.add(self.last_frame, ev.stats)
            span = max(self.frame_end - self.frame_start, 1)
            self.scene.clearance.frames_baked = self.last_frame - self.frame_start + 1
            st = ev.stats or {}
            extra = ""
            if "newton_iterations" in st:
                extra = f" ({st.get('newton_iterations', 0)} Newton it., {st.get('contacts', 0)} contacts, " \
                        f"{float(st.get('seconds', 0.0)):.2f} s)"
            if self.last_frame > self.frame_start:
                self.compiling = ""
            if self.compiling:  # the start frame is back but the first solved frame still compiles
                self._status(f"{self.compiling} (start frame received)", 0.0)
            else:
                self._status(f"Frame {self.last_frame} of {self.frame_end}{extra}",
                             (self.last_frame - self.frame_start) / span)
        elif isinstance(ev, Progress):
            if ev.message.lower().startswith(ev.state):   # "compiling solver kernels 12/~58: ..."
                text = ev.message[:1].upper() + ev.message[1:]
            else:
                text = f"{ev.state.capitalize()}" + (f": {ev.message}" if ev.message else "")
            if ev.state == "compiling" and ev.message:
                # The server's first-bake notice (numba compiles the kernels once, minutes on a slow
                # machine): it stays in the panel until the first solved frame, whatever progress
                # or heartbeat arrives in between, so the bake never looks stalled.
                self.compiling = text
            self._status(self.compiling or text, None if ev.state == "solving" else ev.fraction)
        elif isinstance(ev, Error):
            # The server follows a job's Error with Done(failed); the session ends here (poll stops
            # reading), so close now or the panel would keep showing a bake and block the next one.
            self._fail(error_text(ev.message, ev.obj))
            self.close()
        elif isinstance(ev, Done):
            if ev.state == "done":
                self.state = DONE
                self.warning = "; ".join(list(self.export.warnings) + [self.convergence.summary() or ""]).strip("; ")
                self.scene.clearance.last_warning = self.warning
                self._status(f"Baked {self.frame_start}–{self.frame_end}"
                             + (f" with a warning: {self.warning}" if self.warning else ""), 1.0)
            elif ev.state == "cancelled":
                self.state = CANCELLED
                self._status(f"Cancelled after frame {self.last_frame if self.last_frame is not None else self.frame_start}; "
                             f"finished frames are kept (Resume continues)")
            else:
                self._fail(error_text(ev.message or f"the bake ended in state {ev.state}", None)
                           if not self.error else self.error)
            self.close()

    def _replace_previous_bake(self) -> None:
        """Remove the previous bake of the exported objects (modifiers, keys, particles, .pc2) once,
        when a fresh bake's first frame arrives: the server has accepted the scene by then."""
        if self._replaced:
            return
        self._replaced = True
        for obj in self.export.objects.values():
            free_object(obj, self.folder)

    def poll(self, timeout: float = 0.0) -> bool:
        """Handle every message that has arrived (waiting at most ``timeout`` s); True while running."""
        if self.state != RUNNING:
            return False
        try:
            for ev in self.client.poll(timeout):
                self.handle(ev)
                if self.state != RUNNING:
                    break
        except Exception as exc:  # a write failed, the server vanished ...: keep what was written
            self._fail(f"{type(exc).__name__}: {exc}")
            self._cancel_quietly()
            self.close()
        return self.state == RUNNING

    def run(self, stall_timeout: float = 600.0, log: Optional[TextIO] = sys.stdout) -> str:
        """Block until the job ends (background mode); returns the final state.

        Every new status text (compile progress, each frame, the end, a warning) is printed to
        ``log`` (stdout: the only display of ``blender -b``; None prints nothing).

        Fails when the server sends nothing for ``stall_timeout`` seconds. The server repeats its
        last progress every second while a long frame (or the first compilation) runs, so any
        message counts as news, not only a new frame or a new status text.
        """
        self.last_news = time.monotonic()
        # blender -b has no panel: its stdout shows every status the panel would (each compiled
        # kernel "compiling solver kernels 12/~58", every frame, the end and any warning)
        self._log = log
        if log is not None and self.message:
            self._echo(self.message)
        try:
            while self.state == RUNNING:
                self.poll(0.25)
                if self.state == RUNNING and time.monotonic() - self.last_news > stall_timeout:
                    self._fail(f"no news from the server for {stall_timeout:.0f} s")
                    self._cancel_quietly()
                    self.close()
        finally:
            self._log = None
        return self.state

    def _echo(self, message: str) -> None:
        """Print a new status line to the run() log (once per distinct consecutive status)."""
        if self._log is not None and message != self._echoed:
            self._echoed = message
            print(f"clearance: {message}", file=self._log, flush=True)

    def cancel(self) -> None:
        """Ask the server to stop; the session ends when its Done(cancelled) arrives.

        A Cancel the server refuses because it forgot this connection (code handshake or auth)
        is sent again after a new Hello. A Cancel that still fails is never taken for a cancel:
        the job may be running on, so the bake fails with a message saying so (a later Bake into
        the same folder would otherwise meet a surprising ``busy``)."""
        if self.state != RUNNING or not self.job_id:
            return
        try:
            try:
                self.client.cancel(self.job_id)
            except RemoteError as exc:
                if exc.code not in ("handshake", "auth"):
                    raise
                self.client.connect()
                self.client.cancel(self.job_id)
            self._status("Cancelling…")
        except (ServerUnreachable, RemoteError) as exc:
            reason = exc.message if isinstance(exc, RemoteError) else str(exc)
            self._fail(f"could not cancel job {self.job_id[:8]} ({reason}); it may still be baking into "
                       f"{self.folder}, and a new bake there is refused as busy until it ends")
            self.close()

    def _cancel_quietly(self) -> None:
        try:
            if self.job_id:
                self.client.cancel(self.job_id)
        except Exception:
            pass

    def close(self) -> None:
        """Close the cache files and the connection; the panel stops showing a bake."""
        for c in self.caches.values():
            c.close()
        try:
            self.client.close()
        except Exception:
            pass
        self.scene.clearance.is_baking = False
