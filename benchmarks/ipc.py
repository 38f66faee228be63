"""IPC benchmark: cloth drape on a sphere (ours vs Blender's built-in cloth, same mesh, same run),
a pile of eight soft cubes, drape scaling with resolution, and direct vs CG linear solves.

drape: an n x n-quad cloth (64^2 quads = 4,225 vertices by default), 1 m, dropped on a sphere
(r = 0.25 m) with self-contact, mu = 0.3, 24 fps, 48 frames. For Blender the same grid gets a Cloth
modifier and the sphere a Collision modifier; its per-frame positions are checked with our
count_intersections (edge-triangle intersections of cloth + sphere). bpy is imported here only.

Sizes: full = 64^2 drape over 48 frames, stack 24 frames, scaling 16^2 / 32^2 / 64^2, linear solvers on the
32^2 drape; --quick = 24^2 drape over 12 frames and smaller everything else (a few minutes).
Usage: python -m benchmarks [--quick] ipc [blender=no] [frames=N] [plot=docs/img/drape_scaling.png]
``run()`` returns the results as a dict, ``section()`` the markdown section.
"""
from __future__ import annotations

import os
import platform
import time

import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.model.primitives import box, grid_sheet, icosphere

from .report import Table, log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE = "IPC solver: drape vs Blender's cloth, stack, scaling"


def drape_scene(n: int, frames: int, quality: str = "accurate") -> Scene:
    V, T, E = grid_sheet((1.0, 1.0), (n, n), center=(0, 0, 0.3))
    S, ST = icosphere(0.25, subdivisions=3)
    cloth = Body("cloth", "cloth", V, T, E, material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5,
                                                              bending_stiffness=1e-6, friction=0.3))
    return Scene(Settings(frame_end=frames + 1, fps=24.0, solver_quality=quality), (cloth, Body("sphere", "collider", S, ST,
                                                                        material=Material(friction=0.3))))


def _log(msg: str) -> None:
    log("ipc", msg)


def run_drape(n: int, frames: int, linear_solver: str = "direct") -> dict:
    _log(f"drape {n}x{n}, {frames} frames, {linear_solver}")
    sc = drape_scene(n, frames)
    t0 = time.perf_counter()
    b = MeshBackend(sc, linear_solver=linear_solver)
    b.advance()  # first frame includes JIT compilation: not timed
    build = time.perf_counter() - t0
    secs, its, cts, inter = [], [], [], 0
    for _ in range(frames - 1):
        r = b.advance()
        secs.append(r.stats["seconds"])
        its.append(r.stats["newton_iterations"])
        cts.append(r.stats["contacts"])
        inter = max(inter, b.contact.count_intersections(b.stepper.x))
    return {"quads": n, "vertices": (n + 1) ** 2, "frames": frames, "seconds_per_frame": float(np.mean(secs)),
            "max_seconds_per_frame": float(max(secs)), "newton_per_frame": float(np.mean(its)),
            "seconds_per_newton": float(np.sum(secs) / max(np.sum(its), 1)), "max_contacts": int(max(cts)),
            "max_intersections": inter, "first_frame_seconds": build, "linear_solver": linear_solver}


