"""The add-on suite on Blender 4.2 LTS: the oldest Blender the manifest accepts (blender_version_min).

The bpy module of 4.2 (``bpy==4.2.23`` on PyPI, CPython 3.11) goes into its own venv with the solver's
pinned dependencies (blender_addon/solver_deps.py) and pytest; the default (not slow) tests of
tests/blender then run there, in their own process, from this checkout. The venv is made once in
``$CLEARANCE_BPY42_VENV`` (default /tmp/clearance_bpy42) and reused.

Slow: a 300 MB bpy download the first time, then the suite itself (about as long as on 5.0.1).
"""
import importlib.util
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BPY_LTS = "bpy==4.2.23"


def _requirements() -> tuple:
    spec = importlib.util.spec_from_file_location("_solver_deps", os.path.join(ROOT, "blender_addon", "solver_deps.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.for_python(mod.REQUIREMENTS, sys.version_info[:2])


def lts_venv() -> str:
    """A venv with bpy 4.2 LTS, the solver's dependencies and pytest (made once); its python."""
    venv = os.environ.get("CLEARANCE_BPY42_VENV", "/tmp/clearance_bpy42")
    python = os.path.join(venv, "bin", "python")
    probe = "import bpy, numba, scipy, zmq, msgpack, pytest, hypothesis; assert bpy.app.version[:2] == (4, 2)"
    if not (os.path.exists(python) and subprocess.run([python, "-c", probe], capture_output=True,
                                                      timeout=300).returncode == 0):
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True, timeout=300)
        subprocess.run([python, "-m", "pip", "install", "-q", BPY_LTS, "pytest>=8", "hypothesis>=6.100",
                        *_requirements()], check=True, timeout=3600)
    return python


EXIT_CRASH = {"test_bake_blend_script", "test_bake_blend_script_overrides_the_files_quality"}
"""Tests that run scripts/bake_blend.py in a child bpy process and check its exit code. The bpy 4.2.23
module segfaults at interpreter exit after this add-on was enabled: a script that only enables it and
exits ends with rc -11, with this release's add-on and with the one before it (commit 42744e7); enabling
only its operators module, or only its properties module, is enough, while its preferences, panels or
server modules alone, or a bare extension, exit cleanly (bpy 5.0.1 never crashes). The bake they run
succeeds and is saved first; only the exit code is wrong. They may fail on 4.2 with that exit code, and
only with it; the pytest process itself may end with the same crash after writing its report."""


@pytest.mark.slow
def test_addon_suite_on_blender_4_2_lts(tmp_path):
    python = lts_venv()
    env = dict(os.environ)
    env.setdefault("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    report = tmp_path / "report.xml"
    r = subprocess.run([python, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider",
                        "--basetemp", str(tmp_path / "t"), "--junitxml", str(report), "tests/blender"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200)
    (tmp_path / "lts.log").write_text(r.stdout + r.stderr)
    assert report.exists(), r.stdout[-6000:] + r.stderr[-2000:]
    cases = ET.parse(report).getroot().iter("testcase")
    passed, bad = 0, []
    for case in cases:
        problem = next((c for c in case if c.tag in ("failure", "error")), None)
        if problem is None:
            passed += 1
            continue
        text = (problem.get("message") or "") + (problem.text or "")
        if case.get("name") in EXIT_CRASH and re.search(r"assert -11 == 0", text):
            continue   # the bpy 4.2 exit crash, after the bake succeeded (see EXIT_CRASH)
        bad.append(f"{case.get('classname')}.{case.get('name')}: {text[:1500]}")
    assert not bad, "\n\n".join(bad)
    assert passed >= 50, passed
    assert r.returncode in (0, 1, -11, 139), r.returncode   # 1 only for EXIT_CRASH failures (checked above)
