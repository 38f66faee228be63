"""The simulated system built from a protocol.scene.Scene: one global vertex array for every body
(colliders included, their vertices prescribed), lumped masses, elastic terms, the collision surface
and the prescribed (Dirichlet) vertices with their targets over time.

Layout: bodies are stacked in scene order. A solid's block holds its tet nodes with the artist's
vertices first (so output = the first n rows of the block, in the artist's order); cloth, rod and
collider blocks are the mesh vertices. Units: SI (m, kg, s, Pa).

Role handling: solid -> tetrahedralised neo-Hookean/SNH/FCR/StVK (Material.model), linear tets or, with
Material.element == "quadratic", 10-node tets (mid-edge nodes appended after the corner nodes, HRZ-lumped
mass, contact on the artist's triangles split at the mid-edge nodes, see :func:`split_surface`); stiff -> an affine
body (solver_server/bodies/: 12 DOFs appended after the vertex rows, its surface vertices slaved through
x = J q, see ipc/dof_map.py), or with ``affine=False`` (the Fast solver, which has no body DOFs yet)
the same as solid with Young's modulus raised to at least STIFF_MODULUS; cloth -> StVK (plane-stress lambda)
membrane + shell bending (shell_bending.py), contact offset thickness/2; rod -> stretch + bending, offset thickness/2;
collider -> prescribed by Body.animation (static if None).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from protocol.scene import Body, Scene, SceneError
from .checks import check_solid, check_triangles, triangle_areas
from .collision_shapes import build_shape
from .tetmesh import tetrahedralize
from solver_server.energies import bending, elastic_tet, elastic_tet10, membrane, shell_bending
from .dof_map import DofMap
from .force_fields import build_external
from .attachments import build_attachments
from .rest_schedule import RestSchedule, ShrinkTrack
from solver_server.energies.elasticity import ElasticTerms
from solver_server.energies.isotropic_models import MODEL_IDS, lame

STIFF_MODULUS = 1.0e8  # Pa, floor on Young's modulus for the "stiff" role


@dataclass
class BodyBlock:
    """Where one body lives in the global vertex array."""

    name: str
    role: str
    index: int          # body id (contact)
    offset: int         # first global vertex
    n_nodes: int        # vertices in the block
    n_out: int          # vertices returned to the client (the artist's count)
    shape_body: int = -1  # affine body whose collision shape fills the block (its output is A X + p), or -1


@dataclass
class System:
    x0: np.ndarray                    # (N, 3) m
    v0: np.ndarray                    # (N, 3) m/s
    mass: np.ndarray                  # (N,) kg; 0 for collider vertices
    dynamic: np.ndarray               # (N,) bool: has inertia/gravity (not a collider vertex)
    elastic: ElasticTerms
    blocks: list
    coll_faces: np.ndarray            # (F, 3) int32 global
    coll_edges: np.ndarray            # (E, 2) int32 global (faces' edges + rod edges)
    vertex_offset: np.ndarray         # (N,) m, contact offsets
    vertex_body: np.ndarray           # (N,) int32
    body_friction: np.ndarray         # (B,)
    body_self_contact: np.ndarray     # (B,) bool
    body_static: np.ndarray           # (B,) bool
    bc_index: np.ndarray              # (K,) int64 prescribed vertices (collider vertices + pins)
    bc_samples: np.ndarray            # (n_frames, K, 3) float64 targets per sampled frame
    frame_start: int
    stats: dict = field(default_factory=dict)
    # the solver's DOFs z = vertex rows + 4 rows per affine body (identity map without bodies)
    dof_map: Optional[DofMap] = None
    affine: Optional[object] = None       # solver_server.bodies.AffineBodies, or None
    z0: Optional[np.ndarray] = None        # (n_z, 3)
    vz0: Optional[np.ndarray] = None       # (n_z, 3)
    mass_z: Optional[np.ndarray] = None    # (n_z,) kg: lumped inertia of free vertex rows (0 on slaved rows)
    dynamic_z: Optional[np.ndarray] = None  # (n_z,) bool: lumped inertia/gravity applies (vertex rows only)
    weight_z: Optional[np.ndarray] = None  # (n_z,) kg: residual / penalty weight (body rows: diag of Mbar)
    external: Optional[object] = None      # model/force_fields.ExternalSpec: air drag, force fields, pressure
    attachments: Optional[object] = None   # model/attachments.AttachmentSpec: vertices hung on other bodies' surfaces
    rest_schedule: Optional[object] = None  # model/rest_schedule.RestSchedule: keyed Shrink (rest size per step)

    def __post_init__(self):
        if self.dof_map is None:
            self.dof_map = DofMap.identity_map(self.n)
            self.z0, self.vz0 = self.x0, self.v0
            self.mass_z, self.dynamic_z = self.mass, self.dynamic
            self.weight_z = np.where(self.dynamic, self.mass, 0.0)

    @property
    def n(self) -> int:
        return int(self.x0.shape[0])

    def bc_target(self, frame: float) -> np.ndarray:
        """Targets (K, 3) of the prescribed vertices at a (fractional) frame, linear in time."""
        f = frame - self.frame_start
        last = self.bc_samples.shape[0] - 1
        f = min(max(f, 0.0), float(last))
        i0 = int(np.floor(f))
        i1 = min(i0 + 1, last)
        t = f - i0
        return (1.0 - t) * self.bc_samples[i0] + t * self.bc_samples[i1]

    def body_positions(self, x: np.ndarray) -> dict:
        """name -> (n, 3) float32 output positions of every simulated body, artist vertex order. ``x``: the
        DOF array z (a stiff body with a collision shape is computed from its rows: x = A X + p)."""
        out = {}
        for b in self.blocks:
            if b.role == "collider":
                continue
            if b.shape_body >= 0:
                out[b.name] = self.affine.render_positions(x, b.shape_body).astype(np.float32)
            else:
                out[b.name] = x[b.offset:b.offset + b.n_out].astype(np.float32)
        return out


def _solid(body: Body, mat_E: float, progress: Callable, tet_spacing: Optional[float]):
    check_solid(body.name, body.vertices, body.triangles)
    mesh = tetrahedralize(body.name, body.vertices, body.triangles, tet_spacing)
    Dm_inv, vol = elastic_tet.rest_shape(mesh.nodes, mesh.tets)
    if (vol <= 0).any():
        raise SceneError(f"{body.name}: tetrahedralisation produced a flat element; remesh the object", body.name,
                         "vertices")
    return mesh, Dm_inv, vol


@dataclass
class _Parts:
    """What the per-role builders append to while build_system walks the bodies: element lists (one
    tuple of arrays per body, concatenated at the end), the collision surface, the prescribed vertices
    and their sampled targets, and the stiff bodies' specs."""
    faces: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    tets: list = field(default_factory=list)
    tets10: list = field(default_factory=list)
    tris: list = field(default_factory=list)
    hinges: list = field(default_factory=list)
    rods: list = field(default_factory=list)
    bends: list = field(default_factory=list)
    bc_idx: list = field(default_factory=list)
    bc_samples: list = field(default_factory=list)
    abd_specs: list = field(default_factory=list)
    abd_anim: list = field(default_factory=list)
    abd_vel: list = field(default_factory=list)
    shape_warnings: list = field(default_factory=list)
    shrink: list = field(default_factory=list)     # model/rest_schedule.ShrinkTrack per cloth with keyed Shrink


