"""The embedded local solver server: a child process on loopback, started on demand.

How it starts (which Python, which folders on its path) is a :class:`solver_setup.Launch`
(:mod:`solver_launch` picks it). ``python -m solver_server serve --bind tcp://127.0.0.1:0`` binds a free port and prints
"clearance-server listening on tcp://127.0.0.1:PORT" when ready; we read that first line
(with a timeout) and keep the process handle. The server is stopped when Blender exits
(atexit), when the add-on is disabled, or by the Stop Server operator.
"""
from __future__ import annotations

import atexit
import os
import re
import subprocess
import sys
import threading
from typing import Optional, Union

from .solver_setup import Launch

_LISTENING = re.compile(r"listening on (tcp://\S+)")


class LocalServer:
    """A running server subprocess and the address it listens on."""

    def __init__(self, process: subprocess.Popen, address: str):
        self.process = process
        self.address = address

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate, then kill if it does not exit within ``timeout`` seconds."""
        if self.alive():
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        # stdout/stderr reach EOF now; their drain threads end and close nothing else.


_server: Optional[LocalServer] = None


def _checkout_root() -> Optional[str]:
    """The repository root when the add-on runs from a checkout (solver_server beside it)."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    return root if os.path.isfile(os.path.join(root, "solver_server", "__init__.py")) else None


def _vendor_dir() -> Optional[str]:
    """The extension's ``vendor/`` folder when it ships the solver's sources."""
    here = os.path.join(os.path.dirname(os.path.realpath(__file__)), "vendor")
    return here if os.path.isfile(os.path.join(here, "solver_server", "__init__.py")) else None


def start(launch: Union[Launch, str], timeout: float = 60.0, bind: str = "tcp://127.0.0.1:0") -> LocalServer:
    """Start ``python -m solver_server serve`` as ``launch`` says and wait for its address line.

    ``launch`` may be a plain Python path: the solver's sources of this add-on (``vendor/`` or the
    checkout) go first on its path. Raises RuntimeError with the server's own output when it exits or
    stays silent for ``timeout`` seconds.
    """
    if isinstance(launch, str):
        src = _vendor_dir() or _checkout_root()
        launch = Launch(launch, [src] if src else [])
    python = launch.python
    if not python or not os.path.exists(python):
        raise RuntimeError(f"Server Python {python!r} does not exist: set it in Preferences > Add-ons > Clearance "
                           f"(a Python where 'pip install clearance' was run), or clear it to let Clearance "
                           f"install its solver")
    env = launch.env()
    proc = subprocess.Popen([python, "-m", "solver_server", "serve", "--bind", bind],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            stdin=subprocess.DEVNULL)
    lines: list = []
    found: list = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip())
            m = _LISTENING.search(line)
            if m:
                found.append(m.group(1))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not found:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        err = proc.stderr.read() if proc.stderr else ""
        proc.stdout.close()
        proc.stderr.close()
        tail = "\n".join((lines + err.splitlines())[-8:])
        hint = ""
        if "No module named" in tail and not launch.deps:
            hint = (f" ({python} lacks a solver dependency: pip install numba scipy pyzmq msgpack into it, or clear "
                    f"Preferences > Add-ons > Clearance > Server Python so Clearance installs its own)")
        raise RuntimeError(f"the local server did not start within {timeout:.0f} s: {tail or 'no output'}{hint}")
    # Keep draining stdout/stderr so a chatty server never blocks on a full pipe.
    for stream in (proc.stdout, proc.stderr):
        threading.Thread(target=lambda s=stream: [None for _ in iter(s.readline, "")], daemon=True).start()
    return LocalServer(proc, found[0])


def ensure_local_server(launch: Union[Launch, str], timeout: float = 60.0) -> LocalServer:
    """The running embedded server, started if needed."""
    global _server
    if _server is None or not _server.alive():
        _server = start(launch, timeout)
    return _server


def local_server() -> Optional[LocalServer]:
    """The embedded server if it is running."""
    return _server if _server is not None and _server.alive() else None


def stop_local_server() -> None:
    """Stop the embedded server (no-op when none runs)."""
    global _server
    if _server is not None:
        _server.stop()
        _server = None


def register() -> None:
    atexit.register(stop_local_server)


def unregister() -> None:
    stop_local_server()
    atexit.unregister(stop_local_server)
