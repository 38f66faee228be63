"""Installing the solver on first use (blender_addon/solver_deps.py, solver_setup.py, solver_launch.py).

Real pip runs here: an offline install from a wheel folder holding two small wheels made by the
test (the same ``pip install --target`` the add-on runs for numba and scipy, without the 100 MB
download), failures with an empty wheel folder and with an unreachable index, and pip run from
ensurepip's wheel in a Python without pip. The real download and compile of the whole solver, in a
fresh bpy venv without numba or scipy, is the slow test in test_install_fresh.py.
"""
import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile

import bpy
import pytest

from conftest import addon
from helpers import cube, plane

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _deps():
    return addon("solver_deps")


def _setup():
    return addon("solver_setup")


def make_wheel(folder, name: str, version: str = "1.0", value: int = 42) -> str:
    """A minimal pure-Python wheel ``name`` whose module holds VALUE = value (RECORD with hashes)."""
    mod = name.replace("-", "_")
    dist = f"{mod}-{version}"
    files = {f"{mod}/__init__.py": f"VALUE = {value}\n",
             f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: clearance-test\nRoot-Is-Purelib: true\n"
                                        "Tag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record) + "\n"
    path = os.path.join(str(folder), f"{dist}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
    return path


def test_requirements_cover_what_the_solver_imports(blender):
    """Every dependency of pyproject.toml is installed, and the numpy chosen for Python 3.11 meets its bound."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"^dependencies = \[(.*?)\]", text, re.S | re.M).group(1)
    wanted = {re.match(r'\s*"([A-Za-z0-9_\-]+)', line).group(1).lower() for line in block.splitlines() if '"' in line}
    reqs = _deps().REQUIREMENTS
    names = {re.match(r"[A-Za-z0-9_\-]+", r).group(0).lower() for r in reqs}
    assert wanted <= names, wanted - names
    numpy311 = [r for r in reqs if r.startswith("numpy") and '< "3.13"' in r]
    assert numpy311 and re.match(r"numpy==1\.\d+", numpy311[0])   # pyproject: numpy>=1.24,<2.0
    # Blender 5.1's Python 3.13 has no numpy 1.26 wheels: its requirements pick numpy 2 (the markers, which
    # pip download --python-version does not apply by itself, scripts/build_extension.py --wheelhouse)
    for311, for313 = _deps().for_python(reqs, (3, 11)), _deps().for_python(reqs, (3, 13))
    assert "numpy==1.26.4" in for311 and "numpy>=2.1,<3" not in for311
    assert "numpy>=2.1,<3" in for313 and "numpy==1.26.4" not in for313
    assert len(for311) == len(for313) == len(_deps().PACKAGES)
    # what the server imports (the folder names a self-sufficient Python is probed for)
    assert set(_deps().IMPORTS) == {"numba", "scipy", "numpy", "zmq", "msgpack"}


def test_offline_install_from_a_wheel_folder(blender, tmp_path):
    """A real ``pip install --target`` from a wheel folder: progress to 1.0, the folder appears only
    complete (stamp written, no .partial left), and a Python started with the Launch imports it."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "clearance-probe-a", value=7)
    make_wheel(wheels, "clearance-probe-b", value=11)
    deps = str(tmp_path / "user" / "solver" / _deps().python_tag())
    ss = _setup()
    launch = ss.Launch(sys.executable, deps=deps, isolated=True, wheel_folder=str(wheels),
                       requirements=("clearance-probe-a==1.0", "clearance-probe-b==1.0"))
    assert launch.needs_install()
    setup = ss.SolverSetup(launch)
    seen = []
    while setup.poll():
        seen.append((setup.fraction, setup.message))
        setup._thread.join(0.05)
    assert setup.state == ss.DONE, setup.error + "\n" + "\n".join(setup.lines[-20:])
    assert setup.fraction == 1.0 and setup.message == "solver ready"
    assert not launch.needs_install()
    assert _deps().read_stamp(deps)["requirements"] == ["clearance-probe-a==1.0", "clearance-probe-b==1.0"]
    assert not os.path.exists(deps + ".partial")
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions)
    assert "installing solver dependencies 2/2: clearance_probe_b (from the wheel folder)" in setup.history, \
        setup.history
    assert any(m.startswith("installed solver dependencies in ") for m in setup.history), setup.history
    env = launch.env()
    assert env["PYTHONPATH"].split(os.pathsep)[0] == deps and env["PYTHONNOUSERSITE"] == "1"
    r = subprocess.run([sys.executable, "-c", "import clearance_probe_a as a, clearance_probe_b as b; "
                        "print(a.VALUE * b.VALUE)"], env=env, capture_output=True, text=True)
    assert r.stdout.strip() == "77", r.stderr
    # Different requirements (an update of the extension) install again
    assert ss.Launch(sys.executable, deps=deps, requirements=("clearance-probe-a==1.0",)).needs_install()


def test_failed_install_explains_and_leaves_nothing(blender, tmp_path):
    """An empty wheel folder: pip fails, the error names the folder and 'pip download', nothing is left."""
    wheels = tmp_path / "empty"
    wheels.mkdir()
    deps = str(tmp_path / "user" / "solver" / "cp311")
    ss = _setup()
    setup = ss.SolverSetup(ss.Launch(sys.executable, deps=deps, isolated=True, wheel_folder=str(wheels)))
    assert setup.run(log=None) == ss.FAILED
    assert str(wheels) in setup.error and "pip download" in setup.error, setup.error
    assert "numba" in setup.error   # pip's own line: which requirement had no wheel
    assert not os.path.exists(deps) and not os.path.exists(deps + ".partial")
    assert setup.status_text().startswith("Solver setup failed: ")


def test_no_network_says_to_connect_or_use_a_wheel_folder(blender, tmp_path, monkeypatch):
    """An index that refuses connections (no network): the error says the install needs the internet once
    and names the Wheel Folder preference."""
    for k in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)   # no machine pip.conf (extra indexes, find-links)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "1")
    monkeypatch.setenv("PIP_TIMEOUT", "3")
    ss = _setup()
    setup = ss.SolverSetup(ss.Launch(sys.executable, deps=str(tmp_path / "solver" / "cp311"), isolated=True))
    assert setup.run(log=None) == ss.FAILED
    assert "needs the internet once" in setup.error and "Wheel Folder" in setup.error, setup.error