def _stiff_affine(body: Body, V, tris, off: int, vel, P: _Parts) -> tuple:
    """A stiff body as an affine body: (nodes, lumped mass kg, contact offsets m); its 12 DOFs are
    appended after the vertex rows by _add_affine_bodies. The nodes are its collision shape's vertices
    (model/collision_shapes.py; the body's own vertices when its Mesh shape has no flat region to merge); mass
    and inertia come from the body's own closed mesh whatever the shape."""
    from solver_server.bodies import BodySpec, mass_properties
    mat = body.material
    check_solid(body.name, V, tris)
    if body.pin_indices.size:
        raise SceneError(f"{body.name}: a stiff body cannot be pinned by a vertex group; keyframe the "
                         "object instead (it then follows its animation as a whole)", body.name, "pin_indices")
    mp = mass_properties(V, tris, mat.density)
    shape = build_shape(body)
    if shape.warning:
        P.shape_warnings.append(shape.warning)
    own = shape.own
    P.faces.append(shape.triangles + off)
    P.abd_specs.append(BodySpec(body.name, V, tris, mat.density, mat.youngs_modulus, off, -1,
                                None if own else shape.vertices))
    P.abd_anim.append(body.animation)
    P.abd_vel.append(vel)
    k = len(shape.vertices)
    return shape.vertices, np.full(k, mp.mass / k), np.zeros(k)  # mass descriptive only (inertia is in z)


