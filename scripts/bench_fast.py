"""Fast solver (block descent) benchmark: the drape over a sphere against Blender's built-in cloth
and against the Accurate (Newton IPC) solver, measured in the same run.

drape: n x n quads, 1 m, dropped on a sphere (r = 0.25 m), self-contact, mu = 0.3, 24 fps (the scene
of scripts/bench_ipc.py). Every frame after the first (JIT warm-up) is timed, for the whole run
(48 frames by default), and every frame's edge-triangle intersections are counted with the exact
check for both Clearance and Blender (cloth quality 5, self-collision on).
Fast vs Accurate: the same scene at a size the Newton solver finishes in minutes; time, final shape
RMS difference (m) and the resting contact gap (smallest contact distance at the last frame).

Usage: python scripts/bench_fast.py [--quick] [--sizes 24 64] [--frames 48] [--accurate-size 24]
       [--plot docs/img/fast_scaling.png]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for p in (ROOT, os.path.join(ROOT, "scripts")):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_ipc import drape_scene, run_blender_drape  # noqa: E402
from solver_server.backends.mesh_backend import MeshBackend  # noqa: E402


def _log(msg: str) -> None:
    print(f"[bench_fast {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


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


def markdown(res: dict, frames: int) -> str:
    lines = [f"Drape over a sphere, self-contact, mu 0.3, 24 fps, {frames} frames, every frame after the "
             "first timed; intersections = largest per-frame count of edge-triangle intersections (exact test).",
             "",
             "| grid | vertices | Fast s/frame | sweeps/frame | Fast intersections | Blender s/frame | Blender intersections | Fast / Blender |",
             "|---|---|---|---|---|---|---|---|"]
    bl = {b["quads"]: b for b in res["blender"]}
    for r in res["fast"]:
        b = bl.get(r["n"])
        bs = f"{b['seconds_per_frame']:.3f}" if b else "-"
        bi = str(b["max_intersections"]) if b else "-"
        ratio = f"{r['seconds_per_frame'] / b['seconds_per_frame']:.2f}x" if b else "-"
        lines.append(f"| {r['n']}^2 | {r['vertices']:,} | {r['seconds_per_frame']:.3f} | {r['iterations_per_frame']:.0f} | "
                     f"{r['max_intersections']} | {bs} | {bi} | {ratio} |")
    c = res["compare"]
    if c:
        fa, ac = c["fast"], c["accurate"]
        lines += ["", f"Fast vs Accurate, {c['n']}^2 drape, {frames} frames (same run):", "",
                  "| solver | s/frame | iterations/frame | max intersections | resting gap (m) |", "|---|---|---|---|---|",
                  f"| Fast (block descent) | {fa['seconds_per_frame']:.3f} | {fa['iterations_per_frame']:.0f} sweeps | "
                  f"{fa['max_intersections']} | {fa['min_distance']:.2e} |",
                  f"| Accurate (Newton IPC) | {ac['seconds_per_frame']:.3f} | {ac['iterations_per_frame']:.0f} Newton | "
                  f"{ac['max_intersections']} | {ac['min_distance']:.2e} |",
                  "", f"Speed-up {ac['seconds_per_frame'] / fa['seconds_per_frame']:.1f}x; final shape RMS difference "
                  f"{c['rms'] * 1e3:.1f} mm (cloth 1 m wide)."]
    return "\n".join(lines)


def plot(res: dict, path: str) -> None:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="24^2 and 32^2 over 12 frames")
    ap.add_argument("--sizes", type=int, nargs="*", default=None)
    ap.add_argument("--frames", type=int, default=None)
    ap.add_argument("--accurate-size", type=int, default=None)
    ap.add_argument("--no-blender", action="store_true")
    ap.add_argument("--plot", default=None)
    a = ap.parse_args()
    sizes = a.sizes or ([24, 32] if a.quick else [24, 64])
    frames = a.frames or (12 if a.quick else 48)
    acc = a.accurate_size if a.accurate_size is not None else (16 if a.quick else 24)
    res = run(sizes, frames, acc, not a.no_blender)
    print(markdown(res, frames))
    if a.plot:
        try:
            plot(res, a.plot)
        except ImportError as e:  # matplotlib comes with the bench extra: pip install -e ".[bench]"
            _log(f"no plot: {e}")


if __name__ == "__main__":
    main()
