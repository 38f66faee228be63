"""The benchmark suite of issue 23: every scene against its outside reference, the default solver
(Converged, Newton IPC) beside Preview (block descent) and, where Blender has the feature, Blender.

One row per check, each with: the reference and where it comes from; the Converged answer and its
error; how many solver steps did not converge (and the worst residual they reported: a step either
meets Newton Tolerance or says so, never hidden); Converged CPU seconds per frame; Preview's answer,
error and CPU seconds (or its refusal, by name); Blender's wall seconds per frame (drapes only);
the exact edge-triangle intersection count (largest over every frame, Converged / Preview; 0
expected); whether the issue's bar is met; and the 1-minute load average when the scene started.

Scenes (benchmarks/suite_scenes.py; the drapes in benchmarks/suite_drape.py):

* ``cusick``   Cusick drapes of the silk, cotton and denim presets (tests/ipc/cusick.py), 48 frames;
* ``cantilever`` 1 m x 0.1 m x 0.1 m beam, E 1e7 Pa, 622 linear tets, clamped at one end, 72 frames;
  vs Euler-Bernoulli and vs the Converged answer at a quarter of the time step;
* ``sag``      20 cm soft cube (E 1e6 Pa) on a frictionless floor: shortening vs rho g H^2 / 2E;
* ``slope``    soft 10 cm box on a 20 degree slope, mu = 1.1 tan(theta): it must stick (< 2 mm);
* ``stack``    two soft 10 cm cubes on a floor (tests/ipc/test_default_rests.py): at rest;
* ``block``    a 72 kg stiff block on a 72 g cloth on the ground (tests/blockdescent/test_bd_affine.py): at rest;
* ``bounce``   the soft cube dropped on a frictionless floor (tests/ipc/bounce.py): never above its start;
* ``rod``      1 m stiff rod cantilever (E 1e10 Pa, 40 segments) vs Euler-Bernoulli;
* ``peirce``   the Peirce cloth strip (tests/ipc/test_bending_calibration.py) vs the elastica;
* ``drape``    n^2 cloth over a sphere (benchmarks/ipc.py's scene), 24^2 / 48^2 / 64^2 (128^2 with
  sizes=...), vs Blender's cloth (quality 5, self-collision) and timed through the add-on's Bake
  operator in real bpy with a real local server (wall seconds); plot docs/img/suite_scaling.png.

Times: Converged and Preview are CPU seconds of this process (time.process_time: every numba thread
counted) per frame, mean over every frame after the first (the first loads the kernel cache);
"via add-on" and Blender are wall seconds per frame (what an artist waits for).

Usage: python -m benchmarks [--quick] suite [scenes=cusick,rod] [sizes=24,48,64,128] [frames=N]
       [preview=no] [blender=no] [addon=no] [plot=docs/img/suite_scaling.png]
``--quick``: every scene at a small size and a few frames (minutes); not at rest, not meant to pass the bars.
"""
from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from protocol.scene import SceneError, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.contact import count_intersections

from .report import Table, log

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE = "Suite (issue 23): every scene vs its outside reference, Converged (default) vs Preview vs Blender"
SCENES = ("cusick", "cantilever", "sag", "slope", "stack", "block", "bounce", "rod", "peirce", "drape")
"""Every scene family, in table order."""
REST_SPEED = Settings().newton_tol
"""m/s: "at rest" means no vertex moved faster than this over the frame (displacement / frame time): the
default Newton Tolerance (1 cm/s), to which a converged step's velocities are known."""


def _log(msg: str) -> None:
    log("suite", msg)


