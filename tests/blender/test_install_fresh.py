"""The whole install, as an artist does it: the zip, Install from Disk, Bake. Nothing else.

A fresh venv holds only the bpy module (bpy==5.0.1 and what it requires, numpy among them), like
Blender's bundled Python: no numba, no scipy, no pyzmq. The zip built by scripts/build_extension.py
(with its linux pyzmq/msgpack wheels) is installed through ``bpy.ops.extensions.package_install_files``
into a fresh user folder (``BLENDER_USER_RESOURCES``), a soft box is dropped on a floor and
``bpy.ops.clearance.bake()`` runs in background mode: it must install the solver's dependencies from
PyPI into the extension's user folder, compile the kernels ahead, start the server and bake, printing
its progress, and the box must come to rest on the floor without passing through it.

Slow (a 100 MB download and a cold compile of the solver kernels: minutes). The venv is made once
in ``$CLEARANCE_FRESH_VENV`` (default /tmp/clearance_bpy501) and reused: it never receives the solver,
which goes into the per-run user folder.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BPY = "bpy==5.0.1"

_SCRIPT = textwrap.dedent("""
    import json, os, sys, bpy
    zip_path, repo, cache = sys.argv[sys.argv.index("--") + 1:]
    bpy.context.preferences.extensions.repos.new(name="user", module="user", custom_directory=repo, source="USER")
    bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user", enable_on_install=True)
    assert "bl_ext.user.clearance" in bpy.context.preferences.addons, list(bpy.context.preferences.addons.keys())
    for ob in list(bpy.data.objects):
        bpy.data.objects.remove(ob)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 16
    bpy.ops.mesh.primitive_cube_add(size=0.2, location=(0.0, 0.0, 0.3))
    box = bpy.context.object
    box.name = "Box"
    box.clearance.role = "SOLID"
    bpy.ops.mesh.primitive_plane_add(size=2.0, location=(0.0, 0.0, 0.0))
    bpy.context.object.clearance.role = "COLLIDER"
    scene.clearance.cache_folder = cache
    result = bpy.ops.clearance.bake()
    zs = {}
    for f in (1, 16):
        scene.frame_set(f)
        ev = box.evaluated_get(bpy.context.evaluated_depsgraph_get())
        zs[f] = min((ev.matrix_world @ v.co).z for v in ev.data.vertices)
    user = bpy.utils.extension_path_user("bl_ext.user.clearance")
    print("RESULT " + json.dumps({"result": sorted(result), "min_z": zs, "status": scene.clearance.status,
                                  "error": scene.clearance.last_error, "user": user,
                                  "user_files": sorted(os.listdir(user)),
                                  "deps": sorted(os.listdir(os.path.join(user, "solver")))}))
""")


def fresh_venv() -> str:
    """A venv with only the bpy module (made once, reused); its python's path."""
    venv = os.environ.get("CLEARANCE_FRESH_VENV", "/tmp/clearance_bpy501")
    python = os.path.join(venv, "bin", "python")
    ok = os.path.exists(python) and subprocess.run([python, "-c", "import bpy"], capture_output=True,
                                                    timeout=300).returncode == 0
    if not ok:
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True, timeout=300)
        subprocess.run([python, "-m", "pip", "install", "-q", BPY], check=True, timeout=3600)
    return python


@pytest.mark.slow
def test_zip_install_then_bake_with_nothing_else(tmp_path):
    python = fresh_venv()
    for module in ("numba", "scipy", "zmq", "solver_server"):
        r = subprocess.run([python, "-c", f"import {module}"], capture_output=True, cwd=str(tmp_path))
        assert r.returncode != 0, f"the fresh venv must not have {module}"
    out = tmp_path / "dist"
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build_extension.py"), "--platform", "linux-x64",
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=600)
    (zip_path,) = list(out.glob("clearance-*.zip"))
    script = tmp_path / "artist.py"
    script.write_text(_SCRIPT)
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "CLEARANCE_STATE_DIR", "PYTHONPATH", "NUMBA_CACHE_LOCATOR_CLASSES")}
    env["BLENDER_USER_RESOURCES"] = str(tmp_path / "blender_user")
    r = subprocess.run([python, str(script), "--", str(zip_path), str(repo), str(tmp_path / "cache")],
                       capture_output=True, text=True, timeout=3600, cwd=str(tmp_path), env=env)
    log = r.stdout + r.stderr
    (tmp_path / "log.txt").write_text(log)
    lines = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    assert r.returncode == 0 and lines, log[-6000:]
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["result"] == ["FINISHED"] and not res["error"], res
    # The solver was installed into the extension's user folder, with this Python's tag, and compiled there.
    assert res["user"].startswith(str(tmp_path / "blender_user")), res
    assert res["deps"] == ["cp311", "requirements.txt"] and {"solver", "state"} <= set(res["user_files"]), res
    # What blender -b printed: the install, each compiled kernel, then the frames.
    printed = r.stdout.splitlines()
    assert any(re.match(r"clearance: Installing solver dependencies \d/6: downloading numba", x) for x in printed), log
    assert any(re.match(r"clearance: Compiling solver kernels 1(/~\d+)?: ", x) for x in printed), log
    assert any(x.startswith("clearance: Baked 1–16") for x in printed), log
    i_inst = next(i for i, x in enumerate(printed) if x.startswith("clearance: Installing solver dependencies"))
    i_comp = next(i for i, x in enumerate(printed) if x.startswith("clearance: Compiling solver kernels 1"))
    i_frame = next(i for i, x in enumerate(printed) if x.startswith("clearance: Frame 2 of 16"))
    assert i_inst < i_comp < i_frame
    # Physics: the box fell 0.2 m onto the floor and rests on it, never below it.
    z0, z1 = res["min_z"]["1"], res["min_z"]["16"]
    assert abs(z0 - 0.2) < 1e-4 and -1e-4 <= z1 < 0.01, res["min_z"]
