"""Fast solver (block descent) benchmark: the drape over a sphere against Blender's built-in cloth
and against the Accurate (Newton IPC) solver, measured in the same run.

drape: n x n quads, 1 m, dropped on a sphere (r = 0.25 m), self-contact, mu = 0.3, 24 fps (the scene
of benchmarks/ipc.py). Every frame after the first (JIT warm-up) is timed, for the whole run
(48 frames by default), and every frame's edge-triangle intersections are counted with the exact
check for both Clearance and Blender (cloth quality 5, self-collision on).
Fast vs Accurate: the same scene at a size the Newton solver finishes in minutes; time, final shape
RMS difference (m) and the resting contact gap (smallest contact distance at the last frame).

Usage: python -m benchmarks [--quick] fast [sizes=24,64] [frames=48] [accurate_size=24] [blender=no]
       [plot=docs/img/fast_scaling.png]        (--quick: 24^2 and 32^2 over 12 frames, Accurate at 16^2)
"""
from __future__ import annotations

import time

import numpy as np

from solver_server.backends.mesh_backend import MeshBackend

from .ipc import drape_scene, run_blender_drape
from .report import Table, log

TITLE = "Preview solver (block descent; called Fast before 2026-11-26): drape vs Blender's cloth and vs the converged solver"


def _log(msg: str) -> None:
    log("fast", msg)


def run_clearance(n: int, frames: int, quality: str) -> dict:
    """Bake the drape with one solver quality; per-frame seconds and exact intersection counts."""
    _log(f"Clearance {quality} drape {n}x{n}, {frames} frames")
    b = MeshBackend(drape_scene(n, frames, quality))
    t0 = time.perf_counter()
    b.advance()  # includes JIT compilation or cache load: reported, not in the per-frame figure
    first = time.perf_counter() - t0
    secs, its, inter, worst = [], [], 0, 0
    for f in range(frames - 1):
        r = b.advance()
        secs.append(r.stats["seconds"])
        its.append(r.stats["newton_iterations"])
        k = b.contact.count_intersections(b.stepper.x)
        inter += k
        worst = max(worst, k)
        if f % 8 == 7:
            _log(f"  frame {f + 2}: {r.stats['seconds']:.2f} s, {r.stats['newton_iterations']} iterations")
    cloth = b.system.blocks[0]
    x = b.stepper.x[cloth.offset:cloth.offset + cloth.n_out].copy()
    return {"n": n, "vertices": (n + 1) ** 2, "quality": quality, "frames": frames,
            "seconds_per_frame": float(np.mean(secs)), "total_seconds": float(np.sum(secs)),
            "iterations_per_frame": float(np.mean(its)), "max_intersections": worst,
            "first_frame_seconds": first, "min_distance": float(r.stats["min_distance"] or np.nan), "x": x}


def run(sizes, frames: int, accurate_size: int, blender: bool = True) -> dict:
    out = {"fast": [], "blender": [], "compare": None}
    for n in sizes:
        r = run_clearance(n, frames, "fast")
        out["fast"].append(r)
        _log(f"{n}^2 Fast: {r['seconds_per_frame']:.3f} s/frame, {r['max_intersections']} intersections at most")
        if blender:
            b = run_blender_drape(n, frames)
            out["blender"].append(b)
            _log(f"{n}^2 Blender: {b['seconds_per_frame']:.3f} s/frame, {b['max_intersections']} intersections at most "
                 f"(Fast / Blender {r['seconds_per_frame'] / b['seconds_per_frame']:.2f}x)")
    if accurate_size:
        fa = next((r for r in out["fast"] if r["n"] == accurate_size), None) or run_clearance(accurate_size, frames, "fast")
        ac = run_clearance(accurate_size, frames, "accurate")
        rms = float(np.sqrt(((fa["x"] - ac["x"]) ** 2).sum(1).mean()))
        out["compare"] = {"n": accurate_size, "fast": fa, "accurate": ac, "rms": rms}
    return out


def tables(res: dict, frames: int) -> list:
    """The section's parts for the results of :func:`run`."""
    t = Table(["grid", "vertices", "Fast s/frame", "sweeps/frame", "Fast intersections", "Blender s/frame",
               "Blender intersections", "Fast / Blender"], numeric=[False] + [True] * 7)
    bl = {b["quads"]: b for b in res["blender"]}
    for r in res["fast"]:
        b = bl.get(r["n"])
        t.add(f"{r['n']}^2", f"{r['vertices']:,}", f"{r['seconds_per_frame']:.3f}", f"{r['iterations_per_frame']:.0f}",
              r["max_intersections"], f"{b['seconds_per_frame']:.3f}" if b else "-",
              str(b["max_intersections"]) if b else "-",
              f"{r['seconds_per_frame'] / b['seconds_per_frame']:.2f}x" if b else "-")
    parts = [f"Drape over a sphere, self-contact, mu 0.3, 24 fps, {frames} frames, every frame after the "
             "first timed; intersections = largest per-frame count of edge-triangle intersections (exact test).", t]
    c = res["compare"]
    if c:
        fa, ac = c["fast"], c["accurate"]
        cmp = Table(["solver", "s/frame", "iterations/frame", "max intersections", "resting gap (m)"],
                    numeric=[False, True, False, True, True])
        cmp.add("Fast (block descent)", f"{fa['seconds_per_frame']:.3f}", f"{fa['iterations_per_frame']:.0f} sweeps",
                fa["max_intersections"], f"{fa['min_distance']:.2e}")
        cmp.add("Accurate (Newton IPC)", f"{ac['seconds_per_frame']:.3f}", f"{ac['iterations_per_frame']:.0f} Newton",
                ac["max_intersections"], f"{ac['min_distance']:.2e}")
        parts += [f"Fast vs Accurate, {c['n']}^2 drape, {frames} frames (same run):", cmp,
                  f"Speed-up {ac['seconds_per_frame'] / fa['seconds_per_frame']:.1f}x; final shape RMS difference "
                  f"{c['rms'] * 1e3:.1f} mm (cloth 1 m wide)."]
    return parts


def plot_scaling(res: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    v = [r["vertices"] for r in res["fast"]]
    ax.loglog(v, [r["seconds_per_frame"] for r in res["fast"]], "o-", label="Clearance Fast")
    if res["blender"]:
        ax.loglog(v[:len(res["blender"])], [b["seconds_per_frame"] for b in res["blender"]], "s--", label="Blender cloth (q5)")
    ax.set_xlabel("cloth vertices")
    ax.set_ylabel("seconds per frame")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def section(quick: bool = False, sizes: list = (), frames: int = 0, accurate_size: int = -1, blender: bool = True,
            plot: str = "") -> list:
    sizes = list(sizes) or ([24, 32] if quick else [24, 64])
    frames = frames or (12 if quick else 48)
    acc = accurate_size if accurate_size >= 0 else (16 if quick else 24)
    res = run(sizes, frames, acc, blender)
    parts = tables(res, frames)
    if plot:
        try:
            plot_scaling(res, plot)
        except ImportError as e:  # matplotlib comes with the bench extra: pip install -e ".[bench]"
            _log(f"no plot: {e}")
    return parts
