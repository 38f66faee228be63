"""Air, force fields and pressure as the solvers see them: which triangles feel the air (and how much),
which feel an internal pressure, and the scene's force fields evaluated at points and times.

Fields (protocol.scene.ForceField, Blender's field objects sampled once per frame; linear in time between
samples like a collider): at a point x, with o the field object's origin, z its unit +Z axis and r the
falloff distance of its shape (``point`` |x - o|, ``plane`` |z.(x - o)|, ``line`` distance from the Z axis),
the falloff is 0 beyond distance_max (use_max), 1 inside distance_min (use_min), else
(1 + r - r_min)^-power (r_min = distance_min when use_min, else 0; Blender's rule), and

  wind    air velocity  strength * falloff * z                          (m/s)
  vortex  air velocity  strength * falloff * unit(z x (x - o))          (m/s)
  force   acceleration  strength * falloff * unit(x - o)                (m/s^2; negative strength attracts)
          plus the drag -flow * falloff * v per unit mass (1/s)
  turbulence  air velocity  strength * falloff * R n(R^T (x - o) / size)  (m/s): n a smooth random field
          (TURBULENCE_MODES random Fourier modes of wavelength ~size, from ``seed``) with unit RMS per axis,
          carried and turned with the field object (R its rotation)

each times the body's field weight of that kind (Body.field_weights). Air velocities act through
Material.air_drag (energies/air.py) on the surface of cloth, solid and stiff bodies (each triangle, a solid's
boundary triangles) and across the length of rods (each segment); accelerations act on every simulated vertex
of cloth, solids and rods (stiff bodies ignore Force fields).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from protocol.scene import FIELD_WEIGHT_KINDS, SceneError

WIND, FORCE, VORTEX, TURBULENCE = (FIELD_WEIGHT_KINDS.index(k) for k in ("wind", "force", "vortex", "turbulence"))
TURBULENCE_MODES = 24   # random Fourier modes of the turbulence pattern
AIR_KINDS = {"wind": WIND, "vortex": VORTEX, "turbulence": TURBULENCE}


def _sample(a: np.ndarray, f: float) -> np.ndarray:
    """Linear interpolation of per-frame samples ``a`` (F, ...) at fractional index f (clamped)."""
    last = a.shape[0] - 1
    f = min(max(f, 0.0), float(last))
    i0 = int(np.floor(f))
    i1 = min(i0 + 1, last)
    t = f - i0
    return (1.0 - t) * a[i0] + t * a[i1]


def falloff(ff, r: np.ndarray) -> np.ndarray:
    """Blender's falloff factor (dimensionless, (n,)) of field ``ff`` at falloff distances r (m)."""
    rmin = ff.distance_min if ff.use_min else 0.0
    out = np.power(1.0 + np.maximum(r - rmin, 0.0), -float(ff.falloff_power))
    if ff.use_min:
        out = np.where(r < ff.distance_min, 1.0, out)
    if ff.use_max:
        out = np.where(r > ff.distance_max, 0.0, out)
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > 1e-12, v / np.maximum(n, 1e-300), 0.0)


def field_at(ff, frame_index: float, pts: np.ndarray) -> tuple:
    """(vector (n, 3), flow (n,)) of one field at points ``pts`` (m) at fractional frame index
    ``frame_index`` (0 = frame_start): an air velocity (wind, vortex; m/s) or an acceleration (force;
    m/s^2) and the force field's flow drag rate (1/s; 0 for the others)."""
    s = float(_sample(ff.strength, frame_index))
    M = _sample(ff.matrix, frame_index)
    o = M[:3, 3]
    z = M[:3, 2] / max(np.linalg.norm(M[:3, 2]), 1e-300)
    d = pts - o
    along = d @ z
    if ff.shape == "point":
        r = np.linalg.norm(d, axis=1)
    elif ff.shape == "plane":
        r = np.abs(along)
    else:
        r = np.linalg.norm(d - along[:, None] * z, axis=1)
    fo = falloff(ff, r)
    if ff.kind == "wind":
        vec = (s * fo)[:, None] * z[None, :]
    elif ff.kind == "turbulence":
        R = M[:3, :3] / np.maximum(np.linalg.norm(M[:3, :3], axis=0), 1e-300)
        vec = (s * fo)[:, None] * (turbulence_pattern((d @ R) / float(ff.size), int(ff.seed)) @ R.T)
    elif ff.kind == "vortex":
        vec = (s * fo)[:, None] * _unit(np.cross(z[None, :], d))
    else:
        vec = (s * fo)[:, None] * _unit(d)
    flow = np.zeros(len(pts))
    if ff.kind == "force" and ff.flow.size:
        flow = float(_sample(ff.flow, frame_index)) * fo
    return vec, flow