def _solid_part(body: Body, tris, off: int, P: _Parts, progress, spacing) -> tuple:
    """A solid (or a stiff FEM solid) as linear or quadratic tets: (nodes, lumped mass, offsets)."""
    mat = body.material
    E = mat.youngs_modulus if body.role == "solid" else max(mat.youngs_modulus, STIFF_MODULUS)
    mesh, Dm_inv, vol = _solid(body, E, progress, spacing)
    mu, lam = lame(E, mat.poisson_ratio)
    T = len(mesh.tets)
    per_tet = (Dm_inv, vol, np.full(T, mu), np.full(T, lam), np.full(T, MODEL_IDS[mat.model], np.int32))
    if body.role == "solid" and mat.element == "quadratic":
        nodes, t10 = elastic_tet10.add_midedge_nodes(mesh.nodes, mesh.tets)
        P.tets10.append((t10 + off,) + per_tet)
        m = elastic_tet10.lumped_mass(t10, vol, mat.density, len(nodes))
        P.faces.append(split_surface(tris, t10) + off)
    else:
        nodes = mesh.nodes
        P.tets.append((mesh.tets + off,) + per_tet)
        m = np.zeros(len(nodes))
        np.add.at(m, mesh.tets.ravel(), np.repeat(mat.density * vol / 4.0, 4))
        P.faces.append(tris + off)
    return nodes, m, np.zeros(len(nodes))


def _pin_midedge_nodes(t10: np.ndarray, pins: np.ndarray, samples: np.ndarray) -> tuple:
    """Pins of a quadratic solid extended to the mid-edge nodes of edges whose two corners are both
    pinned, each following the midpoint of its corners' targets (exact for any affine motion of the
    pinned vertices). Without them a clamped face is held only at its corners and hinges at the free
    mid-edge nodes: a 10-node cantilever clamped by a vertex group sagged 16.5% more than
    Euler-Bernoulli in the benchmark suite; statically at 10x2x2 cells, 1.131 of it without these pins
    and 1.021 with them (tests/ipc/test_tet10.py). Returns (pins, samples (F, K, 3))."""
    e = np.sort(t10[:, elastic_tet10.EDGES].reshape(-1, 2).astype(np.int64), axis=1)
    mids = t10[:, 4:].reshape(-1).astype(np.int64)
    slot = -np.ones(int(max(t10[:, :4].max(), pins.max())) + 1, np.int64)
    slot[pins] = np.arange(len(pins))
    both = (slot[e[:, 0]] >= 0) & (slot[e[:, 1]] >= 0)
    mids, first = np.unique(mids[both], return_index=True)
    if not len(mids):
        return pins, samples
    a, b = slot[e[both][first, 0]], slot[e[both][first, 1]]
    return (np.concatenate([pins, mids]),
            np.concatenate([samples, 0.5 * (samples[:, a] + samples[:, b])], axis=1))


