"""Rigid-body scenes for the abd benchmark (``python -m benchmarks abd scenes=stack,dominoes,pile``): a stack
of boxes, a row of dominoes, a pile of cubes, each baked by Clearance's Converged solver with Box collision
shapes and by Blender's rigid body world (Bullet, Box shapes) in the same run. Not an area of its own.

Per solver and scene: CPU seconds per frame over frames 2 to the last (one thread), Newton iterations and
unconverged steps (Clearance), the exact edge-triangle crossings of the bodies' own meshes summed over the
frames (Clearance: of the collision surfaces too, which is the guarantee), and the deepest overlap of two
boxes (separating-axis depth of the oriented boxes fitted to each frame) or of a box below the ground.
"""
from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.contact import count_intersections, edges_from_faces
from solver_server.model.primitives import box, grid_sheet

from .report import Table, log


def _ry(a: float) -> np.ndarray:
    return np.array([[math.cos(a), 0.0, math.sin(a)], [0.0, 1.0, 0.0], [-math.sin(a), 0.0, math.cos(a)]])


def _rz(a: float) -> np.ndarray:
    return np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])


def _cuboid(name, size, centre, R=None, div=2, density=500.0, friction=0.5) -> tuple:
    """(Body on a Box shape, half extents (3,), rest rotation (3, 3))."""
    V, T = box(size, center=(0.0, 0.0, 0.0), divisions=div)
    R = np.eye(3) if R is None else R
    b = Body(name, "stiff", V @ R.T + np.asarray(centre, float), T,
             material=Material(density=density, friction=friction), collision_shape="box")
    return b, 0.5 * np.asarray(size, float), R


def stack(n: int = 10) -> list:
    """n 10 cm boxes stacked, staggered by 3 mm."""
    return [_cuboid(f"b{i}", (0.1, 0.1, 0.1), (0.003 * (i % 2), 0.0, 0.0505 + 0.1015 * i)) for i in range(n)]


def dominoes(n: int = 10, tilt_deg: float = 12.0) -> list:
    """n dominoes of 2 x 10 x 20 cm, 10 cm apart; the first tipped about its front bottom edge."""
    out = []
    for i in range(n):
        c, R = np.array([0.1 * i, 0.0, 0.1005]), None
        if i == 0:
            R = _ry(math.radians(tilt_deg))
            edge = np.array([0.01, 0.0, 0.0005])
            c = edge + R @ (np.array([0.0, 0.0, 0.1005]) - edge)
        out.append(_cuboid(f"d{i}", (0.02, 0.1, 0.2), c, R, density=600.0))
    return out


def pile(n: int = 27, side: int = 3) -> list:
    """n 10 cm cubes in layers of side x side, turned, falling onto the ground and each other."""
    out = []
    mid = 0.5 * (side - 1)
    for i in range(n):
        layer, k = divmod(i, side * side)
        r, c = divmod(k, side)
        sh = 0.05 * (layer % 2)
        centre = ((c - mid) * 0.15 + sh, (r - mid) * 0.15 + sh, 0.06 + 0.14 * layer)
        out.append(_cuboid(f"c{i}", (0.1, 0.1, 0.1), centre, _rz(math.radians(17.0 * layer + 3.0 * (k % 5))), div=4))
    return out


SCENES = {"stack": stack, "dominoes": dominoes, "pile": pile}


def make(kind: str, frames: int, substeps: int = 1) -> tuple:
    """(Scene, [(half extents, rest rotation)] per box) of a named scene on a ground plane."""
    items = SCENES[kind]()
    G, GT, _ = grid_sheet((4.0, 4.0), (2, 2), center=(0.0, 0.0, 0.0))
    ground = Body("ground", "collider", G, GT, material=Material(friction=0.5))
    st = Settings(frame_start=1, frame_end=frames + 1, solver_quality="accurate", substeps=substeps)
    return Scene(st, tuple(b for b, _, _ in items) + (ground,)), [(h, R) for _, h, R in items]


def obb_depth(ca, Ra, ha, cb, Rb, hb) -> float:
    """Overlap (m) of two oriented boxes (centres c, axes R columns, half extents h); <= 0 when apart."""
    axes = [Ra[:, i] for i in range(3)] + [Rb[:, i] for i in range(3)]
    axes += [np.cross(Ra[:, i], Rb[:, j]) for i in range(3) for j in range(3)]
    d = cb - ca
    best = np.inf
    for ax in axes:
        nrm = np.linalg.norm(ax)
        if nrm < 1e-9:
            continue
        ax = ax / nrm
        best = min(best, (ha * np.abs(Ra.T @ ax)).sum() + (hb * np.abs(Rb.T @ ax)).sum() - abs(d @ ax))
    return float(best)


