"""Build the installable extension: dist/clearance-<version>.zip.

    python scripts/build_extension.py [--no-wheels] [--out DIR] [--platform TAG ...]
    python scripts/build_extension.py --wheelhouse DIR [--platform TAG ...] [--python-version 3.11]

The zip holds blender_addon/ at its root (blender_manifest.toml first), protocol/ vendored
into ``vendor/protocol`` (the add-on puts ``vendor/`` on sys.path), the solver's sources in
``vendor/solver_server`` (the local server runs them; their dependencies numba, scipy... are
installed on first use, blender_addon/solver_deps.py), and, unless
``--no-wheels``, the pyzmq and msgpack wheels fetched with ``pip download`` for each platform and
each Python the manifest accepts (3.11 for Blender 4.2-5.0, 3.13 for 5.1: :data:`PYTHONS`), listed in
the manifest's ``wheels`` (Blender installs the ones matching its own Python).
When the bpy module is available its extension tool validates the staged package.

``--wheelhouse DIR`` instead downloads the wheels of the solver's dependencies (numba, scipy...,
blender_addon/solver_deps.py) for an offline machine: point *Preferences > Add-ons > Clearance >
Wheel Folder* at DIR and the first Bake installs from it without a network (docs/addon.md).
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADDON = os.path.join(ROOT, "blender_addon")
WHEEL_PACKAGES = ("pyzmq", "msgpack")
VENDORED = ("protocol", "solver_server")
"""Packages of this repository copied into the zip's ``vendor/``: the wire format (the add-on
imports it) and the solver (the local server runs it)."""
PYTHONS = ("3.11", "3.13")
"""Every CPython the manifest accepts (blender_version_min 4.2, no maximum): Blender 4.2 LTS to 5.0
ship 3.11, Blender 5.1 ships 3.13. The zip carries the pyzmq and msgpack wheels of each (Blender
installs the ones that match its own Python), so that no accepted Blender lacks them."""
# one wheel per platform Blender supports, per Python
PLATFORMS = {
    "linux-x64": "manylinux_2_28_x86_64",
    "windows-x64": "win_amd64",
    "macos-arm64": "macosx_11_0_arm64",
    "macos-x64": "macosx_10_15_x86_64",
}
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", "*.blend1")


def manifest_version(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        m = re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M)
    if not m:
        raise SystemExit(f"{path}: no version line")
    return m.group(1)


def download_wheels(dest: str, platforms: list, pythons: tuple = PYTHONS) -> list:
    """``pip download`` the binary wheels of WHEEL_PACKAGES for each CPython of ``pythons`` on each platform."""
    os.makedirs(dest, exist_ok=True)
    for python in pythons:
        for plat in platforms:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--no-deps",
                            "--python-version", python, "--implementation", "cp", "--platform", PLATFORMS[plat],
                            "-d", dest, *WHEEL_PACKAGES], check=True)
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(dest, "*.whl")))


# Extra manylinux tags: pip download matches --platform tags literally, and numba/scipy wheels are
# tagged with older glibc baselines than pyzmq's.
_PLATFORM_ALIASES = {"linux-x64": ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"),
                     "macos-arm64": ("macosx_11_0_arm64", "macosx_12_0_arm64", "macosx_14_0_arm64"),
                     "macos-x64": ("macosx_10_15_x86_64", "macosx_10_9_x86_64", "macosx_11_0_x86_64")}


def solver_requirements(python_version: str) -> tuple:
    """blender_addon/solver_deps.REQUIREMENTS for that Python (markers applied), read without
    importing the add-on (it needs bpy)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_solver_deps", os.path.join(ADDON, "solver_deps.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.for_python(mod.REQUIREMENTS, tuple(int(x) for x in python_version.split(".")[:2]))


