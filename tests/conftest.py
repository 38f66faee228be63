"""Shared pytest setup: the repository root on sys.path so tests import protocol/,
solver_server/ and blender_addon/ straight from the checkout; ``compile_cache`` for the tests of the
compile reporting, which copy a small pre-built kernel cache."""
import fcntl
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


COMPILE_REBUILT = ("inside.*",)
"""Kernel cache files left out of a copied cache (:func:`compile_cache`), so that a process really
compiles a few kernels: the MPM particle sampler's inside test (called from Python at build time,
so compiled on its own, not only linked into other kernels), plus the numba helpers it needs
(array and sort implementations): 17 kernels, ~4 s of CPU."""


def compile_scene():
    """A 0.2 m sand cube over a floor plane (MPM, automatic domain, frames 1-3): the smallest real bake
    whose kernels the compile-reporting tests pre-build (45 kernels, ~16 s of CPU cold; a cold IPC
    warm-up compiles ~260 in minutes)."""
    import numpy as np
    from protocol.scene import Body, Material, Scene, Settings

    c = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64) * 0.1
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = np.array([t for a, b, c_, d in quads for t in ((a, b, c_), (a, c_, d))], np.int32)
    sand = Material(mpm_material="sand", density=1600.0, youngs_modulus=3.537e5, poisson_ratio=0.3,
                    friction_angle=30.0)
    box = Body("Sand", "granular", c + (0.0, 0.0, 0.15), tris, material=sand)
    floor = Body("Floor", "collider", np.array([(-1, -1, 0), (1, -1, 0), (1, 1, 0), (-1, 1, 0)], np.float64),
                 np.array([(0, 1, 2), (0, 2, 3)], np.int32))
    return Scene(Settings(frame_start=1, frame_end=3, backend="mpm", mpm_domain="auto"), (box, floor),
                 name="compile-reporting scene")


def _clean_env(state_dir: str) -> dict:
    """The environment of a server, bake or warm-up process whose kernel cache is the fingerprinted
    folder under ``state_dir`` (nothing inherited from this process's NUMBA_CACHE_DIR)."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               CLEARANCE_STATE_DIR=str(state_dir))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_CACHE_LOCATOR_CLASSES", None)
    return env


class CompileCache:
    """A kernel cache holding the kernels of :func:`compile_scene`, compiled once per test run by a real
    ``clearance-server bake`` (shared by the pytest-xdist workers of the run through a file lock)."""

    def __init__(self, folder: str):
        self.folder = folder
        self.scene = compile_scene()
        self.scene_file = os.path.join(folder, "compile.clrscene")
        self.state = os.path.join(folder, "state")

    def fill(self) -> None:
        done = os.path.join(self.folder, "filled")
        with open(os.path.join(self.folder, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if os.path.exists(done):
                    return
                from protocol import save_scene
                save_scene(self.scene_file, self.scene)
                r = subprocess.run([sys.executable, "-m", "solver_server", "bake", self.scene_file, "--out",
                                    os.path.join(self.folder, "out")], cwd=ROOT, env=_clean_env(self.state),
                                   capture_output=True, text=True, timeout=1800)
                assert r.returncode == 0, f"compile-scene bake failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
                open(done, "w").close()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def nearly_warm(self, state_dir, rebuilt=COMPILE_REBUILT) -> dict:
        """Copy the cache into ``state_dir`` (a fresh CLEARANCE_STATE_DIR) without the warm markers and
        without the files of ``rebuilt``; returns the environment of a process using it, which then
        really compiles those few kernels, and only those."""
        shutil.copytree(os.path.join(self.state, "numba"), os.path.join(str(state_dir), "numba"),
                        ignore=shutil.ignore_patterns("warm-*", *rebuilt))
        return _clean_env(state_dir)


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory) -> CompileCache:
    """The :class:`CompileCache` of this run: the compile-reporting tests (server, ``bake``, ``warmup``,
    the add-on's panel) copy it minus :data:`COMPILE_REBUILT`, so each compiles 17 small kernels for
    real in seconds, instead of each warming up the whole IPC solver first."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent          # shared by the workers of this run
    folder = os.path.join(str(base), "compile_cache")
    os.makedirs(folder, exist_ok=True)
    cc = CompileCache(folder)
    cc.fill()
    return cc
