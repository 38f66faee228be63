"""``clearance-server warmup`` (issue 10): compile ahead from the command line, a real process.

The default test warms up with the small MPM scene of the compile-reporting tests (``--scene``) in a
copy of its pre-built kernel cache minus one module (conftest ``compile_cache``), so the process
really compiles a few kernels and finishes in seconds. It must print each compiled kernel as
``bake`` does, then a summary naming the kernels, the seconds and the cache folder, mark the cache
warm so ``--if-cold`` compiles nothing, and fail with a clear message and its own exit code when the
cache folder cannot be written. The slow test runs the add-on's warm-up (the built-in IPC scene) on
an empty cache: every kernel compiled for real.
"""
import os
import re
import subprocess
import sys

import pytest

from test_compile_progress import KERNEL_LINE, REBUILT_MODULE, ROOT, _counts

SUMMARY = re.compile(r"warm-up done: (\d+) kernels compiled for (.+) in (\d+) s; kernel cache: (.+)$")


def _warmup(env, *args):
    return subprocess.run([sys.executable, "-m", "solver_server", "warmup", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def _cache_folder(env) -> str:
    if env.get("NUMBA_CACHE_DIR"):
        return env["NUMBA_CACHE_DIR"]
    r = subprocess.run([sys.executable, "-c", "from solver_server.runtime import kernel_cache; "
                        "print(kernel_cache.cache_dir())"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return r.stdout.strip()


def _check_warmup(env, args, label):
    """Run the warm-up, check its kernel lines and summary, then that ``--if-cold`` compiles nothing;
    returns the kernel lines."""
    r = _warmup(env, *args)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    kernel_lines = [x for x in lines if KERNEL_LINE.fullmatch(x)]
    counts = _counts(kernel_lines)
    assert counts and counts == list(range(1, len(counts) + 1)), r.stdout
    m = SUMMARY.fullmatch(lines[-1])
    assert m, lines[-3:]
    assert int(m.group(1)) == len(kernel_lines) and m.group(2) == label
    folder = _cache_folder(env)
    assert m.group(4) == folder
    assert any(f.startswith("warm-warmup-") for f in os.listdir(folder)), os.listdir(folder)

    again = _warmup(env, *args, "--if-cold")
    assert again.returncode == 0, again.stderr
    assert f"warm-up {label}: kernels already compiled" in again.stdout
    assert not [x for x in again.stdout.splitlines() if KERNEL_LINE.search(x)], again.stdout
    assert again.stdout.splitlines()[-1].startswith("warm-up done: nothing to compile in ")
    return kernel_lines


def test_warmup_prints_each_kernel_and_a_summary_then_if_cold_compiles_nothing(tmp_path, compile_cache):
    env = compile_cache.nearly_warm(tmp_path / "state")   # a real compile of a few kernels only
    kernel_lines = _check_warmup(env, ["--scene", compile_cache.scene_file], "scene compile.clrscene")
    assert any(x.split(": ")[1].startswith(REBUILT_MODULE + ".") for x in kernel_lines), kernel_lines


@pytest.mark.slow
def test_cold_builtin_warmup_compiles_every_fast_kernel(tmp_path):
    """The add-on's provisioning step on an empty kernel cache (minutes: every fast kernel)."""
    env = dict(os.environ, PYTHONPATH=ROOT, CLEARANCE_STATE_DIR=str(tmp_path / "state"))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_CACHE_LOCATOR_CLASSES", None)
    kernel_lines = _check_warmup(env, [], "fast")
    assert len(kernel_lines) > 100 and os.path.isfile(os.path.join(_cache_folder(env), "warm-warmup-fast"))


def test_a_bad_scene_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.clrscene"
    bad.write_bytes(b"not a scene")
    env = dict(os.environ, PYTHONPATH=ROOT, CLEARANCE_STATE_DIR=str(tmp_path / "state"))
    r = _warmup(env, "--scene", str(bad))
    assert r.returncode == 2 and "cannot warm up with this scene file" in r.stderr, (r.returncode, r.stderr)
    assert "compiling solver kernels" not in r.stdout


def test_unwritable_cache_folder_and_bad_quality_have_their_own_exit_codes(tmp_path):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the state folder should be")
    env = dict(os.environ, PYTHONPATH=ROOT, CLEARANCE_STATE_DIR=str(blocker))
    env.pop("NUMBA_CACHE_DIR", None)
    r = _warmup(env)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "cannot write the kernel cache folder" in r.stderr and "CLEARANCE_STATE_DIR" in r.stderr
    assert "compiling solver kernels" not in r.stdout
    bad = _warmup(env, "--solver-quality", "slow")
    assert bad.returncode == 2 and "invalid choice: 'slow'" in bad.stderr
    # a $NUMBA_CACHE_DIR that does not exist yet is made, as numba would (here under the file: refused)
    r = _warmup(dict(env, NUMBA_CACHE_DIR=str(blocker / "numba")))
    assert r.returncode == 3 and str(blocker / "numba") in r.stderr


def test_a_missing_numba_cache_dir_is_created_not_refused(tmp_path, monkeypatch):
    from solver_server.runtime import kernel_cache
    folder = tmp_path / "new" / "numba"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(folder))
    assert kernel_cache.is_writable() and folder.is_dir()