def _fit(rest: np.ndarray, pos: np.ndarray) -> tuple:
    """(centre, rotation) of the rigid motion taking rest (n, 3) to pos (n, 3) (Kabsch)."""
    c0, c = rest.mean(0), pos.mean(0)
    U, _, Wt = np.linalg.svd((pos - c).T @ (rest - c0))
    D = np.diag([1.0, 1.0, np.sign(np.linalg.det(U @ Wt))])
    return c, U @ D @ Wt


def deepest(rests: list, poss: list, boxes: list) -> float:
    """Deepest box-box or box-ground overlap (m) of one frame (boxes: (half extents, rest rotation))."""
    fr = [_fit(r, p) for r, p in zip(rests, poss)]
    cs = [c for c, _ in fr]
    Rs = [R @ R0 for (_, R), (_, R0) in zip(fr, boxes)]
    depth = max(0.0, -min(float(p[:, 2].min()) for p in poss))
    for i in range(len(fr)):
        for j in range(i + 1, len(fr)):
            if np.linalg.norm(cs[i] - cs[j]) < np.linalg.norm(boxes[i][0]) + np.linalg.norm(boxes[j][0]):
                depth = max(depth, obb_depth(cs[i], Rs[i], boxes[i][0], cs[j], Rs[j], boxes[j][0]))
    return depth


def _mesh_arrays(sc: Scene) -> tuple:
    """(faces, edges) of every body's own mesh stacked in scene order, and the vertex offsets."""
    offs, faces, o = [], [], 0
    for b in sc.bodies:
        offs.append(o)
        faces.append(b.triangles + o)
        o += len(b.vertices)
    f = np.concatenate(faces).astype(np.int32)
    return f, edges_from_faces(f), offs


def run_clearance(kind: str, frames: int, substeps: int = 1) -> dict:
    sc, boxes = make(kind, frames, substeps)
    b = MeshBackend(sc)
    names = [x.name for x in sc.bodies if x.role == "stiff"]
    rests = [x.vertices for x in sc.bodies if x.role == "stiff"]
    f, e, _ = _mesh_arrays(sc)
    G = sc.bodies[-1].vertices
    cpu, its, missed, cross, cross_shape, worst = [], [], 0, 0, 0, 0.0
    ct = b.contact
    for k in range(frames):
        c0 = time.process_time()
        r = b.advance()
        cpu.append(time.process_time() - c0)
        its.append(r.stats["newton_iterations"])
        missed += int(r.stats.get("unconverged_steps", 0))
        pos = [np.asarray(r.positions[n], np.float64) for n in names]
        cross += count_intersections(np.ascontiguousarray(np.concatenate(pos + [G])), f, e)
        xs = np.ascontiguousarray(b.system.dof_map.to_x(b.stepper.x))
        cross_shape += count_intersections(xs, ct.mesh.faces, ct.mesh.edges)
        worst = max(worst, deepest(rests, pos, boxes))
    log("abd", f"  Clearance {kind}: {np.mean(cpu[1:]):.3f} CPU s/frame, {missed} unconverged steps")
    return {"solver": "Clearance Converged (Newton), Box shapes", "scene": kind, "cpu": float(np.mean(cpu[1:])),
            "its": float(np.mean(its[1:])), "missed": missed, "steps": frames * substeps, "cross": cross,
            "cross_shape": cross_shape, "depth": worst, "substeps": substeps, "bodies": len(names)}


