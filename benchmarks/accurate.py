"""Accurate (Newton IPC) path: the cheaper configuration against the previous one, in the same run.

The drape of benchmarks/ipc.py (n x n-quad cloth over a sphere, self-contact, mu 0.3, 24 fps, solver
quality "accurate") is baked twice per size, once per configuration:

* ``before``: the previous Newton configuration, selected at run time: the stopping rule "step+rms"
  (step test AND per-DOF RMS force residual), one extra lagged-friction re-solve per step
  (FRICTION_UPDATES = 1) and SuperLU;
* ``after``: the defaults (step test with the per-body net-force safety net, no friction re-solve,
  CHOLMOD with reused symbolic analysis when scikit-sparse is installed);
* ablations, one change at a time with SuperLU: ``stop-rule-only``, ``no-resolve-only``, and
  ``after-superlu`` (both iteration changes, SuperLU: isolates the factorisation's share); and
  ``after-epsv1e-3`` (the defaults with the book's eps_v = 1e-3 m/s instead of 1e-4).

Per frame: wall seconds of the step (``stats["seconds"]``), Newton iterations and the exact
edge-triangle intersection count. The first frame (JIT compilation) is not timed.
Usage: python -m benchmarks [--quick] accurate [sizes=24,64] [frames=48,14] [configs=before,after]
(``frames`` gives the last frame per size; --quick = 24^2 over 12 frames).
"""
from __future__ import annotations

import time

import numpy as np

from solver_server.backends.mesh_backend import MeshBackend
from solver_server.contact import terms as contact_bridge
from solver_server.integrators import stop_test
from solver_server.solvers.newton import integrator, linear_solve

from .ipc import drape_scene
from .report import Table, log

TITLE = "Accurate path (Newton IPC): before / after the cheaper stopping rule, friction solve and Cholesky"

CONFIGS = {
    "before": dict(stop_rule="step+rms", friction_updates=1, cholmod=False),
    "after": dict(stop_rule=stop_test.STOP_RULE, friction_updates=integrator.FRICTION_UPDATES,
                  cholmod=linear_solve.HAVE_CHOLMOD),
    # one change at a time (ablation), all with SuperLU
    "stop-rule-only": dict(stop_rule=stop_test.STOP_RULE, friction_updates=1, cholmod=False),
    "no-resolve-only": dict(stop_rule="step+rms", friction_updates=integrator.FRICTION_UPDATES, cholmod=False),
    "after-superlu": dict(stop_rule=stop_test.STOP_RULE, friction_updates=integrator.FRICTION_UPDATES, cholmod=False),
    # the defaults with the book's friction transition speed (m/s) instead of EPS_V = 1e-4
    "after-epsv1e-3": dict(stop_rule=stop_test.STOP_RULE, friction_updates=integrator.FRICTION_UPDATES,
                           cholmod=linear_solve.HAVE_CHOLMOD, eps_v=1e-3),
}


def _log(msg: str) -> None:
    log("accurate", msg)


