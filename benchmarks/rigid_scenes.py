"""Rigid-body scenes for the abd benchmark (``python -m benchmarks abd scenes=stack,dominoes,pile``): a stack
of boxes, a row of dominoes, a pile of cubes (Box collision shapes), the issue's 100-cube pile of 1,016-vertex
cubes on Mesh shapes (``pile100``; their flat faces merge), on Convex Hull shapes (``pile100_hull``) and on
Mesh shapes with 0.05 mm of vertex noise (``pile100_rough``: nothing merges, the dense path), low-poly props (boxes,
cylinders, convex rocks, Convex Hull shapes) poured into a bin (``bin``, 1,000 props; ``bin:N`` for N), a
10 x 10 brick wall hit by a heavy ball rolling off a ramp (``wall``; ``wall:R`` for R x R bricks), each baked
by Clearance's Converged solver and by Blender's rigid body world (Bullet, the matching shapes: Box for boxes
and bricks, Convex Hull for the props, Sphere for the ball) in the same run. Not an area of its own.

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


def _cuboid(name, size, centre, R=None, div=2, density=500.0, friction=0.5, shape="box", noise=0.0,
            seed=0) -> tuple:
    """(Body on collision shape ``shape``, half extents (3,), rest rotation (3, 3), Bullet shape "BOX"); noise > 0:
    every vertex moved by up to ``noise`` metres along each axis (seeded), so that no two triangles share a plane."""
    V, T = box(size, center=(0.0, 0.0, 0.0), divisions=div)
    if noise > 0.0:
        V = V + np.random.default_rng(seed).uniform(-noise, noise, V.shape)
    R = np.eye(3) if R is None else R
    b = Body(name, "stiff", V @ R.T + np.asarray(centre, float), T,
             material=Material(density=density, friction=friction), collision_shape=shape)
    return b, 0.5 * np.asarray(size, float), R, "BOX"


def _rot(rng) -> np.ndarray:
    """A random rotation (3, 3)."""
    Q, Rr = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(Rr))
    return Q if np.linalg.det(Q) > 0 else -Q


def _cylinder(radius: float, height: float, seg: int = 10) -> tuple:
    """Closed, outward-oriented cylinder about z centred at 0: (2 seg + 2 vertices, 4 seg triangles)."""
    a = 2.0 * math.pi * np.arange(seg) / seg
    ring = np.stack([radius * np.cos(a), radius * np.sin(a), np.zeros(seg)], 1)
    V = np.concatenate([ring - [0, 0, height / 2], ring + [0, 0, height / 2], [[0, 0, -height / 2], [0, 0, height / 2]]])
    T = []
    for i in range(seg):
        j = (i + 1) % seg
        T += [[i, j, seg + j], [i, seg + j, seg + i], [2 * seg, j, i], [2 * seg + 1, seg + i, seg + j]]
    return V, np.array(T, np.int32)


def _rock(rng, size: float, npts: int = 14) -> tuple:
    """A convex rock: the hull of npts random points on an ellipsoid of about ``size`` (m), centred."""
    from solver_server.model.collision_shapes import convex_hull
    d = rng.normal(size=(npts, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    V, T = convex_hull(d * (0.5 * size) * rng.uniform(0.7, 1.0, 3))
    return V - V.mean(0), T


def _prop(name, rng, kind, centre, friction=0.5) -> tuple:
    """A low-poly prop on a Convex Hull shape: a box (4-6 cm, 8 vertices), a cylinder (22) or a convex rock (<= 14)."""
    R = _rot(rng)
    if kind == 0:
        V, T = box(tuple(rng.uniform(0.04, 0.06, 3)), center=(0.0, 0.0, 0.0), divisions=1)
    elif kind == 1:
        V, T = _cylinder(rng.uniform(0.02, 0.03), rng.uniform(0.04, 0.07))
    else:
        V, T = _rock(rng, rng.uniform(0.05, 0.07))
    b = Body(name, "stiff", V @ R.T + np.asarray(centre, float), T,
             material=Material(density=600.0, friction=friction), collision_shape="convex_hull")
    return b, None, R, "CONVEX_HULL"


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
    from .abd import placements   # the abd benchmark's layout (abd imports this module)
    return [_cuboid(f"c{i}", (0.1, 0.1, 0.1), c, R, div=4) for i, (c, R) in enumerate(placements(n, side))]


def pile100(n: int = 100, shape: str = "mesh", div: int = 13, noise: float = 0.0) -> list:
    """The issue's pile: n 10 cm cubes of 6 div^2 + 2 vertices (1,016 at div 13) in layers of 5 x 5 (the abd
    benchmark's placements), collision shape ``shape``, density 500 kg/m^3, mu 0.3. On the Mesh shape the
    cubes' flat faces merge (model/planar_merge.py): contact runs on their 8 corners and 12 triangles."""
    from .abd import placements
    side = 5 if n >= 25 else 3
    return [_cuboid(f"c{i}", (0.1, 0.1, 0.1), c, R, div=div, friction=0.3, shape=shape, noise=noise, seed=i)
            for i, (c, R) in enumerate(placements(n, side))]