def run_bullet(kind: str, frames: int, shape: str = "BOX") -> dict:
    """The same scene in Blender's rigid body world (default world: 10 substeps, 10 solver iterations)."""
    import bpy
    from mathutils import Matrix
    sc, boxes = make(kind, frames)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scn = bpy.context.scene
    scn.frame_start, scn.frame_end = 1, frames + 1
    scn.render.fps = 24
    bpy.ops.rigidbody.world_add()
    scn.rigidbody_world.point_cache.frame_start, scn.rigidbody_world.point_cache.frame_end = 1, frames + 1
    obs, locals_ = [], []
    for bd in sc.bodies:
        R0 = np.eye(3)
        if bd.role == "stiff":
            R0 = boxes[len(obs)][1]
            c = bd.vertices.mean(0)
            loc = (bd.vertices - c) @ R0      # object space: the box axis-aligned (Bullet's Box is its local bounds)
        else:
            c, loc = np.zeros(3), bd.vertices
        me = bpy.data.meshes.new(bd.name)
        me.from_pydata(loc.tolist(), [], bd.triangles.tolist())
        me.update()
        ob = bpy.data.objects.new(bd.name, me)
        scn.collection.objects.link(ob)
        ob.location = tuple(c)
        ob.rotation_mode = "QUATERNION"
        ob.rotation_quaternion = Matrix(R0.tolist()).to_quaternion()
        bpy.context.view_layer.objects.active = ob
        for o in scn.objects:
            o.select_set(o == ob)
        bpy.ops.rigidbody.object_add(type="ACTIVE" if bd.role == "stiff" else "PASSIVE")
        ob.rigid_body.friction = bd.material.friction
        if bd.role == "stiff":
            ob.rigid_body.collision_shape = shape
            vol = float(np.prod(2.0 * boxes[len(obs)][0]))
            ob.rigid_body.mass = bd.material.density * vol
            obs.append(ob)
            locals_.append(loc)
        else:
            ob.rigid_body.collision_shape = "MESH"
    f, e, _ = _mesh_arrays(sc)
    G = sc.bodies[-1].vertices
    rests = [bd.vertices for bd in sc.bodies if bd.role == "stiff"]
    cpu, cross, worst = [], 0, 0.0
    for k in range(1, frames + 1):
        c0 = time.process_time()
        scn.frame_set(k + 1)
        cpu.append(time.process_time() - c0)
        pos = []
        for ob, loc in zip(obs, locals_):
            M = np.array(ob.matrix_world)
            pos.append(loc @ M[:3, :3].T + M[:3, 3])
        cross += count_intersections(np.ascontiguousarray(np.concatenate(pos + [G])), f, e)
        worst = max(worst, deepest(rests, pos, boxes))
    label = {"BOX": "Box", "CONVEX_HULL": "Convex Hull"}.get(shape, shape)
    return {"solver": f"Blender rigid body (Bullet), {label} shapes", "scene": kind, "cpu": float(np.mean(cpu[1:])),
            "its": None, "missed": None, "steps": None, "cross": cross, "cross_shape": None, "depth": worst,
            "substeps": None, "bodies": len(obs)}


def table(res: list, frames: int) -> list:
    """The scenes table (one row per solver and scene) and its caption."""
    t = Table(["scene", "solver", "bodies", "CPU s / frame", "vs Bullet Box", "Newton it. / frame",
               "unconverged steps", "crossings (meshes)", "crossings (collision shapes)", "deepest overlap (mm)"],
              numeric=[False, False] + [True] * 8)
    for r in res:
        bul = next((q for q in res if q["scene"] == r["scene"] and "Bullet" in q["solver"] and "Box" in q["solver"]),
                   None)
        sub = f" ({r['substeps']} substeps)" if r.get("substeps") and r["substeps"] > 1 else ""
        t.add(r["scene"], r["solver"] + sub, r["bodies"], f"{r['cpu']:.4g}",
              f"{r['cpu'] / bul['cpu']:.0f}x" if bul and bul["cpu"] > 0 else "-",
              "-" if r["its"] is None else f"{r['its']:.1f}",
              "-" if r["missed"] is None else f"{r['missed']} of {r['steps']}", r["cross"],
              "-" if r["cross_shape"] is None else r["cross_shape"], f"{1e3 * r['depth']:.2f}")
    return [f"Rigid scenes, {frames} frames at 24 fps each, one run, one thread: a stack of 10 boxes (10 cm, 3 mm "
            "stagger), 10 dominoes (2 x 10 x 20 cm, the first tipped 12 degrees), a pile of 27 cubes in three "
            "turned layers. Clearance: the Converged solver with Box collision shapes on subdivided meshes; Bullet: "
            "Box shapes, Blender's default world. CPU s / frame over frames 2 to the last; crossings: exact "
            "edge-triangle count summed over the frames; deepest overlap: separating-axis depth of the fitted "
            "oriented boxes, or below the ground.", t]