def load() -> float:
    """The 1-minute load average now (other jobs share the cores)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def positions(b: MeshBackend) -> np.ndarray:
    """Vertex positions (n, 3) of every vertex (affine bodies expanded)."""
    return b.system.dof_map.to_x(b.stepper.x)


def intersections(b: MeshBackend) -> int:
    """Exact edge-triangle intersections of the whole collision surface now."""
    x = np.ascontiguousarray(positions(b))
    if b.contact is not None:
        return int(b.contact.count_intersections(x))
    s = b.system
    if not len(s.coll_faces):
        return 0
    return int(count_intersections(x, s.coll_faces, s.coll_edges))


def quality(sc, q: str):
    """The same scene with Solver Quality ``q`` ("accurate": Converged, "fast": Preview)."""
    return dataclasses.replace(sc, settings=dataclasses.replace(sc.settings, solver_quality=q))


def bake(scene, frames: int, measure, every=None, contact: bool = True, tet_spacing=None, label: str = "") -> dict:
    """Bake ``scene`` in this process for ``frames`` frames with its own solver quality.

    ``measure(b, run)`` gives the answer at the end ({"value": float, "text": str, ...}) from the backend and
    ``run``: {"trace": [every(b) after each frame] (when ``every`` is given), "speeds": [largest vertex speed
    of each frame, m/s]}; a frame's speed is its largest vertex displacement over the frame time, what the
    animation shows (Preview's energy guard may zero the solver's velocities of a creeping body, so the
    solver's own v is not used). Returns the answer with the CPU and wall seconds per frame (mean over
    frames 2..), the unconverged steps, the worst residual they reported, the largest intersection count
    over the frames, or {"refused": message} when the solver refuses the scene (SceneError at build)."""
    q = scene.settings.solver_quality
    _log(f"{label} {q}: {frames} frames")
    start_load = load()
    try:
        b = MeshBackend(scene, contact=contact, tet_spacing=tet_spacing)
    except SceneError as e:
        _log(f"{label} {q}: refused: {e}")
        return {"refused": str(e), "load": start_load}
    cpu, wall, trace, frame_speeds = [], [], [], []
    unconverged, steps, worst, inter = 0, 0, 0.0, 0
    x_prev = positions(b).copy()
    for f in range(frames):
        c0, w0 = time.process_time(), time.perf_counter()
        r = b.advance()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        x_now = positions(b).copy()
        frame_speeds.append(float(np.linalg.norm(x_now - x_prev, axis=1).max()) * scene.settings.fps)
        x_prev = x_now
        st = r.stats
        steps += st["steps"]
        if not st.get("preview"):
            unconverged += st["unconverged_steps"]
            if st["unconverged_steps"]:
                worst = max(worst, float(st.get("residual", np.nan)))
        inter = max(inter, intersections(b))
        if every is not None:
            trace.append(every(b))
    out = dict(measure(b, {"trace": trace, "speeds": frame_speeds}))
    timed = cpu[1:] or cpu
    out.update(quality=q, frames=frames, steps=steps, unconverged=unconverged, worst_residual=worst,
               cpu=float(np.mean(timed)), wall=float(np.mean(wall[1:] or wall)), first_cpu=cpu[0],
               intersections=inter, load=start_load, system=dict(b.system.stats), backend=b)
    _log(f"{label} {q}: {out['text']}; {out['cpu']:.3f} CPU s/frame, {unconverged} unconverged steps, "
         f"{inter} intersections")
    return out


def _verdict(bar, conv, err):
    """bar(conv, err) as True / False, None (shown '-') when there is no bar or it could not be judged."""
    v = None if bar is None else bar(conv, err)
    return None if v is None else bool(v)


def row(scene: str, size: str, frames: int, reference: str, ref_value, conv: dict, prev: dict | None,
        error, bar, blender: dict | None = None, addon: dict | None = None, note: str = "") -> dict:
    """One row of the suite table (a dict; :func:`table` formats it).

    ``error(answer) -> (float, str)``: an answer's error against the reference; ``bar(answer, err) -> bool``:
    the issue's pass criterion for the Converged answer."""
    err, err_text = error(conv)
    r = dict(scene=scene, size=size, frames=frames, reference=reference, ref_value=ref_value,
             answer=conv["value"], answer_text=conv["text"], error=err, error_text=err_text,
             converged=conv["unconverged"] == 0, unconverged_steps=conv["unconverged"], steps=conv["steps"],
             worst_residual=conv["worst_residual"], cpu_per_frame=conv["cpu"], intersections=conv["intersections"],
             bar=_verdict(bar, conv, err), load=conv["load"], note=note)
    if prev is None:
        r.update(preview_text="not run", preview_error=None, preview_error_text="-", preview_cpu=None,
                 preview_intersections=None)
    elif "refused" in prev:
        r.update(preview_text="refuses: " + prev["refused"].split(";")[0][:90], preview_error=None,
                 preview_error_text="-", preview_cpu=None, preview_intersections=None)
    else:
        pe, pe_text = error(prev)
        r.update(preview_text=prev["text"], preview_error=pe, preview_error_text=pe_text, preview_cpu=prev["cpu"],
                 preview_intersections=prev["intersections"])
    r["blender_wall"] = blender.get("seconds_per_frame") if blender else None
    r["blender_intersections"] = blender.get("max_intersections") if blender else None
    r["addon_wall"] = addon.get("seconds_per_frame") if addon else None
    return r


