"""Stiff bodies as affine bodies (ABD) vs the same scene as stiff FEM solids, same run, Newton IPC.

    .venv/bin/python scripts/bench_abd.py [--cubes 8] [--div 6] [--frames 12] [--abd-only]

A grid of cubes (10 cm, each face split into div x div quads: 6 div^2 + 2 vertices per cube) falls
from a few cm onto the ground and onto each other; per variant: seconds per frame (frames after the
first, which includes JIT compilation), Newton iterations, the exact edge-triangle intersection count
on every frame, DOFs.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.scene import Body, Material, Scene, Settings  # noqa: E402
from solver_server.backends.ipc_backend import IPCBackend  # noqa: E402
from solver_server.ipc.contact import count_intersections  # noqa: E402
from solver_server.ipc.integrator import TimeStepper  # noqa: E402
from solver_server.ipc.system import build_system  # noqa: E402
from solver_server.scene.primitives import box, grid_sheet  # noqa: E402


def make_scene(n: int, div: int, frames: int) -> Scene:
    bodies = []
    k = int(np.ceil(np.sqrt(n)))
    for i in range(n):
        cx, cy = (i % k) * 0.13, (i // k) * 0.13
        cz = 0.06 + 0.12 * ((i * 7) % 3)
        V, T = box((0.1, 0.1, 0.1), center=(cx, cy, cz), divisions=div)
        bodies.append(Body(f"cube{i}", "stiff", V, T, material=Material(density=500.0, friction=0.3)))
    G, GT, _ = grid_sheet((3.0, 3.0), (2, 2), center=(0.0, 0.0, 0.0))
    bodies.append(Body("ground", "collider", G, GT, material=Material(friction=0.3)))
    return Scene(Settings(frame_start=1, frame_end=frames + 1, solver_quality="accurate"), tuple(bodies))


def run(scene: Scene, affine: bool, frames: int, check: bool = True) -> dict:
    b = IPCBackend(scene)
    if not affine:  # the same scene with the stiff role as stiff FEM (the pre-ABD path)
        st = scene.settings
        b.system = build_system(scene, affine=False)
        from solver_server.ipc.contact_bridge import ContactTerms
        ct = ContactTerms(b.system, st.contact_gap)
        ct.kappa = b._initial_kappa(ct)
        b.contact = ct
        b.stepper = TimeStepper(b.system, st.dt, st.gravity, st.newton_tol, st.max_newton_iterations, ct)
    times, its, hits = [], 0, 0
    D = b.system.dof_map
    for f in range(frames):
        t0 = time.perf_counter()
        r = b.advance()
        times.append(time.perf_counter() - t0)
        its += r.stats["newton_iterations"]
        if check:  # exact test; its rational fallback is slow on large flat-resting meshes
            x = np.ascontiguousarray(D.to_x(b.stepper.x))
            hits += count_intersections(x, b.contact.mesh.faces, b.contact.mesh.edges)
        print(f"  {'ABD' if affine else 'FEM'} frame {f + 1}: {times[-1]:.2f} s, {r.stats['newton_iterations']} "
              f"Newton it., {r.stats['contacts']} contacts", flush=True)
    return {"s_per_frame": float(np.mean(times[1:])) if frames > 1 else times[0], "first": times[0],
            "newton_per_frame": its / frames, "intersections": hits,
            "dofs": int(3 * ((~D.is_slaved) & (b.system.weight_z > 0)).sum()),
            "tets": int(len(b.system.elastic.tets))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", type=int, default=8)
    ap.add_argument("--div", type=int, default=6)
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--abd-only", action="store_true", help="skip the stiff FEM variant (large scenes)")
    ap.add_argument("--no-check", action="store_true", help="skip the per-frame exact intersection count")
    a = ap.parse_args()
    sc = make_scene(a.cubes, a.div, a.frames)
    for name, aff in (("ABD", True), ("stiff FEM", False))[:1 if a.abd_only else 2]:
        r = run(sc, aff, a.frames, not a.no_check)
        checked = f"{r['intersections']} intersections over {a.frames} frames" if not a.no_check else "not checked"
        print(f"{name:10s} cubes {a.cubes} div {a.div}: {r['s_per_frame']:.3f} s/frame (first {r['first']:.1f} s), "
              f"{r['newton_per_frame']:.1f} Newton it./frame, {r['dofs']} simulated DOFs, {r['tets']} tets, "
              f"{checked}", flush=True)


if __name__ == "__main__":
    main()
