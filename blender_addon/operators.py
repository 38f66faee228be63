"""Operators: bake (modal in the UI, blocking in background mode), cancel, free bake,
start/stop the local server.

``clearance.bake`` in the UI returns at once and a window-manager timer polls the server
(every 0.1 s): frames are written as they arrive, the panel and the status bar show progress,
Esc cancels. Under ``bpy.app.background`` (``blender -b``, the bpy module) timers never fire,
so the same operator runs :meth:`BakeSession.run` to completion and returns FINISHED: a farm
can bake with ``blender -b file.blend --python-expr "import bpy; bpy.ops.clearance.bake()"``.

The modal operator only forwards its events: :func:`modal_event` (what one TIMER or Esc event
does), :func:`tick` (one timer tick) and :func:`outcome` (the report of a finished session) hold
the logic, so tests drive the UI path headless with the event's type and value, a real session
and a real server (Blender cannot construct Event objects, and timers never fire without a UI).
"""
from __future__ import annotations

from typing import Optional

import bpy
from bpy.props import BoolProperty

from protocol.client import Client
from protocol.errors import RemoteError, ServerUnreachable, VersionMismatch
from protocol.scene import SceneError

from . import preferences, server_process
from .bake_session import CANCELLED, DONE, BakeSession, error_text
from .export import export_scene, role_objects
from .writeback import CACHE_MODIFIER, cache_dir, check_cache_paths, free_object, free_server_cache

_sessions: dict = {}  # scene name -> running BakeSession (UI mode)


def server_connection(context) -> tuple:
    """(address, secret) of the server to use: the scene's address, else the preferences
    (remote address, or the embedded local server, started when needed)."""
    prefs = preferences.get(context)
    s = context.scene.clearance
    secret = (prefs.secret or None) if prefs else None
    if s.server_address:
        return s.server_address, secret
    if prefs is not None and prefs.server_mode == "REMOTE":
        return prefs.remote_address, secret
    python = bpy.path.abspath(prefs.python_executable) if prefs and prefs.python_executable else \
        preferences.default_python()
    if not python:
        raise RuntimeError("No Python can run the local server: set Preferences > Add-ons > Clearance > Server "
                           "Python to a Python where 'pip install clearance' was run, or use a remote server")
    return server_process.ensure_local_server(python).address, None


def server_public_key(context) -> Optional[str]:
    """The remote server's CurveZMQ public key from the preferences (its 40 characters, or the
    path of its server.key file), None for the embedded local server (loopback, unencrypted)."""
    prefs = preferences.get(context)
    key = (getattr(prefs, "server_key", "") or "").strip() if prefs else ""
    remote = bool(context.scene.clearance.server_address) or (prefs is not None and prefs.server_mode == "REMOTE")
    if not key or not remote:
        return None
    return key if len(key) == 40 else bpy.path.abspath(key)


def connect(context, protocol_version: Optional[tuple] = None) -> Client:
    """A connected client. Raises ServerUnreachable / VersionMismatch / RemoteError with clear messages.
    ``protocol_version`` overrides the version announced (tests of the mismatch message)."""
    address, secret = server_connection(context)
    prefs = preferences.get(context)
    kw = {"protocol_version": protocol_version} if protocol_version else {}
    client = Client(address, secret=secret, timeout=prefs.timeout if prefs else 5.0, client_name="clearance-blender",
                    server_key=server_public_key(context), **kw)
    try:
        client.connect()
    except ServerUnreachable:
        problem = client.handshake_problem()   # reached, but encryption on one side only or a wrong key
        client.close()
        if problem:
            raise ServerUnreachable(f"Cannot connect to the Clearance server: {problem} (Preferences > Add-ons > "
                                    "Clearance > Server Public Key)") from None
        raise ServerUnreachable(f"Cannot reach the Clearance server at {address}: start it (Physics > Clearance Bake "
                                f"> Start Server) or fix the address (Preferences > Add-ons > Clearance)") from None
    except VersionMismatch as exc:
        client.close()
        raise VersionMismatch(f"{exc}. Install the add-on and the server from the same Clearance release.") from None
    except Exception:
        client.close()
        raise
    return client


