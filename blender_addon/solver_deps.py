"""The solver's Python dependencies, installed on first use into the extension's user folder.

The extension zip carries the solver's own sources (``vendor/solver_server``, ``vendor/protocol``)
but not numba, llvmlite, scipy and numpy: about 100 MB per platform, which would make one zip
per OS of that size for every release. Instead the first Bake (or *Install Solver*) runs

    <python> -m pip install --target <user folder>/solver/cp311.partial -r requirements.txt

with the Python that will run the server (Blender's own: ``sys.executable``), so pip picks the
wheels of exactly that interpreter, and renames the folder to ``cp311`` when pip succeeded. A
stamp file written last (``clearance-deps.json``: the requirements and the Python) says the
folder is complete; a folder without it, or with other requirements, is installed again.

This module is plain Python (no bpy) so its logic is tested without Blender.
"""
from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from typing import Optional

REQUIREMENTS = (
    "numba==0.68.1",
    "llvmlite==0.50.0",
    "scipy==1.17.1",
    'numpy==1.26.4; python_version < "3.13"',
    'numpy>=2.1,<3; python_version >= "3.13"',
    "pyzmq==27.3.0",
    "msgpack==1.2.4",
)
"""What the solver server imports besides the standard library (pyproject.toml's dependencies),
pinned to the versions the test suite runs. numpy 1.26 has no wheels for Python 3.13 (Blender
5.1): there the marker picks numpy 2 (untested by this release's suite, see docs/addon.md)."""

PACKAGES = ("numba", "llvmlite", "scipy", "numpy", "pyzmq", "msgpack")
"""Top-level distributions pip reports while installing REQUIREMENTS (progress counts these)."""

IMPORTS = ("numba", "scipy", "numpy", "zmq", "msgpack")
"""Modules the server needs; a Python that imports all of them runs the server as it is."""

STAMP = "clearance-deps.json"


_MARKER = re.compile(r'^\s*python_version\s*(<=|>=|==|!=|<|>)\s*"(\d+)\.(\d+)"\s*$')


def for_python(requirements, version: tuple) -> tuple:
    """``requirements`` whose ``python_version`` marker holds for ``version`` (major, minor), markers
    removed: what ``pip download --python-version`` needs (pip evaluates markers against the Python
    running pip, not the target)."""
    import operator
    ops = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
           "!=": operator.ne}
    out = []
    for r in requirements:
        spec, _, marker = r.partition(";")
        if marker:
            m = _MARKER.match(marker)
            if not m:
                raise ValueError(f"unsupported marker in {r!r}")
            if not ops[m.group(1)](tuple(version[:2]), (int(m.group(2)), int(m.group(3)))):
                continue
        out.append(spec.strip())
    return tuple(out)


def python_tag(version_info=None) -> str:
    """'cp311' for CPython 3.11: the folder name, so two Blender versions never share wheels."""
    v = version_info or sys.version_info
    return f"cp{v[0]}{v[1]}"


def deps_dir(user_dir: str, tag: Optional[str] = None) -> str:
    """The folder the dependencies of ``tag`` (default: this Python) are installed into."""
    return os.path.join(user_dir, "solver", tag or python_tag())


def read_stamp(folder: str) -> Optional[dict]:
    """The stamp of a completed install in ``folder``, or None."""
    try:
        with open(os.path.join(folder, STAMP), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def is_installed(folder: str, requirements=REQUIREMENTS) -> bool:
    """True when ``folder`` holds a completed install of exactly ``requirements``."""
    stamp = read_stamp(folder)
    return bool(stamp) and list(stamp.get("requirements", ())) == list(requirements)


def write_stamp(folder: str, requirements, python: str, version: str) -> None:
    with open(os.path.join(folder, STAMP), "w", encoding="utf-8") as f:
        json.dump({"requirements": list(requirements), "python": python, "python_version": version}, f, indent=1)


def write_requirements(path: str, requirements=REQUIREMENTS) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(requirements) + "\n")
    return path


