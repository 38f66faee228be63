"""Getting the solver ready to run: which Python runs the server, with which folders on its path,
and the background job that installs the dependencies and compiles the kernels ahead.

:class:`Launch` says how the local server starts: a Python, the folders put first on its
``PYTHONPATH`` (the installed dependencies, then the solver's sources shipped in the extension) and
the state folder of its kernel cache. :class:`SolverSetup` runs, in a background thread, the steps
that make a Launch ready, each a subprocess whose output lines become progress:

1. ``pip install --target`` of the dependencies (:mod:`solver_deps`), only when the Launch needs them;
2. ``python -m solver_server.runtime.warmup --if-cold``: compile the kernels ahead (a no-op once done).

The panel polls it (:meth:`SolverSetup.poll` fields ``fraction``, ``message``); ``blender -b`` calls
:meth:`SolverSetup.run`, which blocks and prints each new status line. Plain Python, no bpy.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, TextIO

from . import solver_deps

RUNNING, DONE, FAILED, CANCELLED = "running", "done", "failed", "cancelled"
_KERNEL = re.compile(r"compiling solver kernels (\d+)(?:/~(\d+))?")


@dataclass
class Launch:
    """How to start the local server.

    ``python``: the interpreter. ``paths``: folders put first on its PYTHONPATH, in order.
    ``deps``: the folder :mod:`solver_deps` installs into when this Launch needs it (else "").
    ``state_dir``: CLEARANCE_STATE_DIR for the server (its kernel cache), "" to keep the default.
    ``isolated``: no user site-packages and no PIP_* surprises (:func:`solver_deps.isolated_env`).
    ``wheel_folder``: an offline folder of wheels for the install ("" installs from PyPI).
    ``compile_ahead``: run the warm-up before the first server start.
    ``requirements``: what to install into ``deps`` (:data:`solver_deps.REQUIREMENTS`).
    """

    python: str
    paths: list = field(default_factory=list)
    deps: str = ""
    state_dir: str = ""
    isolated: bool = False
    wheel_folder: str = ""
    compile_ahead: bool = False
    requirements: tuple = solver_deps.REQUIREMENTS

    def env(self, base: Optional[dict] = None) -> dict:
        """The environment of the server (and of the warm-up) started with this Launch."""
        env = solver_deps.isolated_env(base) if self.isolated else dict(os.environ if base is None else base)
        extra = [p for p in ([self.deps] if self.deps else []) + list(self.paths) if p]
        if extra:
            env["PYTHONPATH"] = os.pathsep.join(extra + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        if self.state_dir and "CLEARANCE_STATE_DIR" not in env:
            env["CLEARANCE_STATE_DIR"] = self.state_dir
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def needs_install(self) -> bool:
        """True when the dependencies this Launch relies on are not (completely) installed."""
        return bool(self.deps) and not solver_deps.is_installed(self.deps, self.requirements)


def has_modules(python: str, modules=solver_deps.IMPORTS, paths=(), timeout: float = 60.0) -> bool:
    """True when ``python`` (with ``paths`` first on its path) imports every module of ``modules``:
    asked in a subprocess, because what Blender's own process can import (extension wheels, its
    sys.path) is not what a child Python sees."""
    env = dict(os.environ)
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(list(paths) + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    try:
        r = subprocess.run([python, "-c", "import " + ", ".join(modules)], env=env, capture_output=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


class _Cancelled(Exception):
    pass


class SolverSetup:
    """Install the dependencies (when needed) and compile the kernels ahead, in a thread.

    ``state``: RUNNING, DONE, FAILED or CANCELLED; ``fraction`` (0-1) and ``message`` for the progress
    bar; ``error``: what failed and what to do; ``log``: every output line (the last are shown in an
    error)."""

    def __init__(self, launch: Launch):
        self.launch = launch
        self.state = RUNNING
        self.fraction = 0.0
        self.message = "preparing the solver"
        self.error = ""
        self.lines: list = []     # every output line of the steps
        self.history: list = []   # every status message, in order
        self._proc: Optional[subprocess.Popen] = None
        self._cancel = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name="clearance-solver-setup", daemon=True)
        self._thread.start()

    # -- read by the UI -------------------------------------------------------------------------
    def poll(self) -> bool:
        """True while the setup runs."""
        return self.state == RUNNING

    def run(self, log: Optional[TextIO] = sys.stdout, prefix: str = "clearance: ") -> str:
        """Block until the setup ends, printing every new status line to ``log``; returns the state."""
        shown = 0
        while True:
            done = not self._thread.is_alive()
            history = list(self.history)   # every status, so no kernel line is lost between polls
            if self.state == FAILED:
                history.append(self.status_text())
            if log is not None:
                for msg in history[shown:]:
                    print(f"{prefix}{msg[:1].upper()}{msg[1:]}", file=log, flush=True)
            shown = len(history)
            if done:
                return self.state
            self._thread.join(0.2)

    def status_text(self) -> str:
        """The line the panel shows: the current step, or the error."""
        if self.state == FAILED:
            return f"Solver setup failed: {self.error}"
        return self.message[:1].upper() + self.message[1:]

    def cancel(self) -> None:
        """Stop the running step (its partial install is discarded)."""
        self._cancel = True
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()

    # -- the thread ----------------------------------------------------------------------------
    def _set(self, fraction: float, message: str) -> None:
        self.fraction, self.message = max(0.0, min(1.0, fraction)), message
        if not self.history or self.history[-1] != message:
            self.history.append(message)

    def _main(self) -> None:
        try:
            if self.launch.needs_install():
                self._install()
            if self.launch.compile_ahead:
                self._compile()
            self._set(1.0, "solver ready")
            self.state = DONE
        except _Cancelled:
            self.message = "solver setup cancelled"
            self.state = CANCELLED
        except Exception as exc:   # every failure ends as FAILED with a message, never a dead thread
            self.error = str(exc) or type(exc).__name__
            self.state = FAILED

    def _stream(self, cmd: list, env: dict, on_line: Callable[[str], None]) -> tuple:
        """Run ``cmd``, calling ``on_line`` for each output line; returns (exit code, output)."""
        if self._cancel:
            raise _Cancelled()
        with self._lock:
            self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                          stdin=subprocess.DEVNULL, bufsize=1)
        out = []
        for line in self._proc.stdout:
            line = line.rstrip()
            out.append(line)
            self.lines.append(line)
            on_line(line)
        code = self._proc.wait()
        self._proc.stdout.close()
        if self._cancel:
            raise _Cancelled()
        return code, "\n".join(out)

    def _install(self) -> None:
        launch = self.launch
        self._set(0.0, "installing solver dependencies: looking for pip")
        pip = solver_deps.pip_invocation(launch.python)
        final = launch.deps
        parent = os.path.dirname(final)
        os.makedirs(parent, exist_ok=True)
        partial = f"{final}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        req = solver_deps.write_requirements(os.path.join(parent, "requirements.txt"), launch.requirements)
        progress = solver_deps.PipProgress(len(launch.requirements) if launch.requirements != solver_deps.REQUIREMENTS
                                           else len(solver_deps.PACKAGES), bool(launch.wheel_folder))
        self._set(0.0, progress.message)

        def on_line(line: str) -> None:
            step = progress.feed(line)
            if step:
                self._set(*step)

        env = solver_deps.isolated_env()
        t0 = time.monotonic()
        code, output = self._stream(solver_deps.pip_command(pip, partial, req, launch.wheel_folder), env, on_line)
        if code != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise RuntimeError(solver_deps.explain_failure(output, launch.wheel_folder))
        version = ".".join(map(str, sys.version_info[:3]))
        solver_deps.write_stamp(partial, launch.requirements, launch.python, version)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(partial, final)
        self._set(1.0, f"installed solver dependencies in {time.monotonic() - t0:.0f} s")

    def _compile(self) -> None:
        self._set(0.0, "compiling solver kernels (once per install or update)")

        def on_line(line: str) -> None:
            m = _KERNEL.search(line)
            if m:
                done, total = int(m.group(1)), int(m.group(2) or 0)
                self._set(min(done / total, 0.99) if total else 0.5, line[m.start():])

        code, output = self._stream([self.launch.python, "-m", "solver_server.runtime.warmup", "--if-cold"],
                                    self.launch.env(), on_line)
        if code != 0:
            tail = " | ".join(x for x in output.splitlines()[-6:] if x.strip())
            raise RuntimeError(f"compiling the solver kernels failed (exit code {code}): {tail or 'no output'}. "
                               f"Install Solver again (Preferences > Add-ons > Clearance), or report this output")