def register_ui_session(scene: bpy.types.Scene, session: BakeSession) -> None:
    """Make ``session`` the scene's running UI bake (what Cancel and add-on disable act on)."""
    _sessions[scene.name] = session


def ui_session(scene: bpy.types.Scene) -> Optional[BakeSession]:
    """The scene's running UI bake, if any."""
    return _sessions.get(scene.name)


def tick(context, session: BakeSession) -> bool:
    """One timer tick of a UI bake: handle what has arrived, update the progress bar, the status
    bar text and the panels. True while the bake runs; when it ends, the session is unregistered."""
    running = session.poll(0.0)
    wm = context.window_manager
    if wm is not None:
        wm.progress_update(context.scene.clearance.progress)
    if context.workspace is not None:
        context.workspace.status_text_set(f"Clearance: {session.message}  (Esc to cancel)" if running else None)
    for area in context.screen.areas if context.screen else ():
        if area.type in {"PROPERTIES", "VIEW_3D"}:
            area.tag_redraw()
    if not running:
        _sessions.pop(context.scene.name, None)
    return running


def modal_event(context, session: BakeSession, event_type: str, event_value: str) -> bool:
    """What the modal bake does with one event (``event.type``, ``event.value``): Esc pressed
    cancels (the session ends when the server confirms), a TIMER event runs :func:`tick`.
    False once a tick found the bake ended (the operator then finishes)."""
    if event_type == "ESC" and event_value == "PRESS":
        session.cancel()
    if event_type != "TIMER":
        return True   # the next tick notices the end and finishes
    return tick(context, session)


def outcome(session: BakeSession) -> tuple:
    """(operator result, report level, message) of a session that has ended."""
    if session.state == DONE:
        text = f"Clearance: baked frames {session.frame_start}–{session.frame_end}"
        if session.warning:   # frames whose solver did not converge: named, with the likely cause
            return {"FINISHED"}, "WARNING", f"{text}, but {session.warning}"
        return {"FINISHED"}, "INFO", text
    if session.state == CANCELLED:
        return {"FINISHED"}, "WARNING", session.message
    return {"CANCELLED"}, "ERROR", session.error or "the bake failed"


def _report_error(op, scene, text: str) -> set:
    scene.clearance.last_error = text
    scene.clearance.status = "Error"
    op.report({"ERROR"}, text)
    return {"CANCELLED"}


class CLEARANCE_OT_bake(bpy.types.Operator):
    """Bake every object with a Clearance role (Esc cancels; finished frames are kept)"""

    bl_idname = "clearance.bake"
    bl_label = "Bake"
    bl_options = {"REGISTER"}

    resume: BoolProperty(name="Resume", default=False,
                         description="Continue the cached bake from its last frame instead of starting over")

    _timer = None
    _session: Optional[BakeSession] = None

    @classmethod
    def poll(cls, context) -> bool:
        return context.scene is not None and not context.scene.clearance.is_baking

    def _prepare(self, context) -> Optional[BakeSession]:
        scene = context.scene
        try:
            export = export_scene(context)
            folder = cache_dir(scene)
            check_cache_paths(export.scene.simulated())
            # The previous bake stays until the new job's first frame arrives (BakeSession): a scene
            # the server refuses keeps it playable. The server clears its own cache for a fresh bake.
            client = connect(context)
        except SceneError as exc:
            _report_error(self, scene, str(exc))
            return None
        except (ServerUnreachable, VersionMismatch, RuntimeError, OSError) as exc:
            _report_error(self, scene, str(exc))
            return None
        session = BakeSession(scene, export, client, folder, scene.clearance.output, self.resume)
        try:
            session.start()
        except RemoteError as exc:
            _report_error(self, scene, error_text(exc.message, exc.obj))
            return None
        except (ServerUnreachable, VersionMismatch) as exc:   # VersionMismatch: Fast asked of a 1.0 server
            _report_error(self, scene, str(exc))
            return None
        return session

    def _finish(self, context, session: BakeSession) -> set:
        result, level, text = outcome(session)
        if level == "ERROR":
            return _report_error(self, context.scene, text)
        self.report({level}, text)
        return result

    def execute(self, context) -> set:
        session = self._prepare(context)
        if session is None:
            return {"CANCELLED"}
        if bpy.app.background or context.window is None:
            session.run()
            return self._finish(context, session)
        return self._start_modal(context, session)

    def _start_modal(self, context, session: BakeSession) -> set:
        wm = context.window_manager
        self._session = session
        register_ui_session(context.scene, session)
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        wm.progress_begin(0.0, 1.0)
        return {"RUNNING_MODAL"}

    def modal(self, context, event) -> set:
        session = self._session
        if modal_event(context, session, event.type, event.value):
            return {"PASS_THROUGH"}
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        return self._finish(context, session)


