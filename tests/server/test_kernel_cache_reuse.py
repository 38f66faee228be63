"""Issue 8 item 11: a fresh process reuses every kernel an earlier one compiled — from the same
checkout, and from a copy of the same sources at another path (an installed package, a second
checkout, a farm node's copy). numba used to file kernels by the absolute path of their source
folder, so the copy compiled everything again while the shared "warm" marker hid it.

Real processes, real numba compilation into a fresh cache (NUMBA_CACHE_DIR unset so that
solver_server configures it, as in production); the kernels are small ones of the contact code.
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json
import numpy as np
from solver_server.contact import distance, vec3   # first: solver_server configures numba's cache
from numba.core import config
p, t0, t1, t2 = (np.array(x, np.float64) for x in ([0.1, 0.2, 1.0], [0, 0, 0], [1, 0, 0], [0, 1, 0]))
distance.point_triangle_stencil(p, t0, t1, t2)
vec3.cross(t1, t2)
stats = [k.stats for k in (distance.point_triangle_stencil, vec3.cross)]
print(json.dumps({"hits": sum(sum(s.cache_hits.values()) for s in stats),
                  "misses": sum(sum(s.cache_misses.values()) for s in stats),
                  "cache_dir": config.CACHE_DIR, "paths": [s.cache_path for s in stats]}))
"""


def _run(package_root, state_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env.update(PYTHONPATH=package_root, CLEARANCE_STATE_DIR=str(state_dir))
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=package_root, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_second_process_and_a_copy_elsewhere_compile_nothing(tmp_path):
    copy = tmp_path / "elsewhere"
    copy.mkdir()
    shutil.copytree(os.path.join(ROOT, "solver_server"), copy / "solver_server",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(ROOT, "protocol"), copy / "protocol", ignore=shutil.ignore_patterns("__pycache__"))
    state = tmp_path / "state"
    first = _run(ROOT, state)
    assert first["misses"] == 2 and first["hits"] == 0          # compiled (and cached) once
    again = _run(ROOT, state)
    assert again["misses"] == 0 and again["hits"] == 2, again   # a fresh process: nothing compiled
    moved = _run(str(copy), state)
    assert first["cache_dir"].startswith(str(state))
    assert moved["cache_dir"] == first["cache_dir"]             # same sources, same fingerprint
    assert moved["misses"] == 0 and moved["hits"] == 2, moved   # same sources elsewhere: nothing compiled
    assert moved["paths"] == first["paths"]
    assert all(os.sep + os.path.join("solver_server", "contact") in p for p in first["paths"])
