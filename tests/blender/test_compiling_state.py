"""No silent stall: the first bake after an install says "compiling" in the panel.

A server subprocess started with a fresh CLEARANCE_STATE_DIR has no record (warm marker) that its
numba kernels were ever compiled, so its first IPC job reports Progress("compiling", message) before
the first solved frame. The add-on's bake session must receive it in that order and keep the notice
in the panel's status text until the first solved frame (the start frame arrives before the slow
compile of the first step, and must not replace the notice with "Frame 1 of N").

While numba compiles, the server reports every kernel it finishes ("compiling solver kernels
3/~60: name (12 s)"): the panel shows the count rising and ``BakeSession.run`` (the blocking loop
of ``blender -b``) prints each status line to stdout.

The default test copies the kernels already compiled for these sources into the fresh folder
(without the markers) except those of a few modules (``REBUILT``), so the server really
compiles a few kernels and reports them without spending minutes (the ``warm_kernels`` fixture
first compiles the real cache ahead if it is cold, once for the whole suite, instead of letting
this test compile everything into its throwaway copy); the slow test starts from an empty folder
and compiles everything.
"""
import io
import re
import importlib.util
import os
import shutil
import sys

import bpy
import pytest

from conftest import addon
from helpers import cube, plane

from protocol.messages import Frame, Progress

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REBUILT = ("winding.*",)
"""Cache files left out of the copied kernel cache, so a few kernels are really compiled: a whole
module a solid needs at build time, called from Python (a module called only from other cached
kernels is linked into them and would never be compiled on its own). One small module keeps the
test's compile to seconds; elastic_tet and fem_common as well cost ~2 minutes per test."""


def _kernel_cache_module():
    """solver_server/runtime/kernel_cache.py loaded on its own: importing the package would point this
    process's NUMBA_CACHE_DIR at the default folder, which every later server would inherit."""
    spec = importlib.util.spec_from_file_location("_clearance_kernel_cache",
                                                  os.path.join(ROOT, "solver_server", "runtime", "kernel_cache.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fresh_state_dir(tmp_path, monkeypatch, prebuilt: bool) -> str:
    kc = _kernel_cache_module()
    fingerprint = kc.tree_fingerprint(os.path.join(ROOT, "solver_server"))
    current = os.path.join(kc.state_dir(), "numba", fingerprint)   # where the other tests' servers compile
    state = tmp_path / "state"
    state.mkdir()
    skip = shutil.ignore_patterns("warm-*", "compile_counts.json", *REBUILT)
    monkeypatch.setenv("CLEARANCE_STATE_DIR", str(state))
    user_cache = os.environ.get("NUMBA_CACHE_DIR")
    if prebuilt and user_cache:
        # the other tests' servers compile into the user's NUMBA_CACHE_DIR (numba's own layout):
        # a copy of it, markers left out, so the warm markers land in the copy
        if os.path.isdir(user_cache):
            shutil.copytree(user_cache, state / "numba_user", ignore=skip)
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(state / "numba_user"))
        return str(state)
    if prebuilt and os.path.isdir(current):
        # every kernel but those of one module: a real compilation of a few kernels
        shutil.copytree(current, state / "numba" / fingerprint, ignore=skip)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)   # the marker would live there instead
    return str(state)


def _first_bake_reports_compiling(tmp_path, monkeypatch, prebuilt: bool):
    state_dir = _fresh_state_dir(tmp_path, monkeypatch, prebuilt)
    srv = addon("server_process").start(sys.executable, timeout=120.0)
    try:
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, 3
        box = cube("box", size=0.2, location=(0.0, 0.0, 0.15))
        box.clearance.role = "SOLID"
        plane("floor").clearance.role = "COLLIDER"
        s = scene.clearance
        s.backend = "ipc"
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
    assert any("warm-ipc" in files for _, _, files in os.walk(state_dir))


def test_first_bake_reports_compiling_before_the_first_solved_frame(blender, tmp_path, monkeypatch, warm_kernels):
    warm_kernels("fast")   # the add-on's default quality: what the copied cache must already hold
    _first_bake_reports_compiling(tmp_path, monkeypatch, prebuilt=True)


@pytest.mark.slow
def test_first_bake_after_install_compiles_and_says_so(blender, tmp_path, monkeypatch):
    _first_bake_reports_compiling(tmp_path, monkeypatch, prebuilt=False)