def run_config(name: str, n: int, last_frame: int, scene_frames: int = 48) -> dict:
    """Bake the n^2 drape to ``last_frame`` under configuration ``name``; per-frame figures."""
    cfg = CONFIGS[name]
    saved = (stop_test.STOP_RULE, integrator.FRICTION_UPDATES, linear_solve.HAVE_CHOLMOD, contact_bridge.EPS_V)
    contact_bridge.EPS_V = cfg.get("eps_v", contact_bridge.EPS_V)
    stop_test.STOP_RULE = cfg["stop_rule"]
    integrator.FRICTION_UPDATES = cfg["friction_updates"]
    linear_solve.HAVE_CHOLMOD = cfg["cholmod"]
    try:
        b = MeshBackend(drape_scene(n, scene_frames))
        b.advance()  # frame 1 (JIT): not timed
        rows = []
        for f in range(2, last_frame + 1):
            r = b.advance()
            rows.append((f, r.stats["seconds"], r.stats["newton_iterations"],
                         b.contact.count_intersections(b.stepper.x)))
            _log(f"{name} {n}^2 frame {f}: {rows[-1][1]:.2f} s, {rows[-1][2]} it., {rows[-1][3]} intersections")
        x = np.array(b.stepper.x[:(n + 1) ** 2])
        ch = getattr(b.stepper.linear_solver, "cholesky", None) if cfg["cholmod"] else None
        reuse = (ch.analyses, ch.factorisations) if ch is not None else None
    finally:
        stop_test.STOP_RULE, integrator.FRICTION_UPDATES, linear_solve.HAVE_CHOLMOD, contact_bridge.EPS_V = saved
    s = np.array([r[1] for r in rows])
    it = np.array([r[2] for r in rows])
    return {"config": name, "n": n, "frames": (2, last_frame), "s_per_frame": float(s.mean()),
            "it_per_frame": float(it.mean()), "s_per_it": float(s.sum() / max(it.sum(), 1)),
            "max_s": float(s.max()), "max_it": int(it.max()), "intersections": int(max(r[3] for r in rows)),
            "x": x, "per_frame": rows, "analyses_factorisations": reuse}


def tables(results: list) -> list:
    """The section's parts for the results of :func:`run_config`."""
    t = Table(["drape", "frames timed", "configuration", "s/frame", "Newton it./frame", "s/Newton it.",
               "max it. in a frame", "max intersections"], numeric=[False, False, False] + [True] * 5)
    for r in results:
        t.add(f"{r['n']}^2", f"{r['frames'][0]}-{r['frames'][1]}", r["config"], f"{r['s_per_frame']:.3f}",
              f"{r['it_per_frame']:.1f}", f"{r['s_per_it']:.3f}", r["max_it"], r["intersections"])
    parts = [t]
    for r in results:
        if r["analyses_factorisations"]:
            an, fa = r["analyses_factorisations"]
            parts.append(f"{r['n']}^2 {r['config']}: CHOLMOD symbolic analyses {an} for {fa} factorisations "
                         f"(pattern reused {100.0 * (1 - an / max(fa, 1)):.0f}%, frame 1 included).")
    by = {}
    for r in results:
        by.setdefault(r["n"], {})[r["config"]] = r
    for n, d in by.items():
        if "before" in d and "after" in d:
            a, b = d["after"], d["before"]
            rms = float(np.sqrt(((a["x"] - b["x"]) ** 2).sum(1).mean()))
            parts.append(f"{n}^2: after / before = {a['s_per_frame'] / b['s_per_frame']:.2f}x time per frame, "
                         f"{a['it_per_frame'] / b['it_per_frame']:.2f}x iterations per frame; cloth positions at "
                         f"frame {a['frames'][1]} differ by {rms * 1e3:.1f} mm RMS.")
    return parts


def section(quick: bool = False, sizes: list = (), frames: list = (), configs: list = ("before", "after")) -> list:
    sizes = list(sizes) or ([24] if quick else [24, 64])
    frames = list(frames) or ([12] if quick else [48, 14][:len(sizes)])
    if len(frames) != len(sizes):
        raise SystemExit("accurate: frames needs one last frame per size")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"accurate: unknown configuration {unknown[0]!r}; use {', '.join(CONFIGS)}")
    t0 = time.perf_counter()
    results = [run_config(c, n, f) for n, f in zip(sizes, frames) for c in configs]
    return ["Drape over a sphere (benchmarks/ipc.py's scene), solver quality Accurate; `before` = the previous "
            "Newton configuration selected at run time (stopping rule step+rms, one friction re-solve, SuperLU), "
            f"`after` = the defaults (linear solver: {linear_solve.direct_backend()})."] + tables(results) + [
            f"Total {(time.perf_counter() - t0) / 60:.1f} min."]
