"""The architecture's boundaries, checked on the source tree.

- protocol/ and solver_server/ never import bpy (they run outside Blender, on farms, in other tools);
- blender_addon/ never imports numba or scipy (Blender's bundled Python has neither);
- protocol/ imports nothing from solver_server/ or blender_addon/ (it is vendored into the add-on).
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _imports(folder: str):
    """Yield (file, top-level module name) for every import statement under folder."""
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, folder)):
        for fn in files:
            if not fn.endswith(".py"):
                continue
            path = os.path.join(dirpath, fn)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        yield path, a.name.split(".")[0]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    yield path, node.module.split(".")[0]


@pytest.mark.parametrize("folder,forbidden", [
    ("protocol", {"bpy", "numba", "scipy", "solver_server", "blender_addon"}),
    ("solver_server", {"bpy", "blender_addon"}),
    ("blender_addon", {"numba", "scipy", "solver_server"}),
])
def test_layer_does_not_import(folder, forbidden):
    bad = [(os.path.relpath(p, ROOT), m) for p, m in _imports(folder) if m in forbidden]
    assert not bad, f"{folder}/ must not import {sorted(forbidden)}: {bad}"
