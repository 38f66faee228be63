"""The README's picture of the Physics tab is what the add-on's draw() code draws today: every panel
of a selected Solid object and of the scene, run through the text layout of panel_text.py
(bpy in background mode cannot draw or screenshot the UI; see scripts/panel_diagram.py). After a UI change, run
``.venv/bin/python scripts/panel_diagram.py --write-readme``."""
import os

import bpy

import panel_text
from helpers import cube

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_readme_panel_picture_matches_the_draw_code(blender):
    ob = cube("Cube", size=0.2)
    bpy.context.view_layer.objects.active = ob
    ob.clearance.role = "SOLID"
    with bpy.context.temp_override(object=ob):
        lines = panel_text.draw_panels(bpy.context)
    text = "\n".join(lines)
    assert "[Apply Material Preset v]" in text and "Solver Quality" in text and "[ Bake ]" in text
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert panel_text.readme_block(text) in readme, \
        "README's panel picture is stale: run .venv/bin/python scripts/panel_diagram.py --write-readme\n" + text