def test_pip_from_ensurepip_when_the_python_has_no_pip(blender, tmp_path):
    """A Python without pip (some Blender builds): pip runs from the wheel ensurepip bundles."""
    venv = tmp_path / "nopip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    cmd = _deps().pip_invocation(python)
    assert cmd[0] == python and cmd[1].endswith(".whl" + os.sep + "pip"), cmd
    r = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("pip "), r.stderr
    assert _deps().pip_invocation(sys.executable) == [sys.executable, "-m", "pip"]


def test_the_launch_follows_the_preferences(blender, tmp_path, monkeypatch):
    """Server Python wins; a Python that has numba/scipy runs as it is; otherwise the solver is installed
    into the extension's user folder and compiled ahead."""
    sl = addon("solver_launch")
    prefs = addon("preferences").get()
    src = sl.source_dir()
    assert src == ROOT   # development checkout: the repository root holds solver_server/
    dev = sl.resolve(prefs)
    assert dev.python == sys.executable and dev.paths == [ROOT] and not dev.deps and not dev.compile_ahead
    assert sl.setup_for(dev) is None   # nothing to do before a bake
    prefs.python_executable = "/opt/td/python"
    td = sl.resolve(prefs)
    assert td.python == "/opt/td/python" and not td.deps and not td.compile_ahead
    prefs.python_executable = ""
    user = bpy.utils.extension_path_user(addon("preferences").ADDON_ID, create=True)
    assert sl.user_dir() == user and os.path.isdir(user)
    monkeypatch.setitem(sl._probed, sys.executable, False)   # Blender's Python without numba (a real Blender)
    prefs.wheel_folder = str(tmp_path / "wheels")
    fresh = sl.resolve(prefs)
    assert fresh.python == sys.executable and fresh.isolated and fresh.compile_ahead
    assert fresh.deps == os.path.join(user, "solver", _deps().python_tag())
    assert fresh.state_dir == os.path.join(user, "state") and fresh.wheel_folder == str(tmp_path / "wheels")
    assert fresh.env()["CLEARANCE_STATE_DIR"] == fresh.state_dir or "CLEARANCE_STATE_DIR" in os.environ