def turbulence_pattern(q: np.ndarray, seed: int) -> np.ndarray:
    """(n, 3) smooth random vector field at points q (n, 3) in units of the feature size: a sum of
    TURBULENCE_MODES sine modes sqrt(2/K) sum_j a_j sin(k_j . q + phi_j), a_j ~ N(0, I) rescaled per component to
    mean square 1, |k_j| in 2 pi [0.5, 1.5]
    with random directions, so each component has unit RMS over space; deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    K = TURBULENCE_MODES
    dirs = rng.normal(size=(K, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    k = dirs * (2.0 * np.pi * rng.uniform(0.5, 1.5, size=K))[:, None]
    a = rng.normal(size=(K, 3))
    a /= np.sqrt((a * a).mean(axis=0))          # each component: mean square 1 over the modes, so RMS 1 in space
    phi = rng.uniform(0.0, 2.0 * np.pi, size=K)
    return np.sqrt(2.0 / K) * (np.sin(q @ k.T + phi) @ a)


@dataclass
class ExternalSpec:
    """Air, fields and pressure of a built System (global vertex numbering). Empty arrays switch a part off."""

    fields: tuple = ()
    air_tris: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int32))    # cloth triangles
    air_k: np.ndarray = field(default_factory=lambda: np.zeros(0))                      # Pa s/m per triangle
    air_weight: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))            # field weights per triangle
    air_segs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int32))    # rod segments
    seg_kd: np.ndarray = field(default_factory=lambda: np.zeros(0))                     # k d, N s/m^2 per segment
    seg_weight: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))            # field weights per segment
    vertex_weight: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))         # (N, 4) per vertex (0: none)
    pressure_tris: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int32))  # outward-oriented
    pressure: np.ndarray = field(default_factory=lambda: np.zeros(0))                   # Pa per triangle
    pressure_body: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))     # index into pressure_keys
    seams: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int32))          # sewing springs
    seam_k: np.ndarray = field(default_factory=lambda: np.zeros(0))                     # N/m per seam
    pressure_keys: tuple = ()   # per pressurised body: (F,) Pa per frame (keyed Pressure) or None (constant)

    @property
    def active(self) -> bool:
        return bool(len(self.pressure_tris) or len(self.air_tris) or len(self.air_segs) or len(self.seams)
                    or (self.fields and self.vertex_weight.any()))

    @property
    def does_work(self) -> bool:
        """True when these terms can add energy: a force field, a pressure or a seam (air drag in still air
        only dissipates). The energy guard (integrators/energy_guard.py) lets such steps raise the total."""
        return bool(len(self.fields) or len(self.pressure_tris) or len(self.seams))

    def pressure_at(self, frame_index: float) -> np.ndarray:
        """(T,) Pa: each pressure triangle's pressure at fractional frame index ``frame_index`` (keyed
        pressures linear between frames)."""
        if not any(k is not None for k in self.pressure_keys):
            return self.pressure
        per_body = np.array([float(_sample(k, frame_index)) if k is not None else np.nan for k in self.pressure_keys])
        p = per_body[self.pressure_body]
        return np.ascontiguousarray(np.where(np.isnan(p), self.pressure, p))

    def air_velocity(self, x: np.ndarray, frame_index: float) -> np.ndarray:
        """(T, 3) m/s: weighted wind + vortex + turbulence air velocity at each air triangle (mean of its vertices)."""
        return self._air_at(self.air_tris, self.air_weight, x, frame_index)

    def segment_air_velocity(self, x: np.ndarray, frame_index: float) -> np.ndarray:
        """(S, 3) m/s: the same at each rod segment (mean of its two vertices)."""
        return self._air_at(self.air_segs, self.seg_weight, x, frame_index)

    def _air_at(self, elems: np.ndarray, weight: np.ndarray, x: np.ndarray, frame_index: float) -> np.ndarray:
        u = np.zeros((len(elems), 3))
        if not len(elems):
            return u
        verts = np.unique(elems)
        pts = x[verts]
        where = np.full(x.shape[0], -1, np.int64)
        where[verts] = np.arange(len(verts))
        loc = where[elems]
        for ff in self.fields:
            if ff.kind == "force":
                continue
            vec, _ = field_at(ff, frame_index, pts)
            w = weight[:, AIR_KINDS[ff.kind]]
            u += w[:, None] * vec[loc].mean(axis=1)
        return u

    def acceleration(self, x: np.ndarray, frame_index: float) -> tuple:
        """((N, 3) m/s^2, (N,) 1/s): the weighted Force fields' acceleration and flow drag rate at every vertex
        (zero on vertices no field acts on)."""
        n = x.shape[0]
        acc, rate = np.zeros((n, 3)), np.zeros(n)
        w = self.vertex_weight[:, FORCE] if len(self.vertex_weight) else np.zeros(n)
        idx = np.nonzero(w)[0]
        for ff in self.fields:
            if ff.kind != "force" or not len(idx):
                continue
            vec, flow = field_at(ff, frame_index, x[idx])
            acc[idx] += w[idx, None] * vec
            rate[idx] += w[idx] * flow
        return acc, rate


def open_edges(tris: np.ndarray) -> int:
    """Number of edges not shared by exactly two triangles (0 for a closed manifold surface)."""
    e = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1)
    _, count = np.unique(e, axis=0, return_counts=True)
    return int((count != 2).sum())


def build_external(scene, blocks: list, x0: np.ndarray, dynamic: np.ndarray,
                   faces: Optional[np.ndarray] = None) -> Optional[ExternalSpec]:
    """The ExternalSpec of a scene whose bodies were laid out as ``blocks`` (model/system.py), or None when
    nothing acts. ``faces``: the system's contact triangles (global vertex indices); a stiff body whose block
    holds its collision shape (``shape_body`` >= 0: its own vertices are not in the system) feels the air on the
    shape's triangles, taken from there. Raises SceneError for pressure on an open cloth."""
    from solver_server.energies.pressure import enclosed_volume
    from solver_server.energies.seam import loose_edges
    bodies = {b.name: b for b in scene.bodies}
    fields = tuple(getattr(scene, "force_fields", ()))
    kinds = {f.kind for f in fields}
    at, ak, aw, pt, pp, pb, pk, se, sk, ag, gk, gw = [], [], [], [], [], [], [], [], [], [], [], []
    vw = np.zeros((x0.shape[0], len(FIELD_WEIGHT_KINDS)))
    for blk in blocks:
        b = bodies[blk.name]
        w = np.asarray(getattr(b, "field_weights", (1.0, 1.0, 1.0, 1.0)), np.float64)
        if blk.role in ("cloth", "solid", "rod"):
            vw[blk.offset:blk.offset + blk.n_nodes] = w
        k = float(b.material.air_drag)
        if k > 0.0 and blk.role in ("solid", "stiff"):      # the boundary triangles of a tet mesh or stiff body
            if blk.role == "stiff" and blk.shape_body >= 0 and faces is not None:
                own = (faces[:, 0] >= blk.offset) & (faces[:, 0] < blk.offset + blk.n_nodes)
                st = np.ascontiguousarray(faces[own], np.int32)   # the collision shape's triangles, global
            else:
                st = b.triangles.astype(np.int32) + blk.offset
            at.append(st)
            ak.append(np.full(len(st), k))
            aw.append(np.repeat(w[None], len(st), 0))
        if k > 0.0 and blk.role == "rod":                   # cross drag along the rod's length
            ag.append(b.edges.astype(np.int32) + blk.offset)
            gk.append(np.full(len(b.edges), k * float(b.material.thickness)))
            gw.append(np.repeat(w[None], len(b.edges), 0))
        if blk.role != "cloth":
            continue
        tris = b.triangles.astype(np.int32) + blk.offset
        sew = float(getattr(b.material, "sewing", 0.0))
        if sew > 0.0:
            seams = loose_edges(b.edges, b.triangles)
            if not len(seams):
                raise SceneError(f"{b.name}: Sewing is on but the mesh has no loose edges; connect the panels' seam "
                                 "vertices with edges that belong to no face (or set Sewing to 0)", b.name, "sewing")
            se.append(seams + blk.offset)
            sk.append(np.full(len(seams), sew))
        k = float(b.material.air_drag)
        if k > 0.0:
            at.append(tris)
            ak.append(np.full(len(tris), k))
            aw.append(np.repeat(w[None], len(tris), 0))
        p = float(b.material.pressure)
        keys = getattr(b, "pressure_samples", None)
        if p != 0.0 or (keys is not None and np.any(keys)):
            n_open = open_edges(b.triangles)
            if n_open:
                raise SceneError(f"{b.name}: Pressure needs a closed mesh, but {n_open} edges are open or shared by "
                                 "more than two faces; close the mesh (or set Pressure to 0)", b.name, "pressure")
            vol = enclosed_volume(b.vertices, b.triangles.astype(np.int32))
            pt.append(tris if vol > 0 else tris[:, ::-1].copy())   # outward orientation
            pp.append(np.full(len(tris), p))
            pb.append(np.full(len(tris), len(pk), np.int64))
            pk.append(None if keys is None else np.asarray(keys, np.float64))
    vw[~dynamic] = 0.0
    if "force" not in kinds:
        vw[:] = 0.0
    spec = ExternalSpec(fields=fields, vertex_weight=vw)
    if at:
        spec.air_tris = np.ascontiguousarray(np.concatenate(at), np.int32)
        spec.air_k = np.concatenate(ak)
        spec.air_weight = np.concatenate(aw)
    if ag:
        spec.air_segs = np.ascontiguousarray(np.concatenate(ag), np.int32)
        spec.seg_kd = np.concatenate(gk)
        spec.seg_weight = np.concatenate(gw)
    if se:
        spec.seams = np.ascontiguousarray(np.concatenate(se), np.int32)
        spec.seam_k = np.concatenate(sk)
    if pt:
        spec.pressure_tris = np.ascontiguousarray(np.concatenate(pt), np.int32)
        spec.pressure = np.concatenate(pp)
        spec.pressure_body = np.concatenate(pb)
        spec.pressure_keys = tuple(pk)
    return spec if spec.active else None