def pile100_rough(n: int = 100) -> list:
    """The same pile of 1,016-vertex cubes on Mesh shapes, each vertex moved by up to 0.05 mm (a scanned or
    sculpted cube): no flat region merges, contact runs on all 2,028 triangles of each cube (the dense path)."""
    return pile100(n, "mesh", noise=5e-5)


def pile100_hull(n: int = 100) -> list:
    return pile100(n, "convex_hull")


BIN = (0.8, 0.8, 0.3)   # m: inner width, depth and wall height of the bin


def bin_props(n: int = 1000, seed: int = 1) -> list:
    """n props (boxes, cylinders, convex rocks in turn, random sizes of 4-7 cm, randomly turned) on a grid of
    0.11 m pitch (more than any prop's diagonal), 7 x 7 a layer, from 0.06 m above the bin's floor: they
    fall into the bin and onto each other (1,000 props: 21 layers, 2.3 m high)."""
    rng = np.random.default_rng(seed)
    side = 7
    mid = 0.5 * (side - 1)
    out = []
    for i in range(n):
        layer, k = divmod(i, side * side)
        r, c = divmod(k, side)
        sh = 0.015 * (layer % 2)
        centre = ((c - mid) * 0.11 + sh, (r - mid) * 0.11 + sh, 0.06 + 0.11 * layer)
        out.append(_prop(f"p{i}", rng, i % 3, centre))
    return out


def _bin_collider() -> Body:
    """The bin: a floor and four walls (open quads, two triangles each) around the origin, as one collider."""
    w, d, hgt = BIN
    V = np.array([[-w / 2, -d / 2, 0], [w / 2, -d / 2, 0], [w / 2, d / 2, 0], [-w / 2, d / 2, 0],
                  [-w / 2, -d / 2, hgt], [w / 2, -d / 2, hgt], [w / 2, d / 2, hgt], [-w / 2, d / 2, hgt]], float)
    T = np.array([[0, 1, 2], [0, 2, 3],                      # floor, normal up
                  [0, 4, 5], [0, 5, 1], [1, 5, 6], [1, 6, 2], [2, 6, 7], [2, 7, 3], [3, 7, 4], [3, 4, 0]], np.int32)
    return Body("bin", "collider", V, T, material=Material(friction=0.5))


RAMP = (0.6, 0.5, 0.35)   # m: the ramp's horizontal run, width and height at its top