def _cloth_part(body: Body, V, tris, off: int, P: _Parts) -> tuple:
    """A cloth: plane-stress membrane + shell bending, the vertex-group maps (stretch, bending, mass,
    shrink) applied per triangle; (nodes, lumped mass, offsets = thickness / 2)."""
    mat = body.material
    check_triangles(body.name, V, tris)
    vsc = getattr(body, "vertex_scales", None)
    tsc = np.ones((len(tris), 4)) if vsc is None else vsc[tris].mean(axis=1)   # per-triangle map values
    Dm_inv, area = membrane.rest_shape(V, tris)
    keyed = getattr(body, "shrink_samples", None)
    if keyed is not None:           # keyed Shrink: the rest size follows it (model/rest_schedule.py)
        sw = body.shrink_weights if getattr(body, "shrink_weights", None) is not None else np.ones(len(V))
        row0 = sum(len(t[0]) for t in P.tris)
        P.shrink.append(ShrinkTrack(np.arange(row0, row0 + len(tris), dtype=np.int64), Dm_inv.copy(), area.copy(),
                                    sw[tris].mean(axis=1), np.asarray(keyed, np.float64)))
        tsc[:, 3] = 1.0 - float(keyed[0]) * P.shrink[-1].weight
    Dm_inv = Dm_inv / tsc[:, 3, None, None]          # rest size scaled (shrink < 1, grow > 1)
    area = area * tsc[:, 3] ** 2
    mu, lam = lame(mat.youngs_modulus, mat.poisson_ratio)
    lam = 2.0 * mu * lam / (lam + 2.0 * mu)   # plane stress (a thin sheet): E nu / (1 - nu^2)
    k = len(tris)
    P.tris.append((tris + off, Dm_inv, area, mu * tsc[:, 0], lam * tsc[:, 0], np.full(k, mat.thickness)))
    sh = shell_bending.shell_stencils(tris)
    if len(sh):
        K = shell_bending.shell_stiffness(V, sh, mat.bending_stiffness * tsc[:, 1])
        P.hinges.append((sh + off, K, shell_bending.rest_thetas(V, sh)))
    m = np.zeros(len(V))
    np.add.at(m, tris.ravel(), np.repeat(mat.density * mat.thickness * triangle_areas(V, tris) / 3.0, 3))
    if vsc is not None:
        m *= vsc[:, 2]
    P.faces.append(tris + off)
    return V, m, np.full(len(V), 0.5 * mat.thickness)


def _rod_part(body: Body, V, tris, off: int, P: _Parts) -> tuple:
    """A rod: stretch springs and bending on its edges; (nodes, lumped mass, offsets = thickness / 2)."""
    mat = body.material
    e = body.edges.astype(np.int32)
    rest = np.linalg.norm(V[e[:, 1]] - V[e[:, 0]], axis=1)
    if (rest <= 1e-12).any():
        raise SceneError(f"{body.name}: the rod has a zero-length edge; merge by distance", body.name, "edges")
    area = np.pi * (0.5 * mat.thickness) ** 2
    P.rods.append((e + off, rest, np.full(len(e), mat.youngs_modulus * area)))
    s = bending.rod_stencils(e, len(V))
    if len(s):
        lbar = 0.5 * (np.linalg.norm(V[s[:, 1]] - V[s[:, 0]], axis=1) + np.linalg.norm(V[s[:, 2]] - V[s[:, 1]], axis=1))
        P.bends.append((s + off, mat.bending_stiffness / lbar, _rest_d(1, V, s)))
    m = np.zeros(len(V))
    np.add.at(m, e.ravel(), np.repeat(mat.density * area * rest / 2.0, 2))
    P.edges.append(e + off)
    if len(tris):
        P.faces.append(tris + off)
    return V, m, np.full(len(V), 0.5 * mat.thickness)


def _collider_part(body: Body, V, tris, off: int, n_frames: int, P: _Parts) -> tuple:
    """A collider: every vertex prescribed by Body.animation (static when None); (nodes, 0 mass, 0 offsets)."""
    check_triangles(body.name, V, tris)
    P.faces.append(tris + off)
    anim = body.animation.astype(np.float64) if body.animation is not None else np.repeat(V[None], n_frames, 0)
    P.bc_idx.append(np.arange(len(V)) + off)
    P.bc_samples.append(anim)
    return V, np.zeros(len(V)), np.zeros(len(V))


