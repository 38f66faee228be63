"""Stiff bodies (ABD): a pile of cubes in Clearance (Fast and Accurate) vs Blender's rigid body world
(Bullet), and vs the same scene with the stiff role as stiff FEM solids (the pre-ABD path), in one run.

    python -m benchmarks [--quick] abd [cubes=100] [div=13] [frames=24] [accurate=no] [blender=no] [layer=5]
                                       [fem_frames=K] [fem_div=D] [fem_quality=accurate] [fem_only=yes]
                                       [fem_profile=yes] [partial=FILE]        (--quick: 25 cubes, 12 frames)

fem_frames=K (default 0: off) also bakes the first K frames of the scene as stiff FEM (tetrahedralised
cubes, E = 1e8 Pa), beside ABD on the same K frames with the same solver; fem_quality picks that solver
(fast, accurate or both: fast then accurate); fem_div=D does that comparison on cubes of div D instead of
div (a stiff FEM pile of 100 cubes of 1,016 surface vertices is ~1.7 million tets: one div-13 cube is
3,368 nodes, 17,118 tets); fem_only=yes skips the pile table (Fast, Accurate, Bullet) and runs only the
comparison; fem_profile=yes profiles the FEM runs (cProfile, top functions by own time to stderr).
layer=S: layers of S x S cubes (default 5), so a few cubes still fall onto each other. partial=FILE
rewrites FILE with the pile table so far after every Clearance frame (a run cut short keeps its figures).

Scene: N cubes of 10 cm (each face split into div x div quads: 6 div^2 + 2 vertices, 1,016 at div 13),
density 500 kg/m^3, mu 0.3, in layers of 5 x 5 (0.15 m pitch) above a ground plane, each layer shifted by half a cube
and turned about z, so they fall onto the ground and onto each other (a pile). 24 fps.
Per solver: seconds per frame, wall and the process's CPU time (all threads), over the frames after the first (the first includes JIT compilation / cache
load and is reported apart), the exact edge-triangle intersection count on every frame
(contact/intersection.py, on Bullet's result too), and the deepest penetration: for Bullet the
largest overlap of any two cubes (separating-axis depth of the two oriented boxes) or of a cube below
the ground; for Clearance the same measure (0 when the surfaces never cross). Also the time of the
start-frame exact intersection check (MeshBackend._check_initial) on the scene.
Blender: collision shape Box (the shape an artist picks for a cube; Bullet then ignores the 1,016
vertices), default world (10 substeps, 10 solver iterations), its point cache filled frame by frame
with scene.frame_set, timed the same way.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.solvers.newton.integrator import TimeStepper
from solver_server.model.system import build_system
from solver_server.contact import count_intersections, edges_from_faces
from solver_server.model.primitives import box, grid_sheet

from .report import Table, log, render

TITLE = ("Stiff bodies (ABD): 100 cubes of 1,016 vertices falling into a pile, Fast vs Blender's rigid body (Bullet); "
         "ABD vs stiff FEM")
SIZE = 0.1  # m, cube edge


def _log(msg: str) -> None:
    log("abd", msg)


def _rz(a: float) -> np.ndarray:
    return np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])


def placements(n: int, side: int = 5) -> list:
    """(centre (3,), rotation (3, 3)) of n cubes: layers of side x side at 0.15 m pitch (a cube turned
    about z spans at most 0.1 sqrt 2 = 0.141 m), 0.14 m apart in height, odd layers shifted by half a
    cube, each layer turned by 17 degrees more about z and each cube by up to 12 degrees more."""
    out = []
    mid = 0.5 * (side - 1)
    for i in range(n):
        layer, k = divmod(i, side * side)
        r, c = divmod(k, side)
        sh = 0.05 * (layer % 2)
        centre = np.array([(c - mid) * 0.15 + sh, (r - mid) * 0.15 + sh, 0.06 + 0.14 * layer])
        out.append((centre, _rz(math.radians(17.0 * layer + 3.0 * (k % 5)))))
    return out


def make_scene(n: int, div: int, frames: int, quality: str, side: int = 5, shape: str = "mesh") -> Scene:
    """The pile: n cubes of div x div quads per face, their collision shape ``shape`` (protocol 1.6)."""
    bodies = []
    V0, T = box((SIZE, SIZE, SIZE), center=(0.0, 0.0, 0.0), divisions=div)
    for i, (c, R) in enumerate(placements(n, side)):
        bodies.append(Body(f"cube{i}", "stiff", V0 @ R.T + c, T, material=Material(density=500.0, friction=0.3),
                           collision_shape=shape))
    G, GT, _ = grid_sheet((3.0, 3.0), (2, 2), center=(0.0, 0.0, 0.0))
    bodies.append(Body("ground", "collider", G, GT, material=Material(friction=0.3)))
    return Scene(Settings(frame_start=1, frame_end=frames + 1, solver_quality=quality), tuple(bodies))


def obb_depth(ca, Ra, cb, Rb, h=SIZE / 2) -> float:
    """Penetration depth (m) of two cubes of half-size h (centres c, rotations R whose columns are the
    box axes): rigid_scenes.obb_depth, the 15-axis separating test, with equal half extents."""
    from .rigid_scenes import obb_depth as box_overlap
    return box_overlap(ca, Ra, np.full(3, h), cb, Rb, np.full(3, h))


def max_penetration(cs: np.ndarray, Rs: np.ndarray, ground_min: np.ndarray) -> float:
    """Deepest overlap (m) of any two cubes or of a cube below z = 0 (ground_min: each cube's lowest z)."""
    depth = float(max(0.0, -ground_min.min()))
    n = len(cs)
    for i in range(n):
        close = np.nonzero(np.linalg.norm(cs[i + 1:] - cs[i], axis=1) < 2.0 * SIZE)[0] + i + 1
        for j in close:
            depth = max(depth, obb_depth(cs[i], Rs[i], cs[j], Rs[j]))
    return depth


def _frames_of(x: np.ndarray, n: int, nv: int, V0c: np.ndarray) -> tuple:
    """Centres (n, 3), rotations (n, 3, 3) (best fit to the rest shape) and lowest z per cube of vertex
    positions x (n nv, 3) of n cubes whose rest shape is V0c (nv, 3), centred."""
    cs, Rs, zmin = np.zeros((n, 3)), np.zeros((n, 3, 3)), np.zeros(n)
    for i in range(n):
        P = x[i * nv:(i + 1) * nv]
        c = P.mean(0)
        U, _, Wt = np.linalg.svd((P - c).T @ V0c)
        R = U @ Wt
        if np.linalg.det(R) < 0:
            U[:, -1] *= -1
            R = U @ Wt
        cs[i], Rs[i], zmin[i] = c, R, P[:, 2].min()
    return cs, Rs, zmin


def _as_stiff_fem(b: MeshBackend, sc: Scene) -> None:
    """Rebuild backend b with the stiff role as stiff FEM solids (tetrahedralised, E >= 1e8 Pa) and the
    scene's solver, set up as MeshBackend.__init__ does: the path every stiff object took before affine
    bodies (Accurate: Newton; Fast: vertex block descent with FAST_SUBSTEPS steps per frame)."""
    from solver_server.backends.mesh_backend import FAST_SUBSTEPS, FAST_SWEEPS, _choose_threads
    from solver_server.contact.terms import ContactTerms
    st = sc.settings
    b.system = build_system(sc, affine=False)
    fast = b.quality == "fast"
    _choose_threads(b.system, fast=fast)
    ct = ContactTerms(b.system, st.contact_gap)
    b.contact = ct
    if fast:
        from solver_server.solvers.block_descent.stepper import BlockDescentStepper
        h = st.dt / FAST_SUBSTEPS
        ct.kappa = b._initial_kappa(ct, h)
        b.stepper = BlockDescentStepper(b.system, h, st.gravity, st.newton_tol * h, FAST_SWEEPS, ct)
    else:
        ct.kappa = b._initial_kappa(ct)
        b.stepper = TimeStepper(b.system, st.dt, st.gravity, st.newton_tol, st.max_newton_iterations, ct)


def run_clearance(sc: Scene, frames: int, fem: bool = False, on_frame=None) -> dict:
    """Bake sc for `frames` frames; on_frame(result so far) after every frame (for --partial)."""
    q = sc.settings.solver_quality
    label = f"stiff FEM ({q.capitalize()})" if fem else f"ABD {q}"
    _log(f"Clearance {label}: building (includes the start-frame exact intersection check)")
    t0 = time.perf_counter()
    b = MeshBackend(sc)
    if fem:
        _as_stiff_fem(b, sc)
    build = time.perf_counter() - t0
    ct = b.contact
    x0 = b.system.x0
    t0 = time.perf_counter()
    ct.C.find_intersections(x0, ct.mesh.faces, ct.mesh.edges)
    check = time.perf_counter() - t0
    n = len(sc.bodies) - 1
    nv = len(sc.bodies[0].vertices)
    V0c = sc.bodies[0].vertices - sc.bodies[0].vertices.mean(0)
    D = b.system.dof_map
    names = [bd.name for bd in sc.bodies if bd.role == "stiff"]
    secs, inter, worst, its, cpu, missed = [], 0, 0.0, [], [], 0
    first = None
    for f in range(frames):
        c0 = time.process_time()
        r = b.advance()
        cpu.append(time.process_time() - c0)
        if f == 0:
            first = r.stats["seconds"]
        else:
            secs.append(r.stats["seconds"])
        its.append(r.stats["newton_iterations"])
        missed += int(r.stats.get("unconverged_steps", 0))
        x = np.ascontiguousarray(D.to_x(b.stepper.x))
        inter += count_intersections(x, ct.mesh.faces, ct.mesh.edges)
        if not fem:   # FEM vertices are surface + interior nodes: the rigid fit below reads the cubes' own ones
            pos = b.system.body_positions(b.stepper.x)
            cs, Rs, zmin = _frames_of(np.concatenate([pos[k] for k in names]).astype(np.float64), n, nv, V0c)
            worst = max(worst, max_penetration(cs, Rs, zmin))
        _log(f"  {label} frame {f + 1}: {r.stats['seconds']:.2f} s ({cpu[-1]:.2f} s CPU), "
             f"{r.stats['newton_iterations']} it., "
             f"{r.stats['contacts']} contacts; intersections so far {inter}"
             + ("" if fem else f", deepest penetration so far {1e3 * worst:.3f} mm"))
        name = f"Clearance stiff FEM ({q.capitalize()})" if fem else f"Clearance {q.capitalize()}"
        res = {"solver": name, "s_per_frame": float(np.mean(secs)) if secs else first,
               "first": first, "intersections": inter, "penetration": None if fem else worst, "build": build,
               "check": check, "iterations": float(np.mean(its[1:] or its)), "vertices": int(b.system.n),
               "tets": int(len(b.system.elastic.tets)), "frames": f + 1, "quality": q,
               "per_frame": [first] + secs, "its_per_frame": list(its), "cpu_per_frame": list(cpu),
               "unconverged_steps": missed, "shape": sc.bodies[0].collision_shape,
               "cpu": float(np.mean(cpu[1:])) if f > 0 else cpu[0]}
        if on_frame is not None:
            on_frame(res)
    return res


def run_bullet(sc: Scene, frames: int, side: int = 5, shape: str = "BOX") -> dict:
    """The same cubes in Blender's rigid body world (Bullet), through bpy, collision shape ``shape``."""
    _log("Blender rigid body (Bullet)")
    import bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scn = bpy.context.scene
    scn.frame_start, scn.frame_end = 1, frames + 1
    scn.render.fps = 24
    bpy.ops.rigidbody.world_add()
    rbw = scn.rigidbody_world
    rbw.point_cache.frame_start, rbw.point_cache.frame_end = 1, frames + 1
    cubes = [b for b in sc.bodies if b.role == "stiff"]
    V0 = cubes[0].vertices - cubes[0].vertices.mean(0)
    T = cubes[0].triangles

    def obj(name, verts, faces, loc=(0.0, 0.0, 0.0), rot=None):
        me = bpy.data.meshes.new(name)
        me.from_pydata(verts.tolist(), [], faces.tolist())
        me.update()
        ob = bpy.data.objects.new(name, me)
        scn.collection.objects.link(ob)
        ob.location = loc
        if rot is not None:
            ob.rotation_mode = "QUATERNION"
            from mathutils import Matrix
            ob.rotation_quaternion = Matrix(rot.tolist()).to_quaternion()
        return ob

    def add_rb(ob, kind):
        bpy.context.view_layer.objects.active = ob
        for o in scn.objects:
            o.select_set(o == ob)
        bpy.ops.rigidbody.object_add(type=kind)
        ob.rigid_body.friction = 0.3
        return ob

    obs = []
    for i, (c, R) in enumerate(placements(len(cubes), side)):
        ob = add_rb(obj(f"cube{i}", V0, T, tuple(c), R), "ACTIVE")
        ob.rigid_body.collision_shape = shape
        ob.rigid_body.mass = 500.0 * SIZE ** 3
        obs.append(ob)
    G = sc.bodies[-1]
    gob = add_rb(obj("ground", G.vertices, G.triangles), "PASSIVE")
    gob.rigid_body.collision_shape = "MESH"
    nv = len(V0)
    faces = np.concatenate([T + i * nv for i in range(len(obs))] + [G.triangles + len(obs) * nv]).astype(np.int32)
    edges = edges_from_faces(faces)
    secs, inter, worst, cpu = [], 0, 0.0, []
    for f in range(1, frames + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        scn.frame_set(f + 1)
        dt = time.perf_counter() - t0
        if f > 1:
            secs.append(dt)
            cpu.append(time.process_time() - c0)
        cs = np.array([np.array(o.matrix_world.translation) for o in obs])
        Rs = np.array([np.array(o.matrix_world.to_3x3()) for o in obs])
        xw = np.concatenate([V0 @ Rs[i].T + cs[i] for i in range(len(obs))] + [G.vertices])
        inter += count_intersections(np.ascontiguousarray(xw), faces, edges)
        zmin = np.array([(V0 @ Rs[i].T)[:, 2].min() + cs[i, 2] for i in range(len(obs))])
        worst = max(worst, max_penetration(cs, Rs, zmin))
        _log(f"  Bullet frame {f}: {dt:.3f} s")
    label = {"BOX": "Box", "CONVEX_HULL": "Convex Hull", "MESH": "Mesh", "SPHERE": "Sphere"}.get(shape, shape)
    return {"solver": f"Blender rigid body (Bullet, {label} shape)", "s_per_frame": float(np.mean(secs)),
            "cpu": float(np.mean(cpu)), "first": None, "intersections": inter, "penetration": worst,
            "frames": frames}


def pile_parts(res: list, a) -> list:
    """The pile table (Fast, Accurate, Bullet) of results ``res`` for the settings ``a``."""
    nv = 6 * a.div ** 2 + 2
    res = [r for r in res if not r.get("fem_table")]
    t = Table(["solver", "frames", "s / frame (wall)", "CPU s / frame", "vs Bullet (wall)", "vs Bullet (CPU)",
               "first frame (s)", "intersections", "max penetration (mm)"], numeric=[False, False] + [True] * 7)
    bullet = next((r for r in res if "Bullet" in r["solver"]), None)
    for r in res:
        t.add(r["solver"], f"1-{r['frames']}", f"{r['s_per_frame']:.4g}", f"{r['cpu']:.4g}",
              f"{r['s_per_frame'] / bullet['s_per_frame']:.0f}x" if bullet else "-",
              f"{r['cpu'] / bullet['cpu']:.0f}x" if bullet else "-",
              f"{r['first']:.1f}" if r.get("first") is not None else "-", r["intersections"],
              f"{1e3 * r['penetration']:.2f}")
    parts = [f"{a.cubes} cubes of {nv:,} vertices (10 cm, div {a.div}), layers of {a.layer} x {a.layer} falling into a "
             f"pile on the ground, {a.frames} frames at 24 fps asked, same run (the frames column: the frames each "
             "solver completed; s / frame over frames 2 to the last, frame 1 apart). Intersections: exact "
             "edge-triangle count summed over those frames; penetration: deepest cube-cube (separating-axis depth) "
             "or cube-ground overlap over those frames.", t]
    chk = [r for r in res if "check" in r]
    if chk:
        parts.append(f"Start-frame exact intersection check on this scene ({chk[0]['vertices']:,} vertices): "
                     f"{chk[0]['check']:.1f} s (numba expansion arithmetic for the coplanar pairs of the flat faces; "
                     f"backend build including it: {chk[0]['build']:.1f} s).")
    return parts


def fem_parts(pairs: list, cubes: int, div: int, side: int) -> list:
    """ABD vs stiff FEM on the same cubes and frames with the same solver, same run; pairs: (abd, fem)
    result dicts per solver quality."""
    nv = 6 * div ** 2 + 2
    frames = pairs[0][1]["frames"]
    unit = {"fast": "sweeps", "accurate": "Newton it."}
    t = Table(["solver", "stiff role as", "s / frame", "CPU s / frame", "frame 1 (s)", "iterations / frame",
               "vertices", "tets", "intersections"], numeric=[False, False] + [True] * 7)
    for abd, fem in pairs:
        q = abd["quality"].capitalize()
        for lab, r in (("affine bodies (ABD)", abd), ("stiff FEM (E = 1e8 Pa)", fem)):
            t.add(q, lab, f"{r['s_per_frame']:.2f}", f"{r['cpu']:.2f}", f"{r['first']:.1f}",
                  f"{r['iterations']:.1f} {unit[r['quality']]}", f"{r['vertices']:,}", f"{r['tets']:,}",
                  r["intersections"])
    parts = [f"ABD vs stiff FEM, same run: {cubes} cubes of {nv:,} surface vertices (div {div}, layers of {side} x "
             f"{side}), the first {frames} frames of the same pile, each solver on both; s / frame and "
             f"iterations / frame over frames 2-{frames} (frame 1 includes compilation / cache load); CPU s / "
             "frame: the process's CPU time (all threads) over the same frames.", t]
    for abd, fem in pairs:
        pf = lambda r: " / ".join(f"{x:.1f}" for x in r["per_frame"])  # noqa: E731
        parts.append(f"{abd['quality'].capitalize()}: ABD is {fem['s_per_frame'] / abd['s_per_frame']:.1f}x faster "
                     f"per frame ({fem['cpu'] / abd['cpu']:.1f}x in CPU time; frames: ABD {pf(abd)} s, "
                     f"FEM {pf(fem)} s).")
    return parts


def _profiled(on: bool, fn, *args, **kw):
    """fn(*args, **kw), under cProfile when ``on``: the 15 functions with the most own time go to stderr
    (numba kernels count as one call each, so this shows which solver stage the time is spent in)."""
    if not on:
        return fn(*args, **kw)
    import cProfile
    import io
    import pstats
    pr = cProfile.Profile()
    pr.enable()
    try:
        return fn(*args, **kw)
    finally:
        pr.disable()
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(15)
        print(buf.getvalue(), file=sys.stderr, flush=True)


SHAPE_LABEL = {"mesh": "Mesh", "box": "Box", "convex_hull": "Convex Hull", "sphere": "Sphere"}


def shape_parts(res: list, a) -> list:
    """The collision-shape table: Converged (Newton) on each shape and Bullet, same scene, same run."""
    nv = 6 * a.div ** 2 + 2
    bullet = next((r for r in res if "Bullet" in r["solver"] and "Box" in r["solver"]), None)
    t = Table(["solver", "collision shape", "frames", "CPU s / frame", "vs Bullet Box (CPU)", "Newton it. / frame",
               "CPU ms / Newton it.", "unconverged steps", "intersections", "max penetration (mm)"],
              numeric=[False, False] + [True] * 8)
    for r in res:
        bul = "Bullet" in r["solver"]
        t.add("Blender rigid body (Bullet)" if bul else
              f"Clearance Converged (Newton), {r['pull']} pull, bent step {r.get('bent', 'on')}",
              r["solver"].split(", ")[1].replace(" shape)", "") if bul else SHAPE_LABEL[r["shape"]],
              f"1-{r['frames']}", f"{r['cpu']:.4g}", f"{r['cpu'] / bullet['cpu']:.0f}x" if bullet else "-",
              "-" if bul else f"{r['iterations']:.1f}",
              "-" if bul else f"{1e3 * sum(r['cpu_per_frame'][1:]) / max(sum(r['its_per_frame'][1:]), 1):.1f}",
              "-" if bul else r["unconverged_steps"],
              r["intersections"], f"{1e3 * r['penetration']:.2f}")
    return [f"{a.cubes} cubes of {nv:,} vertices (10 cm, div {a.div}), layers of {a.layer} x {a.layer} falling into a "
            f"pile, {a.frames} frames at 24 fps, one run; the Converged (Newton) solver with each collision shape. "
            "CPU s / frame and Newton iterations / frame over frames 2 to the last (frame 1: cache load); "
            "pull: how contact Hessians reach the bodies' 12 x 12 blocks (spread: every vertex-space entry spread "
            "into 16 triplets and summed by the sparse matrix, the path before; grouped: summed per body pair "
            "first); bent step: Newton's full step bent towards each body's rotation (bodies/affine.py) tried "
            "before the line search; unconverged steps: steps that stopped at Max Newton Iterations (100); "
            "intersections: exact edge-triangle "
            "count of the collision surfaces summed over the frames (Bullet: of the cubes' meshes); penetration: "
            "deepest cube-cube or cube-ground overlap of the cubes' own meshes.", t]


def section(quick: bool = False, cubes: int = 100, div: int = 13, frames: int = 24, layer: int = 5,
            accurate: bool = True, blender: bool = True, partial: str = "", fem_frames: int = 0, fem_div: int = 0,
            fem_quality: str = "accurate", fem_only: bool = False, fem_profile: bool = False,
            shapes: tuple = (), bullet_shapes: tuple = ("BOX", "CONVEX_HULL"), profile: bool = False,
            pull: str = "grouped", bent: str = "on", scenes: tuple = (), scene_frames: int = 48,
            scene_substeps: int = 0, body_step: str = "on") -> list:
    """shapes=mesh,box,...: only the collision-shape table (Converged solver on each shape, Bullet with
    bullet_shapes), profile=yes: cProfile of each Clearance run to stderr; pull=spread|grouped|both: how contact
    Hessians reach the bodies' 12 x 12 blocks (model/dof_map.py: "spread", every vertex entry spread into 16
    triplets, the path before; "grouped", summed per body pair; "both": each shape run with both, same run);
    bent=on|off|both: Newton's full step bent towards rotations (bodies/affine.py rotation_following_step);
    scenes=stack,dominoes,pile,pile100,pile100_hull,pile100_rough,bin,wall: only the rigid-scenes table
    (benchmarks/rigid_scenes.py), scene_frames each (a scene given as name:size:frames takes its own size and
    frame count), Clearance (dominoes and pile with 2 substeps, the others 1, or scene_substeps when > 0) and
    Bullet (matching shapes) in the same run; body_step=on|off|both: Newton's per-island step bound for affine
    bodies (solvers/newton/body_step.py; off: one step size for the whole system, the search before; both:
    each scene off, then on, in the same process)."""
    if fem_quality not in ("fast", "accurate", "both"):
        raise SystemExit(f"abd: fem_quality must be fast, accurate or both, not {fem_quality!r}")
    if quick:
        cubes, frames = 25, 12
    a = SimpleNamespace(cubes=cubes, div=div, frames=frames, layer=layer)
    parts = []
    if scenes:
        import os
        from . import rigid_scenes as rs
        res = []
        for spec in scenes:   # name, name:size or name:size:frames
            kind, _, rest = str(spec).partition(":")
            size, _, nfr = rest.partition(":")
            nf = int(nfr) if nfr else scene_frames
            sub = scene_substeps if scene_substeps > 0 else (2 if kind in ("dominoes", "pile") else 1)
            if blender:
                res.append(rs.run_bullet(kind, nf, size=int(size or 0)))
            from solver_server.solvers.newton import newton as _newton
            for bs in (("off", "on") if body_step == "both" else (body_step,)):
                _newton.BODY_STEP = bs == "on"
                r = rs.run_clearance(kind, nf, sub, int(size or 0))
                if body_step != "on":
                    r["solver"] += f", body step {bs}"
                res.append(r)
                _log("load average %.2f %.2f %.2f" % os.getloadavg())
            _newton.BODY_STEP = True
        return rs.table(res, scene_frames, "%.1f (1 min) at the end" % os.getloadavg()[0])
    if shapes:
        from solver_server.bodies import AffineBodies
        from solver_server.model.dof_map import DofMap
        res = []
        for sh in shapes:
            for mode in (("spread", "grouped") if pull == "both" else (pull,)):
                for bt in (("off", "on") if bent == "both" else (bent,)):
                    DofMap.GROUPED = mode == "grouped"
                    AffineBodies.ROTATION_STEP = bt == "on"
                    r = _profiled(profile, run_clearance, make_scene(cubes, div, frames, "accurate", layer, sh),
                                  frames)
                    r["pull"], r["bent"] = mode, bt
                    res.append(r)
        DofMap.GROUPED, AffineBodies.ROTATION_STEP = True, True
        if blender:
            res += [run_bullet(make_scene(cubes, div, frames, "fast", layer), frames, layer, bs)
                    for bs in bullet_shapes]
        return shape_parts(res, a)
    if not fem_only:
        # Bullet first (seconds), then Clearance; with partial= the table so far is rewritten after every
        # Clearance frame, so a run cut short still reports every frame it measured
        bullet = [run_bullet(make_scene(cubes, div, frames, "fast", layer), frames, layer)] if blender else []
        done = []

        def on_frame(r):
            if partial:
                Path(partial).write_text(render(pile_parts(done + [r] + bullet, a)) + "\n")

        done.append(run_clearance(make_scene(cubes, div, frames, "fast", layer), frames, on_frame=on_frame))
        if accurate:
            done.append(run_clearance(make_scene(cubes, div, frames, "accurate", layer), frames, on_frame=on_frame))
        parts += pile_parts(done + bullet, a)
    if fem_frames > 0:
        fdiv = fem_div or div
        pairs = []
        for q in (("fast", "accurate") if fem_quality == "both" else (fem_quality,)):
            abd = run_clearance(make_scene(cubes, fdiv, fem_frames, q, layer), fem_frames)
            fem = _profiled(fem_profile, run_clearance, make_scene(cubes, fdiv, fem_frames, q, layer), fem_frames,
                            fem=True)
            pairs.append((abd, fem))
            print(render(fem_parts(pairs, cubes, fdiv, layer)), file=sys.stderr, flush=True)  # so far
        parts += fem_parts(pairs, cubes, fdiv, layer)
    return parts