def wall(rows: int = 10, cols: int = 10) -> list:
    """A running-bond wall of rows x cols bricks (20 x 10 x 10 cm, 2,000 kg/m^3, mu 0.6, 1 mm apart) along y,
    and a steel ball (15 cm radius, 7,800 kg/m^3: 110 kg, 27 bricks) on a ramp facing it: it rolls down and
    hits the wall's lower rows at about 2.2 m/s."""
    out = []
    bw, bd, bh = 0.2, 0.1, 0.1
    for r in range(rows):
        off = 0.5 * bw * (r % 2) - 0.5 * (cols - 1) * (bw + 0.001)
        for c in range(cols):
            centre = (0.0, off + c * (bw + 0.001), 0.0505 + r * (bh + 0.001))
            out.append(_cuboid(f"w{r}_{c}", (bd, bw, bh), centre, None, div=1, density=2000.0, friction=0.6))
    run, _, top = RAMP
    R = 0.15
    ang = math.atan2(top, run)
    from solver_server.model.primitives import icosphere
    V, T = icosphere(R, (0.0, 0.0, 0.0), 2)
    # on the ramp a fifth of the way down, its Sphere shape (the icosphere around the mesh, a few % larger)
    # clear of the ramp
    s0 = 0.2 * math.hypot(run, top)
    foot = np.array([-0.35 - run + s0 * math.cos(ang), 0.0, top - s0 * math.sin(ang)])
    nrm = np.array([math.sin(ang), 0.0, math.cos(ang)])
    ball = Body("ball", "stiff", V + foot + (1.06 * R + 0.001) * nrm, T,
                material=Material(density=7800.0, friction=0.6), collision_shape="sphere")
    out.append((ball, None, np.eye(3), "SPHERE"))
    return out


def _ramp_collider() -> Body:
    """The ramp: one quad from height RAMP[2] down to 2 mm above the ground (clear of it: the crossing counts
    would otherwise count the two colliders' shared line) 0.35 m in front of the wall (x < 0)."""
    run, wd, top = RAMP
    x1 = -0.35
    V = np.array([[x1 - run, -wd / 2, top], [x1, -wd / 2, 0.002], [x1, wd / 2, 0.002], [x1 - run, wd / 2, top]], float)
    T = np.array([[0, 1, 2], [0, 2, 3]], np.int32)
    return Body("ramp", "collider", V, T, material=Material(friction=0.6))


SCENES = {"stack": stack, "dominoes": dominoes, "pile": pile, "pile100": pile100, "pile100_hull": pile100_hull,
          "pile100_rough": pile100_rough,
          "bin": bin_props, "wall": wall}
LABEL = {"stack": "Box", "dominoes": "Box", "pile": "Box", "pile100": "Mesh", "pile100_hull": "Convex Hull",
         "pile100_rough": "Mesh (0.05 mm noise)",
         "bin": "Convex Hull", "wall": "Box, ball Sphere"}


def make(kind: str, frames: int, substeps: int = 1, size: int = 0) -> tuple:
    """(Scene, [(half extents or None, rest rotation, Bullet shape)] per stiff body) of a named scene on a ground
    plane (the bin and the ramp are extra colliders); size: the scene's count (cubes, props, wall rows) when > 0."""
    fn = SCENES[kind]
    items = fn(size) if size > 0 and kind != "wall" else (fn(size, size) if size > 0 else fn())
    # the ground: 4 m square, or wider where the scene reaches beyond it (30 dominoes run to x = 2.9 m: on the
    # 4 m ground the last ten fell off its edge)
    reach = max(float(np.abs(it[0].vertices[:, :2]).max()) for it in items)
    side = max(4.0, 2.0 * math.ceil(reach + 0.5))
    G, GT, _ = grid_sheet((side, side), (2, 2), center=(0.0, 0.0, 0.0))
    colliders = [Body("ground", "collider", G, GT, material=Material(friction=0.5))]
    if kind == "bin":
        # the ground 2 mm below the bin's floor (not coplanar: the crossing counts would count the two
        # colliders' overlap), so that props spilling over the walls land instead of falling forever
        colliders = [_bin_collider(), Body("ground", "collider", G - [0.0, 0.0, 0.002], GT,
                                           material=Material(friction=0.5))]
    if kind == "wall":
        colliders.append(_ramp_collider())
    st = Settings(frame_start=1, frame_end=frames + 1, solver_quality="accurate", substeps=substeps)
    return (Scene(st, tuple(it[0] for it in items) + tuple(colliders)),
            [(h, R, bs) for _, h, R, bs in items])


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