def download_wheelhouse(dest: str, platforms: list, python_version: str = "3.11") -> list:
    """``pip download`` every wheel the solver needs for CPython ``python_version`` on each platform
    into ``dest`` (the offline Wheel Folder). Returns the wheel file names."""
    os.makedirs(dest, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="clearance_req_") as tmp:
        req = os.path.join(tmp, "requirements.txt")
        with open(req, "w", encoding="utf-8") as f:
            f.write("\n".join(solver_requirements(python_version)) + "\n")
        for plat in platforms:
            tags = [a for t in _PLATFORM_ALIASES.get(plat, (PLATFORMS[plat],)) for a in ("--platform", t)]
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                            "--python-version", python_version, "--implementation", "cp", *tags, "-d", dest,
                            "-r", req], check=True)
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(dest, "*.whl")))


def write_manifest(src: str, dst: str, wheels: list, platforms: list) -> None:
    """Copy the manifest, adding the wheels list and the platforms those wheels cover."""
    with open(src, encoding="utf-8") as f:
        text = f.read()
    if wheels:
        listing = ",\n".join(f'  "./wheels/{w}"' for w in wheels)
        plats = ", ".join(f'"{p}"' for p in platforms)
        text = text.replace("# wheels = []", f"platforms = [{plats}]\nwheels = [\n{listing},\n]")
    with open(dst, "w", encoding="utf-8") as f:
        f.write(text)


def validate(stage: str) -> None:
    """Run Blender's extension validator on the staged folder when the bpy module has it."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("bpy")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return
    tools = glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*", "scripts", "addons_core",
                                   "bl_pkg", "cli", "blender_ext.py"))
    if tools:
        subprocess.run([sys.executable, tools[0], "validate", stage], check=True)


def build(out_dir: str, wheels: bool = True, platforms: list = None) -> str:
    """Stage and zip the extension; returns the zip's path."""
    platforms = platforms or list(PLATFORMS)
    version = manifest_version(os.path.join(ADDON, "blender_manifest.toml"))
    with tempfile.TemporaryDirectory(prefix="clearance_build_") as tmp:
        stage = os.path.join(tmp, "clearance")
        shutil.copytree(ADDON, stage, ignore=_SKIP)
        for package in VENDORED:
            shutil.copytree(os.path.join(ROOT, package), os.path.join(stage, "vendor", package), ignore=_SKIP)
        names = download_wheels(os.path.join(stage, "wheels"), platforms) if wheels else []
        write_manifest(os.path.join(ADDON, "blender_manifest.toml"), os.path.join(stage, "blender_manifest.toml"),
                       names, platforms)
        validate(stage)
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, f"clearance-{version}.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.write(os.path.join(stage, "blender_manifest.toml"), "blender_manifest.toml")
            for dirpath, _dirs, files in os.walk(stage):
                for fn in sorted(files):
                    full = os.path.join(dirpath, fn)
                    rel = os.path.relpath(full, stage)
                    if rel != "blender_manifest.toml":
                        z.write(full, rel)
    return path


def main(argv: list = None) -> int:
    p = argparse.ArgumentParser(description="Build dist/clearance-<version>.zip")
    p.add_argument("--no-wheels", action="store_true", help="skip downloading pyzmq/msgpack wheels (tests, offline)")
    p.add_argument("--out", default=os.path.join(ROOT, "dist"), help="output folder (default: dist/)")
    p.add_argument("--platform", action="append", choices=sorted(PLATFORMS), help="only these platforms")
    p.add_argument("--wheelhouse", metavar="DIR",
                   help="instead of the zip: download the solver's dependency wheels into DIR (offline install)")
    p.add_argument("--python-version", default="3.11",
                   help="with --wheelhouse: Blender's Python (3.11 for Blender 4.2-5.0, 3.13 for 5.1)")
    args = p.parse_args(argv)
    if args.wheelhouse:
        names = download_wheelhouse(args.wheelhouse, args.platform or list(PLATFORMS), args.python_version)
        print(f"{len(names)} wheels in {args.wheelhouse}")
        return 0
    path = build(args.out, wheels=not args.no_wheels, platforms=args.platform)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
