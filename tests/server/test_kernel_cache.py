"""The numba kernel cache follows the sources, and the first bake reports "compiling"."""
import os
import shutil

from solver_server.runtime import kernel_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_numba_cache_dir_is_keyed_by_the_sources():
    import numba  # noqa: F401  (imported after solver_server configured it)
    from numba.core import config
    assert config.CACHE_DIR == kernel_cache.cache_dir()
    assert kernel_cache.source_fingerprint() in kernel_cache.cache_dir()


def test_fingerprint_changes_when_any_source_changes(tmp_path):
    """A copy of the package with one edited (inlined-kernel) module gets another fingerprint."""
    pkg = tmp_path / "solver_server"
    shutil.copytree(os.path.join(ROOT, "solver_server"), pkg, ignore=shutil.ignore_patterns("__pycache__"))
    first = kernel_cache.tree_fingerprint(str(pkg))
    assert first == kernel_cache.tree_fingerprint(os.path.join(ROOT, "solver_server"))
    with open(pkg / "solvers" / "mpm" / "kernels.py", "a") as f:
        f.write("\n# edited\n")
    assert kernel_cache.tree_fingerprint(str(pkg)) != first


def test_warm_marker_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert kernel_cache.is_warm("none")
    assert not kernel_cache.is_warm("ipc")
    kernel_cache.mark_warm("ipc")
    assert kernel_cache.is_warm("ipc")
    assert not kernel_cache.is_warm("mpm")