class CLEARANCE_OT_cancel(bpy.types.Operator):
    """Stop the running bake; the frames already baked are kept"""

    bl_idname = "clearance.cancel"
    bl_label = "Cancel Bake"

    @classmethod
    def poll(cls, context) -> bool:
        return context.scene is not None and context.scene.name in _sessions

    def execute(self, context) -> set:
        _sessions[context.scene.name].cancel()
        return {"FINISHED"}


class CLEARANCE_OT_free_bake(bpy.types.Operator):
    """Remove the baked caches: Mesh Cache modifiers, shape keys, particle objects and cache files"""

    bl_idname = "clearance.free_bake"
    bl_label = "Free Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context) -> bool:
        return context.scene is not None and not context.scene.clearance.is_baking

    def execute(self, context) -> set:
        scene = context.scene
        try:
            folder = cache_dir(scene)
        except SceneError:
            folder = None  # unsaved file with a relative folder: nothing was written there
        objs = set(role_objects(scene)) | {o for o in scene.objects if o.modifiers.get(CACHE_MODIFIER)}
        for obj in objs:
            free_object(obj, folder)
        if folder:
            free_server_cache(folder)
        st = scene.clearance
        st.progress, st.frames_baked, st.status, st.last_error, st.job_id = 0.0, 0, "", "", ""
        st.last_warning = ""
        return {"FINISHED"}


class CLEARANCE_OT_server_start(bpy.types.Operator):
    """Start the local solver server (loopback only)"""

    bl_idname = "clearance.server_start"
    bl_label = "Start Server"

    def execute(self, context) -> set:
        prefs = preferences.get(context)
        python = bpy.path.abspath(prefs.python_executable) if prefs and prefs.python_executable else \
            preferences.default_python()
        try:
            server = server_process.ensure_local_server(python)
        except RuntimeError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Clearance server listening on {server.address}")
        return {"FINISHED"}


class CLEARANCE_OT_server_stop(bpy.types.Operator):
    """Stop the local solver server"""

    bl_idname = "clearance.server_stop"
    bl_label = "Stop Server"

    @classmethod
    def poll(cls, context) -> bool:
        return server_process.local_server() is not None

    def execute(self, context) -> set:
        server_process.stop_local_server()
        return {"FINISHED"}


def stop_running_sessions() -> None:
    """Cancel and close every UI bake (called when the add-on is disabled)."""
    for session in list(_sessions.values()):
        session.cancel()
        session.close()
    _sessions.clear()


_classes = (CLEARANCE_OT_bake, CLEARANCE_OT_cancel, CLEARANCE_OT_free_bake, CLEARANCE_OT_server_start,
            CLEARANCE_OT_server_stop)


def register() -> None:
    for c in _classes:
        bpy.utils.register_class(c)


def unregister() -> None:
    stop_running_sessions()
    for c in _classes:
        bpy.utils.unregister_class(c)