def pip_invocation(python: str, timeout: float = 60.0) -> list:
    """The command prefix that runs pip with ``python``: ``[python, -m, pip]`` when that Python
    has pip, else pip run from the wheel ensurepip bundles (``[python, <pip.whl>/pip]``, how pip
    bootstraps itself). Raises RuntimeError when neither exists."""
    env = isolated_env()
    try:
        r = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, timeout=timeout,
                           env=env, stdin=subprocess.DEVNULL)
        if r.returncode == 0:
            return [python, "-m", "pip"]
        r = subprocess.run([python, "-c", "import ensurepip, glob, os; print(sorted(glob.glob(os.path.join("
                            "os.path.dirname(ensurepip.__file__), '_bundled', 'pip-*.whl')))[-1])"],
                           capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot run {python!r}: {exc}") from None
    wheel = r.stdout.strip()
    if r.returncode == 0 and wheel and os.path.isfile(wheel):
        return [python, os.path.join(wheel, "pip")]
    raise RuntimeError(f"{python} has neither pip nor ensurepip's bundled pip wheel: install the solver "
                       "dependencies by hand (docs/addon.md, 'Offline and manual install') or set Server Python")


def isolated_env(base: Optional[dict] = None) -> dict:
    """The environment for pip and the server: no user site-packages (a numba in ~/.local of another
    version must not shadow ours), no ``PIP_USER``/``PIP_REQUIRE_VIRTUALENV`` from the user's shell
    that would make ``--target`` fail."""
    env = dict(os.environ if base is None else base)
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_USER"] = "0"
    env["PIP_REQUIRE_VIRTUALENV"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def pip_command(pip: list, target: str, requirements_file: str, wheel_folder: str = "") -> list:
    """``pip install`` of the requirements into ``target``. ``wheel_folder`` (a folder of wheels made
    with ``pip download``) installs offline: no index, only those files."""
    cmd = [*pip, "install", "--target", target, "--ignore-installed", "--only-binary=:all:", "--no-input",
           "--progress-bar", "off", "--disable-pip-version-check", "-r", requirements_file]
    if wheel_folder:
        cmd += ["--no-index", "--find-links", wheel_folder]
    return cmd


_COLLECT = re.compile(r"^\s*(?:Collecting|Requirement already satisfied:?)\s+([A-Za-z0-9_.\-]+)")
_DOWNLOAD = re.compile(r"^\s*(?:Downloading|Using cached)\s+(\S+?)-[0-9][^\s]*\.whl(?:\s+\(([^)]+)\))?")
_PROCESSING = re.compile(r"^\s*Processing\s+(\S+?\.whl)")
_INSTALLING = re.compile(r"^\s*Installing collected packages:")
_DONE = re.compile(r"^\s*Successfully installed")


class PipProgress:
    """Turns pip's output lines into (fraction, message) for the progress bar.

    Fractions: 0-0.8 while pip collects and downloads (one step per package of PACKAGES), 0.8
    while it unpacks, 1.0 when it says "Successfully installed"."""

    def __init__(self, total: int = len(PACKAGES), wheel_folder: bool = False):
        self.total = total
        self.local = "from the wheel folder" if wheel_folder else "local wheel"
        self.seen: list = []
        self.fraction = 0.0
        self.message = "installing solver dependencies: starting pip"

    def feed(self, line: str) -> Optional[tuple]:
        """The new (fraction, message) when ``line`` moves the progress on, else None."""
        m = _COLLECT.match(line)
        if m:
            name = m.group(1).split("[")[0].lower()
            name = re.split(r"[=<>!~;]", name)[0]
            if name not in self.seen:
                self.seen.append(name)
            n = min(len(self.seen), self.total)
            self.fraction = 0.8 * (n - 1) / self.total
            self.message = f"installing solver dependencies {n}/{self.total}: {name}"
            return self.fraction, self.message
        m = _PROCESSING.match(line)   # a wheel file: the offline Wheel Folder, pip's find-links, its cache
        if m:
            name = os.path.basename(m.group(1)).split("-")[0].lower()
            if name not in self.seen:
                self.seen.append(name)
            n = min(len(self.seen), self.total)
            self.fraction = 0.8 * n / self.total
            self.message = f"installing solver dependencies {n}/{self.total}: {name} ({self.local})"
            return self.fraction, self.message
        m = _DOWNLOAD.match(line)
        if m:
            name = os.path.basename(m.group(1)).lower()
            n = min(max(len(self.seen), 1), self.total)
            size = f" ({m.group(2)})" if m.group(2) else " (cached)"
            self.fraction = 0.8 * n / self.total
            self.message = f"installing solver dependencies {n}/{self.total}: downloading {name}{size}"
            return self.fraction, self.message
        if _INSTALLING.match(line):
            self.fraction = 0.8
            self.message = "installing solver dependencies: unpacking (about 450 MB on disk)"
            return self.fraction, self.message
        if _DONE.match(line):
            self.fraction = 1.0
            self.message = "installed solver dependencies"
            return self.fraction, self.message
        return None


def explain_failure(output: str, wheel_folder: str = "") -> str:
    """A pip failure in words an artist can act on, from pip's last output lines."""
    tail = [x.strip() for x in output.splitlines() if x.strip()]
    last = next((x for x in reversed(tail) if x.startswith("ERROR")), tail[-1] if tail else "no output")
    text = output.lower()
    if wheel_folder:
        return (f"installing the solver from the wheel folder {wheel_folder} failed: {last}. That folder must hold "
                f"the wheels of 'pip download' for this Blender's Python {sys.version_info[0]}.{sys.version_info[1]} "
                f"(docs/addon.md, 'Offline install')")
    if any(k in text for k in ("network is unreachable", "connection", "name or service", "temporary failure",
                               "max retries", "timed out", "proxy", "ssl")):
        return (f"installing the solver needs the internet once (about 100 MB from pypi.org), and pip could not "
                f"connect: {last}. Connect and press Bake again, or set Preferences > Add-ons > Clearance > "
                f"Wheel Folder to wheels downloaded elsewhere (docs/addon.md, 'Offline install')")
    if "no space" in text:
        return f"installing the solver needs about 450 MB of disk space: {last}"
    if "no matching distribution" in text or "could not find a version" in text:
        return (f"pip found no solver wheels for this Python ({sys.version_info[0]}.{sys.version_info[1]}, "
                f"{sys.platform}): {last}. See docs/addon.md for the supported Blender versions, or set Server Python "
                f"to a Python that has the solver")
    return f"installing the solver dependencies failed: {last}"
