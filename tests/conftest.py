"""Shared pytest setup: the repository root on sys.path so tests import protocol/,
solver_server/ and blender_addon/ straight from the checkout; ``warm_kernels`` for the tests that
copy the kernel cache."""
import fcntl
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _lock_dir() -> str:
    """The folder of the kernel cache the suite's processes share (no import of solver_server here:
    it would set NUMBA_CACHE_DIR in this process; the warm-up subprocess works it out itself)."""
    d = (os.environ.get("NUMBA_CACHE_DIR") or os.environ.get("CLEARANCE_STATE_DIR")
         or os.path.join(os.path.expanduser("~"), ".cache", "clearance"))
    os.makedirs(d, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def warm_kernels():
    """``warm_kernels("fast")``: make sure the kernel cache of these sources holds the kernels of a
    bake of that solver quality, by running ``python -m solver_server.runtime.warmup --if-cold`` (returns at
    once when already done) in the environment every test's server inherits.

    The "nearly warm" tests (a real compilation of a few kernels) copy that cache minus a few modules:
    on a cold cache they would otherwise compile every kernel into their throwaway copy. A file lock
    keeps two pytest-xdist workers from compiling the same kernels at once (the second waits, then
    finds the marker)."""
    done = set()

    def ensure(quality: str) -> None:
        if quality in done:
            return
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with open(os.path.join(_lock_dir(), ".warmup.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                r = subprocess.run([sys.executable, "-m", "solver_server.runtime.warmup", "--if-cold", "--solver-quality",
                                    quality], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        assert r.returncode == 0, f"warm-up ({quality}) failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
        done.add(quality)
    return ensure