def test_first_bake_without_the_solver_reports_why_and_what_to_do(blender, tmp_path, monkeypatch):
    """The operator an artist presses, in background mode, on a Blender whose Python lacks numba: it
    installs the solver first; when that fails (here: an empty offline wheel folder) the bake ends with
    that error in the panel, and nothing half-installed remains."""
    sl = addon("solver_launch")
    monkeypatch.setitem(sl._probed, sys.executable, False)
    monkeypatch.setattr(sl, "user_dir", lambda: str(tmp_path / "user"))
    addon("server_process").stop_local_server()
    (tmp_path / "wheels").mkdir()
    addon("preferences").get().wheel_folder = str(tmp_path / "wheels")
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    cube("box", size=0.2, location=(0.0, 0.0, 0.3)).clearance.role = "SOLID"
    plane("floor").clearance.role = "COLLIDER"
    scene.clearance.cache_folder = str(tmp_path / "cache")
    with pytest.raises(RuntimeError):
        bpy.ops.clearance.bake()
    err = scene.clearance.last_error
    assert err.startswith("Solver setup failed: installing the solver from the wheel folder"), err
    assert "pip download" in err
    assert addon("server_process").local_server() is None
    assert not os.path.exists(tmp_path / "user" / "solver" / _deps().python_tag())


def test_ui_bake_waits_for_the_setup_shows_it_and_esc_cancels(blender, tmp_path, monkeypatch):
    """The UI path (operators.wait_for_setup / setup_event / setup_outcome, what the modal bake runs on
    each timer tick): the panel shows the install's progress and Cancel while the bake waits; Esc stops
    pip and nothing half-installed remains. The index is a socket that accepts and never answers, so pip
    waits as on a slow network."""
    import socket
    import time
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    for k in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{silent.getsockname()[1]}/simple")
    monkeypatch.setenv("PIP_TIMEOUT", "120")
    sl = addon("solver_launch")
    monkeypatch.setitem(sl._probed, sys.executable, False)
    monkeypatch.setattr(sl, "user_dir", lambda: str(tmp_path / "user"))
    ops = addon("operators")
    addon("server_process").stop_local_server()
    scene = bpy.context.scene
    try:
        setup = ops.pending_setup(bpy.context)
        assert setup is not None and setup.poll()
        ops.wait_for_setup(scene, setup)
        assert scene.clearance.is_baking and bpy.ops.clearance.cancel.poll()
        deadline = time.monotonic() + 60
        while not (scene.clearance.status.startswith("Installing solver dependencies") and
                   any("Looking in indexes" in x for x in setup.lines)):   # pip runs and waits on the index
            assert ops.setup_event(bpy.context, setup, "TIMER", "NOTHING"), setup.status_text()
            assert time.monotonic() < deadline, scene.clearance.status
            time.sleep(0.1)
        assert ops.setup_event(bpy.context, setup, "ESC", "PRESS")
        deadline = time.monotonic() + 30
        while ops.setup_event(bpy.context, setup, "TIMER", "NOTHING"):
            assert time.monotonic() < deadline, "Esc did not stop the setup"
            time.sleep(0.1)
        level, text = ops.setup_outcome(bpy.context, setup)
        assert level == "WARNING" and "cancelled" in text
        assert not scene.clearance.is_baking and not bpy.ops.clearance.cancel.poll()
        deps = sl.resolve().deps
        assert not os.path.exists(deps) and not os.path.exists(deps + ".partial")
    finally:
        silent.close()