def _body_part(body: Body, off: int, n_frames: int, P: _Parts, progress, tet_spacing, affine: bool) -> tuple:
    """(nodes (n, 3) m, lumped mass (n,) kg, contact offsets (n,) m) of one body, its elements appended to P."""
    V = body.vertices.astype(np.float64)
    tris = body.triangles.astype(np.int32)
    if body.role == "stiff" and affine:
        return _stiff_affine(body, V, tris, off, np.asarray(body.initial_velocity, np.float64), P)
    if body.role in ("solid", "stiff"):
        return _solid_part(body, tris, off, P, progress, (tet_spacing or {}).get(body.name))
    if body.role == "cloth":
        return _cloth_part(body, V, tris, off, P)
    if body.role == "rod":
        return _rod_part(body, V, tris, off, P)
    if body.role == "collider":
        return _collider_part(body, V, tris, off, n_frames, P)
    raise SceneError(f"{body.name}: role {body.role!r} is not simulated by the IPC backend; use the mpm backend",
                     body.name, "role")


def _elastic_terms(n_verts: int, P: _Parts) -> ElasticTerms:
    """The scene's ElasticTerms: every body's element arrays concatenated, index arrays int32."""
    el = ElasticTerms(n_verts=n_verts)
    if P.tets:
        el.tets, el.tet_Dm_inv, el.tet_vol, el.tet_mu, el.tet_lam, el.tet_model = [
            np.ascontiguousarray(np.concatenate(z)) for z in zip(*P.tets)]
    if P.tets10:
        el.tets10, el.tet10_Dm_inv, el.tet10_vol, el.tet10_mu, el.tet10_lam, el.tet10_model = [
            np.ascontiguousarray(np.concatenate(z)) for z in zip(*P.tets10)]
    if P.tris:
        el.tris, el.tri_Dm_inv, el.tri_area, el.tri_mu, el.tri_lam, el.tri_thick = [
            np.ascontiguousarray(np.concatenate(z)) for z in zip(*P.tris)]
    if P.hinges:
        el.shells, el.shell_K, el.shell_th0 = [np.ascontiguousarray(np.concatenate(z)) for z in zip(*P.hinges)]
    if P.rods:
        el.rod_edges, el.rod_rest, el.rod_k = [np.ascontiguousarray(np.concatenate(z)) for z in zip(*P.rods)]
    if P.bends:
        el.rod_bends, el.rod_kw, el.rod_d0 = [np.ascontiguousarray(np.concatenate(z)) for z in zip(*P.bends)]
    for name in ("tets", "tets10", "tris", "shells", "rod_edges", "rod_bends"):
        setattr(el, name, np.ascontiguousarray(getattr(el, name), np.int32))
    return el


