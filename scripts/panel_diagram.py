"""A text picture of Clearance's panels in Properties > Physics, drawn by the add-on's own draw() code.

The bpy module (Blender as a Python module, always in background mode) cannot draw the user interface:
``bpy.ops.screen.screenshot`` and ``screenshot_area`` fail their poll (no window to read), and
``gpu.types.GPUOffScreen`` raises "GPU functions for drawing are not available in background mode",
and a viewport render (``bpy.ops.render.opengl``) "Cannot use OpenGL render in background mode"
(checked with bpy 5.0.1; scene renders with Cycles, EEVEE and Workbench do work). So this script runs each
panel's real ``draw()`` (and the functions appended to it, such as the preset menus) against a layout that writes text instead of pixels: every
row, property (with its current value and unit), menu, button and label the panel asks for, in order
(tests/blender/panel_text.py, shared with the README test).
The README's panel picture is this output (``--write-readme`` refreshes it; a test checks they agree).

    .venv/bin/python scripts/panel_diagram.py [--role SOLID|CLOTH|...] [--write-readme]
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "blender"))
from panel_text import BEGIN, END, draw_panels, readme_block  # noqa: E402  (shared with the README test)


def build_scene(role: str):
    """An empty scene with a cube of the given role, active; the add-on enabled from this checkout."""
    import bmesh
    import bpy
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from demo import enable_addon
    bpy.ops.wm.read_factory_settings(use_empty=True)
    enable_addon()
    me = bpy.data.meshes.new("Cube")
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=0.2)
    bm.to_mesh(me)
    bm.free()
    ob = bpy.data.objects.new("Cube", me)
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    ob.clearance.role = role
    return ob


def diagram(role: str = "SOLID") -> str:
    """The text picture of the Physics tab for an object of ``role`` (default settings)."""
    import bpy
    build_scene(role)
    with bpy.context.temp_override(object=bpy.context.view_layer.objects.active):
        return "\n".join(draw_panels(bpy.context))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", default="SOLID", help="role of the selected object (default SOLID)")
    ap.add_argument("--write-readme", action="store_true", help="replace the README's panel picture with this one")
    args = ap.parse_args(argv)
    text = diagram(args.role)
    if not args.write_readme:
        print(text)
        return 0
    path = os.path.join(ROOT, "README.md")
    with open(path, encoding="utf-8") as f:
        readme = f.read()
    if BEGIN not in readme or END not in readme:
        print(f"panel_diagram: {path} has no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    head, rest = readme.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + readme_block(text) + tail)
    print(f"panel_diagram: wrote the panel picture into {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