def toppled(rests: list, poss: list, boxes: list, degrees: float = 30.0) -> int:
    """How many box-shaped bodies have their local z axis (a domino's 20 cm height) turned more than ``degrees``
    from the vertical in this frame (rotation fitted from rest to pos, times the box's rest rotation)."""
    n = 0
    for rest, pos, bx in zip(rests, poss, boxes):
        if bx[0] is None:
            continue
        R = _fit(rest, pos)[1] @ bx[1]
        n += int(abs(R[2, 2]) < math.cos(math.radians(degrees)))
    return n


def deepest(rests: list, poss: list, boxes: list) -> float:
    """Deepest box-box or box-ground overlap (m) of one frame (boxes: (half extents or None, rest rotation, ...));
    bodies that are not boxes (half extents None) count only below the ground."""
    depth = max(0.0, -min(float(p[:, 2].min()) for p in poss))
    idx = [i for i, bx in enumerate(boxes) if bx[0] is not None]
    fr = {i: _fit(rests[i], poss[i]) for i in idx}
    cs = {i: fr[i][0] for i in idx}
    Rs = {i: fr[i][1] @ boxes[i][1] for i in idx}
    if len(idx) > 1:   # candidate pairs by centre distance (a KD-tree: 1,000 props are 500k pairs)
        from scipy.spatial import cKDTree
        pts = np.array([cs[i] for i in idx])
        rad = max(float(np.linalg.norm(boxes[i][0])) for i in idx)
        close = cKDTree(pts).query_pairs(2.0 * rad)
    else:
        close = set()
    for a, b in close:
        i, j = idx[a], idx[b]
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


