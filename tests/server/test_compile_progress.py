"""Issue 10 item 2 / issue 8 item 11: a cold compile reports each kernel as numba compiles it.

Real numba in a real fresh process with an empty kernel cache: two real kernels of the contact
code are compiled under :class:`CompileProgress`, which must report each as it finishes, with
the estimated total; a second process, finding them cached, reports nothing.
"""
import json
import os
import re
import subprocess
import sys

from solver_server.runtime.compile_progress import message

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json
import numpy as np
from solver_server.runtime.compile_progress import CompileProgress, expected_kernels
from solver_server.contact import distance, vec3
seen = []
p, t0, t1, t2 = (np.array(x, np.float64) for x in ([0.1, 0.2, 1.0], [0, 0, 0], [1, 0, 0], [0, 1, 0]))
with CompileProgress(lambda done, exp, name, sec: seen.append([done, exp, name, sec]), "test/kernels", expected=7) as cp:
    distance.point_triangle_stencil(p, t0, t1, t2)
    vec3.cross(t1, t2)
print(json.dumps({"seen": seen, "remembered": expected_kernels("test/kernels")}))
"""


def _run(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               CLEARANCE_STATE_DIR=str(tmp_path / "state"))
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_each_compiled_kernel_is_reported_and_a_warm_process_reports_none(tmp_path):
    cold = _run(tmp_path)
    seen = cold["seen"]
    assert [s[0] for s in seen] == list(range(1, len(seen) + 1)) and len(seen) >= 2, seen
    assert all(s[1] == 7 for s in seen)
    names = {s[2] for s in seen}
    assert {"distance.point_triangle_stencil", "vec3.cross"} <= names, names
    assert all(b[3] >= a[3] >= 0 for a, b in zip(seen, seen[1:]))
    assert cold["remembered"] == len(seen)          # the count is kept as the next cold start's estimate
    warm = _run(tmp_path)
    assert warm["seen"] == []                       # loaded from the cache: nothing compiled, nothing said


def test_message_reads_well():
    assert message(12, 58, "barrier_hessian", 41.2) == "compiling solver kernels 12/~58: barrier_hessian (41 s)"
    assert message(61, 58, "k", 3.0) == "compiling solver kernels 61: k (3 s)"
    assert message(3, 0, "k", 3.0) == "compiling solver kernels 3: k (3 s)"     # no total before one is known


OWN_MODULES = {f[:-3] for _, _, files in os.walk(os.path.join(ROOT, "solver_server")) for f in files
               if f.endswith(".py")}


def _own(name: str) -> bool:
    """A reported name is 'module.kernel' of a module of the solver, never numba's ('arrayobj.impl')."""
    return name.split(".")[0] in OWN_MODULES and not name.endswith(".impl")


# -- end to end: a server and a bake that really compile a few kernels --------------------------------
from protocol import Client, Frame, Progress  # noqa: E402

KERNEL_LINE = re.compile(r"compiling solver kernels (\d+)(/~\d+)?: \S+ \(\d+ s\)")
REBUILT_MODULE = "inside"
"""The module whose kernels the nearly warm cache leaves out (conftest.COMPILE_REBUILT)."""


def _counts(lines) -> list:
    return [int(m.group(1)) for m in (KERNEL_LINE.search(x) for x in lines) if m]


def test_server_forwards_and_logs_each_compiled_kernel(tmp_path, compile_cache):
    env = compile_cache.nearly_warm(tmp_path / "state")   # a real compile of 17 kernels, nothing else
    proc = subprocess.Popen([sys.executable, "-m", "solver_server", "serve", "--bind", "tcp://127.0.0.1:0"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        address = proc.stdout.readline().split()[-1]
        with Client(address, timeout=10.0) as c:
            c.connect()
            job = c.submit(compile_cache.scene, str(tmp_path / "cache"))
            events = list(c.events(job, timeout=900.0))
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    solved = next(i for i, e in enumerate(events) if isinstance(e, Frame) and e.frame > 1)
    msgs = [(i, e.message) for i, e in enumerate(events) if isinstance(e, Progress) and e.state == "compiling"
            and KERNEL_LINE.fullmatch(e.message)]
    assert msgs and msgs[0][0] < solved, [(type(e).__name__, getattr(e, "message", "")) for e in events]
    counts = _counts(m for _, m in msgs)   # the server's heartbeat repeats the latest one every second
    assert counts == sorted(counts) and sorted(set(counts)) == list(range(1, max(counts) + 1)), counts
    assert any(m.split(": ")[1].split(".")[0] == REBUILT_MODULE for _, m in msgs), msgs
    names = {m.split(": ")[1].rsplit(" (", 1)[0] for _, m in msgs}
    assert all(_own(n) for n in names), sorted(n for n in names if not _own(n))   # issue 20: no numba internals
    logged = [x for x in err.splitlines() if x.startswith("clearance-server: job ")]
    assert _counts(logged) == list(range(1, max(counts) + 1)), err[-2000:]


def test_bake_cli_prints_each_compiled_kernel(tmp_path, compile_cache):
    env = compile_cache.nearly_warm(tmp_path / "state")
    r = subprocess.run([sys.executable, "-m", "solver_server", "bake", compile_cache.scene_file, "--out",
                        str(tmp_path / "o")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    kernel_lines = [x for x in lines if x.startswith("[compiling]") and KERNEL_LINE.search(x)]
    assert kernel_lines and _counts(kernel_lines) == list(range(1, len(kernel_lines) + 1)), r.stdout
    assert any(x.split(": ")[-1].startswith(REBUILT_MODULE + ".") for x in kernel_lines), kernel_lines
    names = {x.split(": ")[-1].rsplit(" (", 1)[0] for x in kernel_lines}
    assert all(_own(n) for n in names), sorted(n for n in names if not _own(n))
    assert lines.index(kernel_lines[0]) < next(i for i, x in enumerate(lines) if x.startswith("frame 2 done"))
    # the copied cache served everything else: a second bake in the same cache compiles nothing
    again = subprocess.run([sys.executable, "-m", "solver_server", "bake", compile_cache.scene_file, "--out",
                            str(tmp_path / "o2")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and not KERNEL_LINE.search(again.stdout), again.stdout