def run_blender_drape(n: int, frames: int) -> dict:
    """Blender's cloth on the same grid and sphere: wall and CPU seconds per frame (CPU: this process, every
    thread; less sensitive to other jobs on the machine than wall) and our intersection count."""
    _log(f"Blender cloth {n}x{n}, {frames} frames")
    import bpy
    from solver_server.contact.intersection import count_intersections
    from solver_server.contact.mesh import edges_from_faces
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scn = bpy.context.scene
    V, T, _ = grid_sheet((1.0, 1.0), (n, n), center=(0, 0, 0.3))
    S, ST = icosphere(0.25, subdivisions=3)

    def obj(name, verts, faces):
        me = bpy.data.meshes.new(name)
        me.from_pydata(verts.tolist(), [], faces.tolist())
        me.update()
        ob = bpy.data.objects.new(name, me)
        scn.collection.objects.link(ob)
        return ob

    cloth = obj("cloth", V, T)
    sph = obj("sphere", S, ST)
    sph.modifiers.new("col", "COLLISION")
    mod = cloth.modifiers.new("cloth", "CLOTH")
    mod.collision_settings.use_self_collision = True
    mod.point_cache.frame_start = 1
    mod.point_cache.frame_end = frames + 1
    scn.frame_start, scn.frame_end = 1, frames + 1
    scn.render.fps = 24
    faces = np.concatenate([T, ST + len(V)]).astype(np.int32)
    edges = edges_from_faces(faces)
    secs, cpus, inter = [], [], 0
    for f in range(1, frames + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        scn.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        me = cloth.evaluated_get(dg).to_mesh()
        x = np.empty(len(me.vertices) * 3)
        me.vertices.foreach_get("co", x)
        cloth.evaluated_get(dg).to_mesh_clear()
        if f > 1:
            secs.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        xw = np.concatenate([x.reshape(-1, 3), S])
        inter = max(inter, count_intersections(xw, faces, edges))
    return {"quads": n, "seconds_per_frame": float(np.mean(secs)), "cpu_seconds_per_frame": float(np.mean(cpus)),
            "max_intersections": int(inter)}


def run_stack(frames: int, div: int = 4, spacing: float = 0.2 / 4.5) -> dict:
    """Eight 0.2 m soft cubes (E = 100 kPa, mu 0.3) dropped in a pile on the ground; the BCC lattice
    spacing 0.2/4.5 m gives ~1,000 tets per cube (0.2/9 gave ~7,500)."""
    _log(f"stack of 8 cubes, {frames} frames")
    bodies = []
    k = 0
    for i in range(2):
        for j in range(2):
            for l in range(2):
                V, T = box((0.2, 0.2, 0.2), center=(0.25 * i - 0.1 + 0.03 * l, 0.25 * j - 0.1, 0.15 + 0.3 * l + 0.05 * i),
                           divisions=div)
                bodies.append(Body(f"cube{k}", "solid", V, T, material=Material(youngs_modulus=1e5, friction=0.3)))
                k += 1
    G, GT, _ = grid_sheet((3.0, 3.0), (2, 2))
    bodies.append(Body("ground", "collider", G, GT, material=Material(friction=0.3)))
    sc = Scene(Settings(frame_end=frames + 1, solver_quality="accurate"), tuple(bodies))
    b = MeshBackend(sc, tet_spacing={b.name: spacing for b in bodies})
    b.advance()
    secs, its = [], []
    for _ in range(frames - 1):
        r = b.advance()
        secs.append(r.stats["seconds"])
        its.append(r.stats["newton_iterations"])
    return {"cubes": 8, "tets_per_cube": b.system.stats["tets"] // 8, "frames": frames,
            "seconds_per_frame": float(np.mean(secs)), "newton_per_frame": float(np.mean(its)),
            "max_intersections": b.contact.count_intersections(b.stepper.x)}


def machine() -> str:
    """CPU model, core count and load when the benchmark started (other jobs share the cores)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(l.split(":", 1)[1].strip() for l in fh if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{cpu}, {os.cpu_count()} cores, load average {load:.1f} at start"


def run(quick: bool = False, blender: bool = True, plot: str | None = None, frames: int | None = None) -> dict:
    frames = frames or (12 if quick else 48)
    n_main = 24 if quick else 64
    t_start = time.perf_counter()
    res = {"machine": machine(), "drape": run_drape(n_main, frames)}
    if blender:
        try:
            res["blender_drape"] = run_blender_drape(n_main, frames)
        except Exception as exc:  # bpy missing or API drift: report, do not hide our own figures
            res["blender_drape"] = {"error": repr(exc)}
    res["stack"] = run_stack(6 if quick else 24)
    sizes = [8, 16] if quick else [16, 32, 64]
    res["scaling"] = [res["drape"] if s == n_main else run_drape(s, 8 if quick else 16) for s in sizes]
    mid = 16 if quick else 32
    res["linear_solver"] = {m: run_drape(mid, 6 if quick else 12, m) for m in ("direct", "cg")}
    res["total_seconds"] = time.perf_counter() - t_start
    if plot:
        try:
            res["plot"] = plot_scaling(res["scaling"], res.get("blender_drape"), plot)
        except ImportError as e:  # matplotlib comes with the bench extra: pip install -e ".[bench]"
            _log(f"no plot: {e}")
    return res


def plot_scaling(scaling: list, blender: dict | None, path: str) -> str:
    """Log-log plot of seconds per frame vs cloth vertices (ours; Blender's point if measured)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    v = [r["vertices"] for r in scaling]
    t = [r["seconds_per_frame"] for r in scaling]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.loglog(v, t, "o-", label="Clearance IPC drape")
    if blender and "seconds_per_frame" in blender:
        ax.loglog([(blender["quads"] + 1) ** 2], [blender["seconds_per_frame"]], "s", label="Blender cloth (same run)")
    ax.set_xlabel("cloth vertices")
    ax.set_ylabel("seconds per frame")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def section(quick: bool = False, blender: bool = True, frames: int = 0,
            plot: str = os.path.join(ROOT, "docs", "img", "drape_scaling.png")) -> list:
    res = run(quick, blender, plot or None, frames or None)
    d = res["drape"]
    drape = Table(["solver", "s/frame", "Newton it./frame", "s/Newton it.", "max contacts", "max intersections"])
    drape.add("Clearance IPC", f"{d['seconds_per_frame']:.3f}", f"{d['newton_per_frame']:.1f}",
              f"{d['seconds_per_newton']:.3f}", d["max_contacts"], d["max_intersections"])
    parts = [f"Drape: {d['quads']}x{d['quads']} quads ({d['vertices']} vertices) on a sphere, self-contact, mu 0.3, "
             f"{d['frames']} frames at 24 fps (first frame, with JIT, not timed). Machine: {res['machine']}.", drape]
    bl = res.get("blender_drape")
    if bl and "error" not in bl:
        drape.add("Blender cloth", f"{bl['seconds_per_frame']:.3f}", "-", "-", "-", bl["max_intersections"])
        parts.append(f"Ratio ours / Blender: {d['seconds_per_frame'] / bl['seconds_per_frame']:.1f}x per frame.")
    elif bl:
        drape.add("Blender cloth", f"failed: {bl['error'][:80]}", "", "", "", "")
    st = res["stack"]
    parts.append(f"Stack: {st['cubes']} soft cubes (~{st['tets_per_cube']} tets each) dropped in a pile, "
                 f"{st['frames']} frames: {st['seconds_per_frame']:.3f} s/frame, {st['newton_per_frame']:.1f} Newton "
                 f"it./frame, final intersections {st['max_intersections']}.")
    scaling = Table(["vertices", "frames", "s/frame", "Newton it./frame", "s/Newton it."])
    for r in res["scaling"]:
        scaling.add(r["vertices"], r["frames"], f"{r['seconds_per_frame']:.3f}", f"{r['newton_per_frame']:.1f}",
                    f"{r['seconds_per_newton']:.3f}")
    parts += ["Scaling (drape):", scaling, "Linear solver (drape, mid size): " + ", ".join(
        f"{m}: {r['seconds_per_frame']:.3f} s/frame, {r['newton_per_frame']:.1f} it."
        for m, r in res["linear_solver"].items()), f"Total benchmark time {res['total_seconds'] / 60:.1f} min."]
    if res.get("plot"):
        parts.append(f"![drape scaling]({os.path.relpath(res['plot'], os.path.join(ROOT, 'docs'))})")
    return parts
