"""Issue 20 item 11: installing Clearance prints no setuptools warning a newcomer mistakes for an error
(``project.license`` as a TOML table printed ~50 lines of deprecation notices). Builds the real package
metadata with pip, in its own isolated build environment, as scripts/setup.sh does."""
import os
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_license_is_an_spdx_string():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        meta = tomllib.load(f)
    assert meta["project"]["license"] == "GPL-3.0-or-later"
    assert any(r.startswith("setuptools>=77") for r in meta["build-system"]["requires"])   # SPDX strings: 77+


def test_building_the_package_prints_no_warning(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), ROOT],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = r.stdout + r.stderr
    assert "Warning" not in out and "deprecated" not in out, out
    assert any(p.name.startswith("clearance-0.1.0") for p in tmp_path.iterdir())