def build_system(scene: Scene, progress: Optional[Callable] = None, tet_spacing: Optional[dict] = None,
                 affine: bool = True) -> System:
    """Build the global system; ``tet_spacing`` optionally maps a body name to a lattice spacing (m).
    ``affine``: stiff bodies become affine bodies (else stiff FEM solids)."""
    progress = progress or (lambda s, f: None)
    st = scene.settings
    F = st.n_frames
    P = _Parts()
    xs, vs, ms, dyn, offs, vbody, blocks, fr, sc, stc = [], [], [], [], [], [], [], [], [], []
    off = 0
    bodies = scene.bodies
    for bi, body in enumerate(bodies):
        progress("building", bi / max(len(bodies), 1))
        nodes, m, o = _body_part(body, off, F, P, progress, tet_spacing, affine)
        if body.role not in ("collider", "stiff") and body.pin_indices.size:
            p = body.pin_indices.astype(np.int64)
            samples = (body.pin_targets.astype(np.float64) if body.pin_targets is not None
                       else np.repeat(body.vertices.astype(np.float64)[p][None], F, 0))
            if body.role == "solid" and body.material.element == "quadratic":
                p, samples = _pin_midedge_nodes(P.tets10[-1][0] - off, p, samples)
            P.bc_idx.append(p + off)
            P.bc_samples.append(samples)
        N = len(nodes)
        if body.role != "collider" and (m <= 0).any():
            raise SceneError(f"{body.name}: {int((m <= 0).sum())} vertices belong to no element (loose vertices); "
                             "delete them", body.name, "vertices")
        vel = np.asarray(body.initial_velocity, np.float64)
        xs.append(nodes)
        vs.append(np.repeat(vel[None], N, 0) if body.role != "collider" else np.zeros((N, 3)))
        ms.append(m)
        dyn.append(np.full(N, body.role != "collider"))
        offs.append(o)
        vbody.append(np.full(N, bi, np.int32))
        fr.append(body.material.friction)
        sc.append(body.role in ("cloth", "rod"))
        stc.append(body.role == "collider" and body.animation is None)
        # _stiff_affine appended this body's spec just now; its contact vertices are not its own when the
        # shape is not the body's own triangles (any shape but a Mesh shape that merged nothing)
        shaped = body.role == "stiff" and affine and P.abd_specs[-1].contact_vertices is not None
        blocks.append(BodyBlock(body.name, body.role, bi, off, N, body.vertices.shape[0],
                                len(P.abd_specs) - 1 if shaped else -1))
        off += N
    progress("building", 1.0)
    el = _elastic_terms(off, P)
    fc = np.concatenate(P.faces).astype(np.int32) if P.faces else np.zeros((0, 3), np.int32)
    ec = _face_edges(fc)
    if P.edges:
        ec = np.unique(np.sort(np.concatenate([ec] + P.edges), axis=1), axis=0).astype(np.int32)
    bc_index = np.concatenate(P.bc_idx).astype(np.int64) if P.bc_idx else np.zeros(0, np.int64)
    bc_samples = np.concatenate(P.bc_samples, axis=1) if P.bc_samples else np.zeros((F, 0, 3))
    if len(np.unique(bc_index)) != len(bc_index):
        raise SceneError("a vertex is pinned twice; check the pin vertex groups", "", "pin_indices")
    x0 = np.ascontiguousarray(np.concatenate(xs))
    sysm = System(x0=x0, v0=np.concatenate(vs), mass=np.concatenate(ms), dynamic=np.concatenate(dyn), elastic=el,
                  blocks=blocks, coll_faces=fc, coll_edges=ec, vertex_offset=np.concatenate(offs),
                  vertex_body=np.concatenate(vbody), body_friction=np.array(fr, np.float64),
                  body_self_contact=np.array(sc, bool), body_static=np.array(stc, bool), bc_index=bc_index,
                  bc_samples=bc_samples, frame_start=st.frame_start,
                  stats={"tets": int(len(el.tets) + len(el.tets10)), "vertices": int(off),
                         "shape_warnings": list(P.shape_warnings)})
    if P.abd_specs:
        _add_affine_bodies(sysm, P.abd_specs, P.abd_anim, P.abd_vel, F)
    sysm.external = build_external(scene, blocks, x0, sysm.dynamic_z[:off] & sysm.dynamic, fc)
    sysm.rest_schedule = RestSchedule(P.shrink) if P.shrink else None
    sysm.attachments = build_attachments(scene, blocks, x0, fc, ec, sysm.vertex_offset, sysm.vertex_body)
    return sysm


def _add_affine_bodies(s: System, specs: list, anims: list, vels: list, n_frames: int) -> None:
    """Append 4 rows per affine body to the DOF vector z, slave the bodies' vertices to them and
    turn keyframed stiff bodies into prescribed bodies (their rows fitted to each sampled frame)."""
    from solver_server.bodies import AffineBodies
    N = s.n
    for b, sp in enumerate(specs):
        sp.row0 = N + 4 * b
    ab = AffineBodies(specs)
    n_z = N + 4 * ab.n
    slaved, ptr, rows, w = ab.map_arrays()
    s.affine = ab
    s.dof_map = DofMap(N, n_z, slaved, ptr, rows, w)
    s.z0 = np.concatenate([s.x0, ab.rest_rows()])
    s.dof_map.sync(s.z0)
    vz = np.concatenate([s.v0, np.zeros((4 * ab.n, 3))])
    for b in range(ab.n):
        vz[ab.row0[b]] = vels[b]
    vz[slaved] = s.dof_map.to_x(vz)[slaved]
    s.vz0 = vz
    s.mass_z = np.concatenate([np.where(s.dof_map.is_slaved[:N], 0.0, s.mass), np.zeros(4 * ab.n)])
    s.dynamic_z = np.concatenate([s.dynamic & ~s.dof_map.is_slaved[:N], np.zeros(4 * ab.n, bool)])
    s.weight_z = np.concatenate([np.where(s.dynamic_z[:N], s.mass_z[:N], 0.0), ab.diag_mass_rows()])
    idx, smp = [s.bc_index], [s.bc_samples]
    for b, anim in enumerate(anims):
        if anim is None:
            continue
        rows_f = np.stack([ab.fit_rows(b, anim[f]) for f in range(n_frames)])  # (F, 4, 3)
        idx.append(np.arange(4, dtype=np.int64) + ab.row0[b])
        smp.append(rows_f)
        s.z0[ab.row0[b]:ab.row0[b] + 4] = rows_f[0]
    s.dof_map.sync(s.z0)
    s.bc_index = np.concatenate(idx).astype(np.int64)
    s.bc_samples = np.concatenate(smp, axis=1)
    s.stats["affine_bodies"] = ab.n