def rel_error(ref: float):
    """error(answer) as the relative difference from ``ref`` (fraction; text in %)."""
    def error(a):
        e = (a["value"] - ref) / ref
        return e, f"{100 * e:+.1f}%"
    return error


def abs_error(ref: float, unit: str = "", scale: float = 1.0, digits: int = 3):
    """error(answer) as answer - ref (text in ``unit`` after multiplying by ``scale``)."""
    def error(a):
        e = a["value"] - ref
        return e, f"{e * scale:+.{digits}f}{unit}"
    return error


def _f(v, fmt: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, fmt)


def table(rows: list) -> Table:
    t = Table(["scene", "size", "frames", "reference", "Converged (default)", "error", "unconverged steps",
               "worst residual (m/s)", "Converged CPU s/frame", "via add-on wall s/frame", "Preview", "Preview error",
               "Preview CPU s/frame", "Blender wall s/frame", "intersections C / P / B", "bar met", "load"],
              numeric=[False, False, True, False, False, True, True, True, True, True, False, True, True, True, False,
                       False, True])
    for r in rows:
        inter = " / ".join("-" if v is None else str(v) for v in
                           (r["intersections"], r["preview_intersections"], r["blender_intersections"]))
        t.add(r["scene"], r["size"], r["frames"], r["reference"], r["answer_text"], r["error_text"],
              f"{r['unconverged_steps']} of {r['steps']}",
              _f(r["worst_residual"], ".3g") if r["unconverged_steps"] else "-",
              _f(r["cpu_per_frame"]), _f(r["addon_wall"]), r["preview_text"], r["preview_error_text"],
              _f(r["preview_cpu"]), _f(r["blender_wall"]), inter, "-" if r["bar"] is None else ("yes" if r["bar"] else "**no**"), f"{r['load']:.1f}")
    return t


def run(scenes=SCENES, quick: bool = False, preview: bool = True, blender: bool = True, addon: bool = True,
        sizes=(), frames: int = 0, plot: str = "") -> dict:
    """Run the chosen scene families; {"rows": [...], "notes": [...], "drapes": [...], "seconds": s}."""
    from . import suite_drape, suite_scenes
    unknown = [s for s in scenes if s not in SCENES]
    if unknown:
        raise SystemExit(f"suite: unknown scene {unknown[0]!r}; choose from {', '.join(SCENES)}")
    t0 = time.perf_counter()
    rows, notes, drapes = [], [], []
    for name in SCENES:
        if name not in scenes:
            continue
        if name == "drape":
            res = suite_drape.run(quick, sizes, frames, preview, blender, addon)
            rows += res["rows"]
            notes += res["notes"]
            drapes = res["drapes"]
        else:
            res = getattr(suite_scenes, name)(quick, preview, frames)
            rows += res["rows"]
            notes += res.get("notes", [])
    out = {"rows": rows, "notes": notes, "drapes": drapes, "seconds": time.perf_counter() - t0}
    if plot and drapes:
        try:
            out["plot"] = suite_drape.plot_scaling(drapes, plot)
        except ImportError as e:   # matplotlib comes with the bench extra: pip install -e ".[bench]"
            _log(f"no plot: {e}")
    return out


def section(quick: bool = False, scenes: list = (), sizes: list = (), frames: int = 0, preview: bool = True,
            blender: bool = True, addon: bool = True,
            plot: str = os.path.join(ROOT, "docs", "img", "suite_scaling.png")) -> list:
    scenes = list(scenes) or list(SCENES)
    start_load = load()
    res = run(scenes, quick, preview, blender, addon, sizes, frames, plot)
    parts = [f"{'Quick sizes (not at rest, not meant to meet the bars): ' if quick else ''}"
             f"scenes {', '.join(scenes)}; load average {start_load:.2f} at the start; every time on this "
             "machine in this run. Converged / Preview: CPU seconds per frame of the solver in this process "
             "(time.process_time, all threads), mean over frames 2..; via add-on and Blender: wall seconds per frame. "
             "Unconverged steps: Converged steps that stopped at Max Newton Iterations (each reports its residual); "
             "Preview never tests convergence (block descent, a fixed sweep budget). Intersections: the largest "
             "exact edge-triangle count over every frame (Converged / Preview / Blender), 0 expected.",
             table(res["rows"])]
    parts += res["notes"]
    if res.get("plot"):
        parts.append(f"![suite drape scaling]({os.path.relpath(res['plot'], os.path.join(ROOT, 'docs'))})")
    parts.append(f"Suite time {res['seconds'] / 60:.1f} min.")
    return parts
