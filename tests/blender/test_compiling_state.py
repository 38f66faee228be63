"""No silent stall: the first bake after an install says "compiling" in the panel.

A server subprocess started with a fresh CLEARANCE_STATE_DIR has no record (warm marker) that its
numba kernels were ever compiled, so its first job reports Progress("compiling", message) before
the first solved frame. The add-on's bake session must receive it in that order and keep the notice
in the panel's status text until the first solved frame (the start frame arrives before the slow
compile of the first step, and must not replace the notice with "Frame 1 of N").

While numba compiles, the server reports every kernel it finishes ("compiling solver kernels
3/~60: name (12 s)"): the panel shows the count rising and ``BakeSession.run`` (the blocking loop
of ``blender -b``) prints each status line to stdout.

The default test bakes a small MPM scene (a sand cube over a floor) in a fresh state folder holding a
copy of the run's pre-built kernel cache for it minus one module (conftest ``compile_cache``), so the
server really compiles 17 kernels and reports them in seconds; the slow test bakes a box on a floor
(IPC) from an empty folder and compiles everything.
"""
import io
import os
import re
import sys

import bpy
import pytest

from conftest import addon
from helpers import cube, plane

from protocol.messages import Frame, Progress


def _fresh_state_dir(tmp_path, monkeypatch, compile_cache=None) -> str:
    """A fresh CLEARANCE_STATE_DIR for the server the test starts (no warm marker): empty, or holding
    ``compile_cache`` minus one module."""
    state = tmp_path / "state"
    if compile_cache is not None:
        env = compile_cache.nearly_warm(state)
    else:
        state.mkdir()
        env = {"CLEARANCE_STATE_DIR": str(state)}
    monkeypatch.setenv("CLEARANCE_STATE_DIR", env["CLEARANCE_STATE_DIR"])
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)   # the kernels and markers live in the state folder
    monkeypatch.delenv("NUMBA_CACHE_LOCATOR_CLASSES", raising=False)
    return str(state)


def _first_bake_reports_compiling(tmp_path, monkeypatch, compile_cache=None):
    """``compile_cache`` given: a sand cube (MPM, the scene of ``compile_cache``) in a nearly warm cache;
    None: a soft box (IPC) in an empty one."""
    state_dir = _fresh_state_dir(tmp_path, monkeypatch, compile_cache)
    srv = addon("server_process").start(sys.executable, timeout=120.0)
    try:
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, 3
        box = cube("box", size=0.2, location=(0.0, 0.0, 0.15))
        box.clearance.role = "SOLID" if compile_cache is None else "GRANULAR"
        plane("floor").clearance.role = "COLLIDER"
        s = scene.clearance
        s.backend = "ipc" if compile_cache is None else "mpm"
        s.server_address = srv.address
        s.cache_folder = str(tmp_path / "cache")
        addon("preferences").get().timeout = 30.0

        bs = addon("bake_session")
        log = []   # (kind, state or frame, the panel's status text after handling it)

        class RecordingSession(bs.BakeSession):
            def handle(self, ev):
                super().handle(ev)
                if isinstance(ev, Progress):
                    log.append(("progress", ev.state, ev.message, s.status))
                elif isinstance(ev, Frame):
                    log.append(("frame", int(ev.frame), "", s.status))

        session = RecordingSession(scene, addon("export").export_scene(bpy.context),
                                   addon("operators").connect(bpy.context), str(tmp_path / "cache"), "PC2")
        session.start()
        out = io.StringIO()
        assert session.run(stall_timeout=600, log=out) == bs.DONE, session.error
    finally:
        srv.stop()

    kinds = [(k, v) for k, v, _, _ in log]
    compiling = [i for i, (k, v, m, _) in enumerate(log) if k == "progress" and v == "compiling" and m]
    solved = [i for i, (k, v) in enumerate(kinds) if k == "frame" and v > 1]
    start = kinds.index(("frame", 1))
    assert compiling and solved, log
    assert compiling[0] < start < solved[0], log
    # The panel shows the notice from the moment it arrives until the first solved frame ...
    for _, _, _, status in log[compiling[0]:solved[0]]:
        assert status.startswith("Compiling"), log
    assert "compiling solver kernels" in log[start][3].lower()
    # Each kernel numba compiled was reported, counting up, before the first solved frame, and the
    # panel showed the count ...
    kernels = [(i, m, st) for i, (k, v, m, st) in enumerate(log)
               if k == "progress" and v == "compiling" and m.startswith("compiling solver kernels ")]
    assert kernels and kernels[0][0] < solved[0], log
    counts = [int(re.match(r"compiling solver kernels (\d+)", m).group(1)) for _, m, _ in kernels]
    assert counts == sorted(counts) and sorted(set(counts)) == list(range(1, max(counts) + 1)), counts  # + heartbeats
    assert all(re.fullmatch(r"compiling solver kernels \d+(/~\d+)?: \S+ \(\d+ s\)", m) for _, m, _ in kernels)
    assert kernels[0][2].startswith("Compiling solver kernels 1"), kernels[0]
    # ... and so did stdout, which is all blender -b shows.
    printed = out.getvalue().splitlines()
    assert any(line.startswith("clearance: Compiling solver kernels 1") for line in printed), printed
    assert any(line.startswith("clearance: Frame 2 of 3") for line in printed), printed
    assert printed[-1].startswith("clearance: Baked 1–3"), printed
    # ... then the frame counter.
    assert log[solved[0]][3].startswith("Frame 2 of 3"), log
    assert scene.clearance.status.startswith("Baked")
    # The server recorded that its kernels are compiled: the next bake will not say so again.
    marker = "warm-ipc" if compile_cache is None else "warm-mpm"
    assert any(marker in files for _, _, files in os.walk(state_dir))
    return [m for _, m, _ in kernels]


def test_first_bake_reports_compiling_before_the_first_solved_frame(blender, tmp_path, monkeypatch, compile_cache):
    kernels = _first_bake_reports_compiling(tmp_path, monkeypatch, compile_cache)
    assert any(m.split(": ")[1].startswith("inside.") for m in kernels), kernels   # the module left out


@pytest.mark.slow
def test_first_bake_after_install_compiles_and_says_so(blender, tmp_path, monkeypatch):
    _first_bake_reports_compiling(tmp_path, monkeypatch)