def split_surface(tris: np.ndarray, tets10: np.ndarray) -> np.ndarray:
    """Contact triangles (k, 3) of a quadratic solid: each artist triangle split at the mid-edge nodes
    of those of its edges that are tet edges (4 triangles when all three are, 3, 2 or 1 otherwise;
    Delaunay may cut a flat quad along the other diagonal, so an artist edge need not be a tet edge).
    Whether an edge is split depends on the edge alone, so neighbouring triangles agree and the split
    surface is closed. Orientation is kept. Node indices as in ``tets10`` (corners = artist vertices)."""
    tris = np.asarray(tris, np.int64)
    N = int(max(tets10.max(), tris.max())) + 1
    e = np.sort(tets10[:, elastic_tet10.EDGES].reshape(-1, 2).astype(np.int64), axis=1)
    key, first = np.unique(e[:, 0] * N + e[:, 1], return_index=True)
    mids = tets10[:, 4:].reshape(-1)[first].astype(np.int64)
    a, b = tris, np.roll(tris, -1, axis=1)  # edges (v0,v1), (v1,v2), (v2,v0)
    k = np.minimum(a, b) * N + np.maximum(a, b)
    i = np.minimum(np.searchsorted(key, k), key.size - 1)
    m = np.where(key[i] == k, mids[i], -1)  # (T, 3) mid-edge node of each edge or -1
    has = m >= 0
    n_mid = has.sum(axis=1)
    # rotate each triangle so that its split edges come first: edge 0 split (and edge 1 when two are)
    r = np.where(n_mid == 1, np.argmax(has, axis=1), (np.argmin(has, axis=1) + 1) % 3)
    idx = (r[:, None] + np.arange(3)) % 3
    v = np.take_along_axis(tris, idx, axis=1)
    mm = np.take_along_axis(m, idx, axis=1)
    v0, v1, v2, m0, m1, m2 = v[:, 0], v[:, 1], v[:, 2], mm[:, 0], mm[:, 1], mm[:, 2]
    out = []
    s = n_mid == 3
    out += [np.stack(t, 1)[s] for t in ((v0, m0, m2), (m0, v1, m1), (m2, m1, v2), (m0, m1, m2))]
    s = n_mid == 2
    out += [np.stack(t, 1)[s] for t in ((m0, v1, m1), (v0, m0, m1), (v0, m1, v2))]
    s = n_mid == 1
    out += [np.stack(t, 1)[s] for t in ((v0, m0, v2), (m0, v1, v2))]
    out.append(tris[n_mid == 0])
    return np.concatenate(out).astype(np.int32)


def _rest_d(kind: int, V: np.ndarray, stencils: np.ndarray) -> np.ndarray:
    f = bending.hinge_d if kind == 0 else bending.rod_d
    d = np.array([np.linalg.norm(f(V, s)[0]) for s in stencils])
    d[d < 1e-6] = 0.0  # flat / straight rest state: use the smooth |d|^2 form
    return d


def _face_edges(faces: np.ndarray) -> np.ndarray:
    if not len(faces):
        return np.zeros((0, 2), np.int32)
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    return np.unique(e, axis=0).astype(np.int32)
