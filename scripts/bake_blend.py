"""Farm wrapper: bake a .blend with Clearance and save the result.

    python scripts/bake_blend.py FILE.blend [--frames A B] [--out FILE_baked.blend]
                                 [--server ADDRESS] [--blender /path/to/blender]
                                 [--solver-quality fast|accurate] [--max-newton-iterations N]
                                 [--export SCENE.clrscene] [--load-farm DIR]

With ``--blender`` the given Blender runs in background mode (``-b``) with this script as its
``--python`` (the add-on must be installed there); without it, the bpy module of this Python
does the work and the add-on is enabled from this checkout. The bake is the add-on's own
``clearance.bake`` operator (blocking in background mode); the output keeps its .pc2 caches
in the cache folder set in the file (by default ``//clearance_cache/<output name>/`` beside the output).
``--solver-quality`` overrides the file's Solver Quality and ``--max-newton-iterations`` its Max Newton
Iterations (a step's budget: a pour of hundreds of stiff props needs more than the default 100), both saved into
the output file, so it records what it was baked with.
``--export SCENE.clrscene`` bakes nothing: it writes the scene the bake would send (the add-on's
*Export Scene (.clrscene)*, with the same overrides) so that a node without Blender can bake it with
``clearance-server bake SCENE.clrscene --out DIR``; no server is started and the .blend is not saved.
``--load-farm DIR`` bakes nothing either: it attaches what ``clearance-server bake SCENE.clrscene --out DIR``
baked on the node (the add-on's *Load Farm Bake*: the same Mesh Cache modifiers, particles, shape keys or
keyed transforms as a Bake, DIR becoming the Cache Folder) and saves the output .blend; it refuses, naming
``DIR/server/scene.json``, when the file's scene is not the one that was exported (pass the ``--frames`` and
``--solver-quality`` the ``--export`` run used, and the node's ``--solver-quality`` if it gave one).
Progress goes to stdout as ``clearance: ...`` lines (each solver kernel of a cold compile, each
frame, the end, and a warning naming the objects of frames that did not converge).
Exit status: 0 baked, 1 the bake failed (the message is printed), 2 bad arguments.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse(argv: list) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("blend", help="the .blend file to bake")
    p.add_argument("--frames", nargs=2, type=int, metavar=("A", "B"), help="bake frames A..B (default: file's range)")
    p.add_argument("--out", help="output .blend (default: FILE_baked.blend)")
    p.add_argument("--server", help="tcp://host:port of a running server (default: start a local one)")
    p.add_argument("--blender", help="a Blender executable to run (default: the bpy module in this Python)")
    p.add_argument("--solver-quality", choices=("fast", "accurate"),
                   help="IPC solver: fast (block descent) or accurate (Newton IPC converged to the tolerance); "
                        "default: the file's Solver Quality")
    p.add_argument("--max-newton-iterations", type=int, metavar="N",
                   help="Newton iterations a step may take before it is reported unconverged (>= 1); "
                        "default: the file's Max Newton Iterations")
    p.add_argument("--export", metavar="SCENE.clrscene",
                   help="write the scene to this .clrscene file instead of baking (for clearance-server bake)")
    p.add_argument("--load-farm", metavar="DIR",
                   help="instead of baking, load the --out folder of clearance-server bake (Load Farm Bake) and save")
    args = p.parse_args(argv)
    if args.max_newton_iterations is not None and args.max_newton_iterations < 1:
        p.error(f"--max-newton-iterations must be at least 1, got {args.max_newton_iterations}")
    return args


def _enable_from_checkout() -> None:
    """Enable the add-on from this checkout through a local extensions repository."""
    import addon_utils
    import bpy
    repo = tempfile.mkdtemp(prefix="clearance_repo_")
    os.symlink(os.path.join(ROOT, "blender_addon"), os.path.join(repo, "clearance"))
    bpy.context.preferences.extensions.repos.new(name="Clearance", module="clearance_farm",
                                                 custom_directory=repo, source="USER")
    addon_utils.enable("bl_ext.clearance_farm.clearance", default_set=True)


def _enabled_module() -> str:
    import bpy
    for name in bpy.context.preferences.addons.keys():
        if name == "clearance" or name.endswith(".clearance"):
            return name
    return ""


def bake_here(args: argparse.Namespace) -> int:
    """Open, bake and save inside this process (bpy module or Blender's own Python)."""
    import bpy
    out = os.path.abspath(args.out or os.path.splitext(args.blend)[0] + "_baked.blend")
    bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.blend))
    if not _enabled_module():
        _enable_from_checkout()
    if not args.export:
        bpy.ops.wm.save_as_mainfile(filepath=out)  # "//" cache paths now resolve beside the output
    s = bpy.context.scene.clearance
    if args.frames:
        s.use_scene_range = False
        s.frame_start, s.frame_end = args.frames
    if args.server:
        s.server_address = args.server
    if args.solver_quality:
        s.solver_quality = args.solver_quality.upper()   # the add-on's enum: FAST / ACCURATE
    if args.max_newton_iterations is not None:
        s.max_newton_iterations = args.max_newton_iterations
    if args.export:
        return export_here(os.path.abspath(args.export))
    if args.load_farm:
        return load_farm_here(os.path.abspath(args.load_farm), out)
    try:
        result = bpy.ops.clearance.bake()
    except RuntimeError as exc:
        print(f"clearance: bake failed: {exc}", file=sys.stderr)
        return 1
    if result != {"FINISHED"}:
        print(f"clearance: bake failed: {s.last_error}", file=sys.stderr)
        return 1
    bpy.ops.wm.save_mainfile()
    print(f"clearance: baked {s.frames_baked} frames into {out}")
    if s.last_warning:   # frames whose solver did not converge (the objects and the likely cause)
        print(f"clearance: warning: {s.last_warning}", flush=True)
    return 0


def export_here(path: str) -> int:
    """Write the open file's scene to ``path`` with the add-on's Export Scene operator."""
    import bpy
    try:
        result = bpy.ops.clearance.export_scene(filepath=path)
    except RuntimeError as exc:
        print(f"clearance: export failed: {exc}", file=sys.stderr)
        return 1
    if result != {"FINISHED"}:
        print(f"clearance: export failed: {path} was not written", file=sys.stderr)
        return 1
    print(f"clearance: exported the scene to {path}; bake it with: clearance-server bake {path} --out DIR", flush=True)
    return 0


def load_farm_here(folder: str, out: str) -> int:
    """Attach the farm bake in ``folder`` with the add-on's Load Farm Bake operator, then save ``out``."""
    import bpy
    try:
        result = bpy.ops.clearance.load_farm_bake(directory=folder)
    except RuntimeError as exc:
        print(f"clearance: load failed: {exc}", file=sys.stderr)
        return 1
    if result != {"FINISHED"}:
        print(f"clearance: load failed: {bpy.context.scene.clearance.last_error}", file=sys.stderr)
        return 1
    bpy.ops.wm.save_mainfile()
    print(f"clearance: loaded the farm bake in {folder} into {out}", flush=True)
    return 0


def main(argv: list = None) -> int:
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:]
    args = parse(argv)
    if not os.path.isfile(args.blend):
        print(f"clearance: no such file: {args.blend}", file=sys.stderr)
        return 2
    if args.blender:
        rest = [a for a in argv if a != "--blender" and a != args.blender]
        cmd = [args.blender, "-b", "--factory-startup", "--python-exit-code", "1", "--python",
               os.path.abspath(__file__), "--"] + rest
        return subprocess.call(cmd)
    return bake_here(args)


if __name__ == "__main__":
    sys.exit(main())
