"""Issue 20 item 11: the README's ``blender -b`` one-liner that enables the add-on and bakes, run as written.

On a farm node whose Blender preferences never had Clearance enabled, ``bpy.ops.clearance`` does not
exist; the README gives the one command that enables the installed extension and bakes. Here the
extension zip is installed with Blender's own installer into the ``user_default`` repository of a
throw-away Blender user folder (``BLENDER_USER_RESOURCES``, so nothing of this machine's Blender is
touched), and a fresh process runs ``blender -b shot.blend --python-expr EXPR`` the way the bpy module
can: it opens shot.blend, then runs EXPR taken verbatim from README.md. Real bpy, a real server."""
import os
import re
import subprocess
import sys
import textwrap

import bpy

from helpers import cube, make_linear

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_oneliner() -> str:
    """The --python-expr of README.md's command that enables the add-on in ``blender -b``."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    exprs = re.findall(r'^blender -b shot\.blend --python-expr "([^"]+)"$', text, re.M)
    (expr,) = [e for e in exprs if "addon_utils.enable" in e]
    return expr


_INSTALL = textwrap.dedent("""
    import sys, bpy
    bpy.ops.extensions.package_install_files(filepath=sys.argv[1], repo="user_default", enable_on_install=False)
    print("HAS-OPERATOR", hasattr(bpy.ops.clearance, "bake") and hasattr(bpy.types, "CLEARANCE_OT_bake"))
""")
_BLENDER_B = textwrap.dedent("""
    import sys, bpy
    bpy.ops.wm.open_mainfile(filepath=sys.argv[1])     # blender -b shot.blend
    exec(sys.argv[2])                                   # --python-expr "..."
""")


def test_the_readme_blender_b_oneliner_enables_the_addon_and_bakes(blender, server, tmp_path):
    expr = readme_oneliner()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    ob = cube("box", location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    ob.keyframe_insert("location", index=2, frame=1)
    ob.location.z = 2.0
    ob.keyframe_insert("location", index=2, frame=4)
    make_linear(ob)
    scene.clearance.backend = "none"
    scene.clearance.server_address = server.address
    shot = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=shot)

    out = tmp_path / "dist"
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build_extension.py"), "--no-wheels", "--out",
                    str(out)], check=True, capture_output=True, text=True, timeout=120)
    (zip_path,) = list(out.glob("clearance-*.zip"))
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "blender_user"))
    env.pop("PYTHONPATH", None)
    run = dict(capture_output=True, text=True, timeout=300, cwd=str(tmp_path), env=env)
    r = subprocess.run([sys.executable, "-c", _INSTALL, str(zip_path)], **run)
    assert "HAS-OPERATOR False" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]   # installed, not enabled
    r = subprocess.run([sys.executable, "-c", _BLENDER_B, shot, expr], **run)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (tmp_path / "clearance_cache" / "shot" / "box.pc2").is_file(), r.stdout[-2000:]
    bpy.ops.wm.open_mainfile(filepath=shot)                  # the one-liner saved the baked file
    assert bpy.data.objects["box"].modifiers[-1].name == "Clearance Cache"
