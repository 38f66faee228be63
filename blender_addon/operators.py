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
from protocol.keys import KeyFileError
from protocol.scene import SceneError

from . import preferences, server_process, solver_launch
from .solver_setup import DONE as SETUP_DONE, FAILED as SETUP_FAILED, SolverSetup
from .bake_session import CANCELLED, DONE, BakeSession, error_text
from .export import export_scene, role_objects
from .writeback import CACHE_MODIFIER, cache_dir, check_cache_paths, claim_cache_dir, free_object, free_server_cache

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
    return server_process.ensure_local_server(solver_launch.resolve(prefs)).address, None


def uses_local_server(context) -> bool:
    """True when baking in this scene goes to the embedded local server (no address override, not
    a remote server)."""
    prefs = preferences.get(context)
    return not context.scene.clearance.server_address and not (prefs is not None and prefs.server_mode == "REMOTE")


def pending_setup(context) -> Optional[SolverSetup]:
    """What a bake must wait for before the local server can start: installing the solver's
    dependencies and compiling its kernels ahead (solver_launch). None when nothing is needed (a
    remote server, a running local server, or a ready solver). Raises RuntimeError when the
    extension cannot run a local server at all."""
    if not uses_local_server(context) or server_process.local_server() is not None:
        return None
    return solver_launch.setup_for(solver_launch.resolve(preferences.get(context)))


def run_setup_blocking(setup: SolverSetup) -> None:
    """Run ``setup`` to its end, printing each status (``blender -b``); RuntimeError when it fails."""
    state = setup.run()
    solver_launch.finish(setup)
    if state != SETUP_DONE:
        raise RuntimeError(setup.status_text())


def server_public_key(context) -> Optional[str]:
    """The remote server's CurveZMQ public key from the preferences (its 40 characters, or the
    path of its server.key file), None for the embedded local server (loopback, unencrypted)."""
    prefs = preferences.get(context)
    key = (getattr(prefs, "server_key", "") or "").strip() if prefs else ""
    remote = bool(context.scene.clearance.server_address) or (prefs is not None and prefs.server_mode == "REMOTE")
    if not key or not remote:
        return None
    return key if len(key) == 40 else bpy.path.abspath(key)


def client_secret_key(context) -> Optional[str]:
    """The path of this machine's CurveZMQ secret key file from the preferences (Client Key, for a
    server with --authorized-keys), None when unset: the client then uses $CLEARANCE_CLIENT_KEY_FILE
    or a fresh key. Only used together with a server public key."""
    prefs = preferences.get(context)
    path = (getattr(prefs, "client_key", "") or "").strip() if prefs else ""
    return bpy.path.abspath(path) if path else None


def _key_hint(problem: str) -> str:
    """The preference an encrypted-handshake problem points to."""
    return "Client Key" if "does not admit this client's key" in problem else "Server Public Key"


