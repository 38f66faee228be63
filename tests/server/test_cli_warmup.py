"""``clearance-server warmup`` (issue 10): compile ahead from the command line, a real process.

The process gets a copy of the warm kernel cache minus a few modules (the approach of
test_compile_progress.py), so it really compiles a few kernels and finishes in seconds. It must
print each compiled kernel as ``bake`` does, then a summary naming the kernels, the seconds and the
cache folder, mark the cache warm so ``--if-cold`` compiles nothing, and fail with a clear message
and its own exit code when the cache folder cannot be written.
"""
import os
import re
import subprocess
import sys

from test_compile_progress import KERNEL_LINE, ROOT, _counts, _nearly_warm_env

SUMMARY = re.compile(r"warm-up done: (\d+) kernels compiled for fast in (\d+) s; kernel cache: (.+)$")


def _warmup(env, *args):
    return subprocess.run([sys.executable, "-m", "solver_server", "warmup", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def _cache_folder(env) -> str:
    if env.get("NUMBA_CACHE_DIR"):
        return env["NUMBA_CACHE_DIR"]
    r = subprocess.run([sys.executable, "-c", "from solver_server import kernel_cache; print(kernel_cache.cache_dir())"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return r.stdout.strip()


def test_warmup_prints_each_kernel_and_a_summary_then_if_cold_compiles_nothing(tmp_path, warm_kernels):
    warm_kernels("fast")   # the copied cache must hold the fast warm-up's kernels (but the winding ones)
    env = _nearly_warm_env(tmp_path, rebuilt=("winding.*",))   # a few kernels only: keeps the test short
    r = _warmup(env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    kernel_lines = [x for x in lines if KERNEL_LINE.fullmatch(x)]
    counts = _counts(kernel_lines)
    assert counts and counts == list(range(1, len(counts) + 1)), r.stdout
    assert any(x.split(": ")[1].startswith("winding.") for x in kernel_lines), kernel_lines
    m = SUMMARY.fullmatch(lines[-1])
    assert m, lines[-3:]
    assert int(m.group(1)) == len(kernel_lines)
    folder = _cache_folder(env)
    assert m.group(3) == folder and os.path.isfile(os.path.join(folder, "warm-warmup-fast"))

    again = _warmup(env, "--if-cold")
    assert again.returncode == 0, again.stderr
    assert "warm-up fast: kernels already compiled" in again.stdout
    assert not [x for x in again.stdout.splitlines() if KERNEL_LINE.search(x)], again.stdout
    assert again.stdout.splitlines()[-1].startswith("warm-up done: nothing to compile in ")


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