def _volume(V: np.ndarray, T: np.ndarray) -> float:
    """Volume (m^3) of a closed, outward-oriented triangle mesh (divergence theorem)."""
    a, b, c = V[T[:, 0]], V[T[:, 1]], V[T[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def run_clearance(kind: str, frames: int, substeps: int = 1, size: int = 0, on_frame=None) -> dict:
    """Bake the scene with the Converged solver; on_frame(k, stats, cpu s) after every frame."""
    sc, boxes = make(kind, frames, substeps, size)
    c0 = time.process_time()
    b = MeshBackend(sc)
    build = time.process_time() - c0
    names = [x.name for x in sc.bodies if x.role == "stiff"]
    rests = [x.vertices for x in sc.bodies if x.role == "stiff"]
    f, e, _ = _mesh_arrays(sc)
    G = np.concatenate([x.vertices for x in sc.bodies if x.role == "collider"])
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
        log("abd", f"  Clearance {kind} frame {k + 1}: {cpu[-1]:.2f} CPU s, {its[-1]} it., "
                   f"{int(r.stats.get('unconverged_steps', 0))} unconverged, {r.stats.get('contacts', 0)} contacts, "
                   f"crossings {cross} / {cross_shape}, deepest {1e3 * worst:.2f} mm")
        if on_frame is not None:
            on_frame(k, r.stats, cpu[-1])
    log("abd", f"  Clearance {kind}: {np.mean(cpu[1:]):.3f} CPU s/frame, {missed} unconverged steps")
    return {"solver": f"Clearance Converged (Newton), {LABEL[kind]} shapes", "scene": kind,
            "cpu": float(np.mean(cpu[1:])), "its": float(np.mean(its[1:])), "missed": missed,
            "steps": frames * substeps, "cross": cross, "cross_shape": cross_shape, "depth": worst,
            "substeps": substeps, "bodies": len(names), "build": build, "frames": frames,
            "its_per_frame": its, "cpu_per_frame": cpu, "start": [x.mean(0) for x in rests],
            "end": [p.mean(0) for p in pos], "toppled": toppled(rests, pos, boxes) if kind == "dominoes" else None}


def run_bullet(kind: str, frames: int, shape: str = "", size: int = 0) -> dict:
    """The same scene in Blender's rigid body world (default world: 10 substeps, 10 solver iterations); shape:
    every stiff body's Bullet shape, default each body's own (Box for boxes, Convex Hull for props, Sphere)."""
    import bpy
    from mathutils import Matrix
    sc, boxes = make(kind, frames, 1, size)
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
            ob.rigid_body.collision_shape = shape or boxes[len(obs)][2]
            ob.rigid_body.mass = bd.material.density * _volume(bd.vertices, bd.triangles)
            obs.append(ob)
            locals_.append(loc)
        else:
            ob.rigid_body.collision_shape = "MESH"
    f, e, _ = _mesh_arrays(sc)
    G = np.concatenate([x.vertices for x in sc.bodies if x.role == "collider"])
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
    names = {"BOX": "Box", "CONVEX_HULL": "Convex Hull", "SPHERE": "Sphere", "MESH": "Mesh"}
    label = names.get(shape, shape) if shape else ", ".join(sorted({names.get(bx[2], bx[2]) for bx in boxes}))
    log("abd", f"  Bullet {kind} ({label}): {np.mean(cpu[1:]):.5f} CPU s/frame, {cross} crossings, "
               f"deepest {1e3 * worst:.2f} mm")
    return {"solver": f"Blender rigid body (Bullet), {label} shapes", "scene": kind, "frames": frames, "cpu": float(np.mean(cpu[1:])),
            "its": None, "missed": None, "steps": None, "cross": cross, "cross_shape": None, "depth": worst,
            "substeps": None, "bodies": len(obs),
            "toppled": toppled(rests, pos, boxes) if kind == "dominoes" else None}


def table(res: list, frames: int, load: str = "") -> list:
    """The scenes table (one row per solver and scene) and its caption; load: the load average to quote."""
    t = Table(["scene", "solver", "bodies", "frames", "CPU s / frame", "vs Bullet", "Newton it. / frame",
               "unconverged steps", "crossings (meshes)", "crossings (collision shapes)", "deepest overlap (mm)",
               "toppled (> 30 deg)"],
              numeric=[False, False] + [True] * 10)
    for r in res:
        bul = next((q for q in res if q["scene"] == r["scene"] and "Bullet" in q["solver"]), None)
        sub = f" ({r['substeps']} substeps)" if r.get("substeps") and r["substeps"] > 1 else ""
        t.add(r["scene"], r["solver"] + sub, r["bodies"], r.get("frames", frames), f"{r['cpu']:.4g}",
              f"{r['cpu'] / bul['cpu']:.0f}x" if bul and bul["cpu"] > 0 else "-",
              "-" if r["its"] is None else f"{r['its']:.1f}",
              "-" if r["missed"] is None else f"{r['missed']} of {r['steps']}", r["cross"],
              "-" if r["cross_shape"] is None else r["cross_shape"], f"{1e3 * r['depth']:.2f}",
              "-" if r.get("toppled") is None else f"{r['toppled']} of {r['bodies']}")
    return [f"Rigid scenes at 24 fps, one run, one thread{(', load average ' + load) if load else ''}: stack (10 "
            "boxes of 10 cm, 3 mm stagger), dominoes (10 or 30 of 2 x 10 x 20 cm, 10 cm apart, the first tipped 12 degrees; toppled: turned more than 30 degrees at the last frame), pile (27 "
            "cubes in three turned layers), pile100 / pile100_hull (100 cubes of 1,016 vertices in layers of 5 x 5, "
            "Mesh / Convex Hull shapes; pile100_rough: Mesh, every vertex moved by up to 0.05 mm so that no face is flat), bin (low-poly boxes, cylinders and convex rocks poured into a 0.8 x 0.8 m "
            "bin), wall (10 x 10 bricks hit by a 110 kg ball rolling off a ramp). Clearance: the Converged solver; "
            "Bullet: Blender's default world with the matching shapes (Box, Convex Hull, Sphere; default collision "
            "margin). CPU s / frame over frames 2 to the last; vs Bullet: over the same scene's Bullet row; "
            "crossings: exact edge-triangle count summed over the frames; deepest overlap: separating-axis depth of "
            "the fitted oriented boxes (box-shaped bodies only), or below the ground.", t]