def connect(context, protocol_version: Optional[tuple] = None) -> Client:
    """A connected client. Raises ServerUnreachable / VersionMismatch / RemoteError with clear messages.
    ``protocol_version`` overrides the version announced (tests of the mismatch message)."""
    address, secret = server_connection(context)
    prefs = preferences.get(context)
    kw = {"protocol_version": protocol_version} if protocol_version else {}
    server_key, client_key = server_public_key(context), client_secret_key(context)
    try:
        client = Client(address, secret=secret, timeout=prefs.timeout if prefs else 5.0,
                        client_name="clearance-blender", server_key=server_key,
                        client_key=client_key if server_key else None, **kw)
    except KeyFileError as exc:
        where = "Client Key" if client_key and client_key in str(exc) else "Server Public Key"
        raise KeyFileError(f"{exc} (Preferences > Add-ons > Clearance > {where})") from None
    try:
        client.connect()
    except ServerUnreachable:
        problem = client.handshake_problem()   # reached, but encryption on one side only or a wrong key
        client.close()
        if problem:
            raise ServerUnreachable(f"Cannot connect to the Clearance server: {problem} (Preferences > Add-ons > "
                                    f"Clearance > {_key_hint(problem)})") from None
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
    _setup: Optional[SolverSetup] = None

    @classmethod
    def poll(cls, context) -> bool:
        return context.scene is not None and not context.scene.clearance.is_baking

    def _prepare(self, context) -> Optional[BakeSession]:
        scene = context.scene
        try:
            export = export_scene(context)
            folder = cache_dir(scene)
            check_cache_paths(export.scene.simulated())
            claim_cache_dir(folder)
            # The previous bake stays until the new job's first frame arrives (BakeSession): a scene
            # the server refuses keeps it playable. The server clears its own cache for a fresh bake.
            client = connect(context)
        except SceneError as exc:
            _report_error(self, scene, str(exc))
            return None
        except (ServerUnreachable, VersionMismatch, KeyFileError, RuntimeError, OSError) as exc:
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
        except OSError as exc:   # the cache folder cannot be created (permissions, a file in the way ...)
            _report_error(self, scene, f"Cannot use the Cache Folder {folder}: {exc.strerror or exc}; choose another "
                                       "folder (Physics > Clearance Bake > Settings > Cache Folder)")
            return None
        return session

    def _finish(self, context, session: BakeSession) -> set:
        result, level, text = outcome(session)
        if level == "ERROR":
            return _report_error(self, context.scene, text)
        self.report({level}, text)
        return result

    def execute(self, context) -> set:
        blocking = bpy.app.background or context.window is None
        try:
            # First bake after installing the extension: install the solver, compile its kernels.
            setup = pending_setup(context)
            if setup is not None and blocking:
                run_setup_blocking(setup)
        except (RuntimeError, OSError) as exc:
            return _report_error(self, context.scene, str(exc))
        if setup is not None and not blocking:
            return self._start_modal(context, None, setup)
        session = self._prepare(context)
        if session is None:
            return {"CANCELLED"}
        if blocking:
            session.run()
            return self._finish(context, session)
        return self._start_modal(context, session)

    def _start_modal(self, context, session: Optional[BakeSession], setup: Optional[SolverSetup] = None) -> set:
        wm = context.window_manager
        self._session, self._setup = session, setup
        if session is not None:
            register_ui_session(context.scene, session)
        else:
            wait_for_setup(context.scene, setup)
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        wm.progress_begin(0.0, 1.0)
        return {"RUNNING_MODAL"}

    def _end_modal(self, context) -> None:
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()

    def modal(self, context, event) -> set:
        if self._setup is not None:
            return self._modal_setup(context, event)
        session = self._session
        if modal_event(context, session, event.type, event.value):
            return {"PASS_THROUGH"}
        self._end_modal(context)
        return self._finish(context, session)

    def _modal_setup(self, context, event) -> set:
        """While the solver installs / compiles: show its progress; when done, start the bake."""
        setup = self._setup
        if setup_event(context, setup, event.type, event.value):
            return {"PASS_THROUGH"}
        self._setup = None
        level, text = setup_outcome(context, setup)
        if level is not None:
            self._end_modal(context)
            if level == "ERROR":
                return _report_error(self, context.scene, text)
            self.report({level}, text)
            return {"CANCELLED"}
        session = self._prepare(context)
        if session is None:
            self._end_modal(context)
            return {"CANCELLED"}
        self._session = session
        register_ui_session(context.scene, session)
        return {"PASS_THROUGH"}


def wait_for_setup(scene: bpy.types.Scene, setup: SolverSetup) -> None:
    """A UI bake starts waiting for the solver setup: the panel shows its progress and Cancel."""
    st = scene.clearance
    st.is_baking, st.last_error, st.status, st.progress = True, "", setup.status_text(), setup.fraction


def setup_event(context, setup: SolverSetup, event_type: str, event_value: str) -> bool:
    """What a UI bake waiting for the solver setup does with one event: Esc cancels the setup, a TIMER
    event shows its progress in the panel and the status bar. False once the setup has ended."""
    if event_type == "ESC" and event_value == "PRESS":
        setup.cancel()
    if event_type != "TIMER":
        return True
    st = context.scene.clearance
    st.status, st.progress = setup.status_text(), setup.fraction
    if context.window_manager is not None:
        context.window_manager.progress_update(setup.fraction)
    if context.workspace is not None:
        context.workspace.status_text_set(f"Clearance: {st.status}  (Esc to cancel)" if setup.poll() else None)
    solver_launch.redraw()
    return setup.poll()


def setup_outcome(context, setup: SolverSetup) -> tuple:
    """(report level, text) of a setup that ended before a UI bake; (None, "") when the bake can start."""
    st = context.scene.clearance
    st.is_baking = False
    solver_launch.finish(setup)
    if setup.state == SETUP_DONE:
        return None, ""
    if setup.state == SETUP_FAILED:
        return "ERROR", setup.status_text()
    st.status = "Solver setup cancelled"
    return "WARNING", "Clearance: solver setup cancelled; press Bake to start it again"


class CLEARANCE_OT_cancel(bpy.types.Operator):
    """Stop the running bake; the frames already baked are kept"""

    bl_idname = "clearance.cancel"
    bl_label = "Cancel Bake"

    @classmethod
    def poll(cls, context) -> bool:
        setup = solver_launch.current_setup()
        return context.scene is not None and (context.scene.name in _sessions or (setup is not None and setup.poll()))

    def execute(self, context) -> set:
        session = _sessions.get(context.scene.name)
        if session is not None:
            session.cancel()
        else:   # a bake waiting for the solver setup: stop the setup, the bake ends with it
            solver_launch.current_setup().cancel()
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
            folder = None  # unsaved file with a relative folder (or a file in the way): nothing was written there
        if folder:
            try:
                claim_cache_dir(folder, claim=False)
            except SceneError as exc:   # another .blend's caches: not this file's to remove
                return _report_error(self, scene, str(exc))
        objs = set(role_objects(scene)) | {o for o in scene.objects if o.modifiers.get(CACHE_MODIFIER)}
        for obj in objs:
            free_object(obj, folder)
        left = free_server_cache(folder) if folder else []
        st = scene.clearance
        st.progress, st.frames_baked, st.status, st.last_error, st.job_id = 0.0, 0, "", "", ""
        st.last_warning = ""
        if left:   # only the bake's own files are removed: say what stays and why
            self.report({"INFO"}, f"Free Bake kept {len(left)} file(s) the bake did not write, first {left[0]}")
        return {"FINISHED"}


class CLEARANCE_OT_server_start(bpy.types.Operator):
    """Start the local solver server (loopback only)"""

    bl_idname = "clearance.server_start"
    bl_label = "Start Server"

    def execute(self, context) -> set:
        try:
            launch = solver_launch.resolve(preferences.get(context))
            setup = solver_launch.setup_for(launch)
            if setup is not None:
                if not (bpy.app.background or context.window is None):
                    solver_launch.watch_in_ui(setup, then=lambda: _start_quietly(launch))
                    self.report({"INFO"}, "Clearance: preparing the solver first (progress in the Clearance Bake "
                                          "panel); the server starts when it is ready")
                    return {"FINISHED"}
                run_setup_blocking(setup)
            server = server_process.ensure_local_server(launch)
        except (RuntimeError, OSError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Clearance server listening on {server.address}")
        return {"FINISHED"}


def _start_quietly(launch) -> None:
    """Start the local server after a UI setup (errors show when a bake connects)."""
    try:
        server_process.ensure_local_server(launch)
    except RuntimeError as exc:
        print(f"clearance: {exc}")


class CLEARANCE_OT_install_solver(bpy.types.Operator):
    """Install the solver's dependencies into the extension's folder (about 100 MB from pypi.org, or the Wheel
    Folder) and compile its kernels, in the background. The first Bake does this by itself"""

    bl_idname = "clearance.install_solver"
    bl_label = "Install Solver"

    reinstall: BoolProperty(name="Reinstall", default=False,
                            description="Remove the installed dependencies first and install them again")

    @classmethod
    def poll(cls, context) -> bool:
        setup = solver_launch.current_setup()
        return setup is None or not setup.poll()

    def execute(self, context) -> set:
        try:
            launch = solver_launch.resolve(preferences.get(context))
        except RuntimeError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        launch.compile_ahead = True   # also with Server Python or a development Python: compile ahead
        if self.reinstall and launch.deps:
            server_process.stop_local_server()   # it runs from the folder about to be replaced
            solver_launch.remove_installed(launch)
        setup = solver_launch.setup_for(launch, force=True)
        if bpy.app.background or context.window is None:
            try:
                run_setup_blocking(setup)
            except RuntimeError as exc:
                self.report({"ERROR"}, str(exc))
                return {"CANCELLED"}
            self.report({"INFO"}, "Clearance: solver ready")
            return {"FINISHED"}
        solver_launch.watch_in_ui(setup)
        self.report({"INFO"}, "Clearance: installing the solver in the background (progress in the preferences "
                              "and the Clearance Bake panel)")
        return {"FINISHED"}


class CLEARANCE_OT_cancel_setup(bpy.types.Operator):
    """Stop installing the solver (nothing half-installed is kept)"""

    bl_idname = "clearance.cancel_setup"
    bl_label = "Cancel Install"

    @classmethod
    def poll(cls, context) -> bool:
        setup = solver_launch.current_setup()
        return setup is not None and setup.poll()

    def execute(self, context) -> set:
        solver_launch.current_setup().cancel()
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
            CLEARANCE_OT_server_stop, CLEARANCE_OT_install_solver, CLEARANCE_OT_cancel_setup)


def register() -> None:
    for c in _classes:
        bpy.utils.register_class(c)


def unregister() -> None:
    stop_running_sessions()
    for c in _classes:
        bpy.utils.unregister_class(c)
