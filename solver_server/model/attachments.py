"""Attachments as the solver sees them: which vertex hangs on which triangle of which body, and the contact
pairs the attachment takes out of the barrier (Body.attach_to / Body.attach_indices, protocol 1.6).

At the start frame each attached vertex v (of a cloth, solid or rod) finds the nearest point of the target
body's collision surface (cloth, solid, stiff or collider triangles). Its anchor is that point's triangle
t = (t0, t1, t2), the barycentric coordinates b of v's projection onto the triangle's plane (so the anchor
reproduces v exactly at the start frame; b lies in the triangle, or just outside it when the nearest point is
on an edge) and v's signed height gamma above the plane (m). During the bake v is held at
sum_j b_j x_tj + gamma n_t by the coupling energy of energies/attachment.py, so it is carried by whatever
moves the triangle: a deforming cloth or solid, an affine (stiff) body (its slaved vertices x = A X + p), or
a keyframed collider.

Contact exclusions. An attached vertex sits on (or within the contact offsets of) the surface it hangs on,
where the barrier would push it off and fight the attachment. So the pairs between the attached vertex's
one-ring (the vertex, its incident edges and faces) and the target's faces, edges and vertices near the
anchor (faces within R = the longest incident edge + |gamma| + the contact offsets + dhat of the anchor
point) are excluded from the barrier, friction and CCD (contact/exclusions.py), and the matching
edge-triangle pairs from the intersection checks. Every other pair keeps the no-intersection guarantee.
Units: SI.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from protocol.scene import SceneError

ATTACH_KAPPA = 1.0e3
"""Coupling stiffness of an attachment, as a multiple of the attached vertex's own stiffness in the step
(its mass m_v plus h^2 times the diagonal of its elastic Hessian): the attached vertex then moves about
1/ATTACH_KAPPA as far from its target as the same load would move a free vertex in one step."""


@dataclass
class AttachmentSpec:
    """Attachments of a built System (global vertex numbering)."""

    verts: np.ndarray                 # (A,) int32 attached vertices
    tris: np.ndarray                  # (A, 3) int32 anchor triangles (target body's vertices)
    bary: np.ndarray                  # (A, 3) float64 barycentric coordinates in the anchor triangle
    height: np.ndarray                # (A,) float64 m, signed height above the triangle's plane
    owner: list = field(default_factory=list)   # (A,) body name of each attachment (for messages)
    excl_pt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # v * F + f
    excl_ee: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # min(e, e') * E + max(e, e')
    excl_ef: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # edge * F + face

    def __len__(self) -> int:
        return int(self.verts.shape[0])


@njit(cache=True)
def _closest_on_triangle(p, a, b, c):
    """(squared distance m^2, barycentric (3,)) of the point of triangle abc nearest to p."""
    ab = b - a
    ac = c - a
    ap = p - a
    d1 = ab @ ap
    d2 = ac @ ap
    w = np.zeros(3)
    if d1 <= 0.0 and d2 <= 0.0:
        w[0] = 1.0
    else:
        bp = p - b
        d3 = ab @ bp
        d4 = ac @ bp
        cp = p - c
        d5 = ab @ cp
        d6 = ac @ cp
        vc = d1 * d4 - d3 * d2
        vb = d5 * d2 - d1 * d6
        va = d3 * d6 - d5 * d4
        if d3 >= 0.0 and d4 <= d3:
            w[1] = 1.0
        elif d6 >= 0.0 and d5 <= d6:
            w[2] = 1.0
        elif vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
            t = d1 / (d1 - d3)
            w[0], w[1] = 1.0 - t, t
        elif vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
            t = d2 / (d2 - d6)
            w[0], w[2] = 1.0 - t, t
        elif va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
            t = (d4 - d3) / ((d4 - d3) + (d5 - d6))
            w[1], w[2] = 1.0 - t, t
        else:
            den = va + vb + vc
            w[1] = vb / den
            w[2] = vc / den
            w[0] = 1.0 - w[1] - w[2]
    q = w[0] * a + w[1] * b + w[2] * c
    d = p - q
    return d @ d, w


@njit(cache=True)
def nearest_faces(points, x, faces):
    """For each point (P, 3): the index of the nearest face of ``faces`` (F, 3) over positions x, the squared
    distance (m^2) and the nearest point (P, 3)."""
    P = points.shape[0]
    best = np.zeros(P, np.int64)
    d2 = np.full(P, np.inf)
    near = np.zeros((P, 3))
    for i in range(P):
        for f in range(faces.shape[0]):
            d, w = _closest_on_triangle(points[i], x[faces[f, 0]], x[faces[f, 1]], x[faces[f, 2]])
            if d < d2[i]:
                d2[i] = d
                best[i] = f
                near[i] = w[0] * x[faces[f, 0]] + w[1] * x[faces[f, 1]] + w[2] * x[faces[f, 2]]
    return best, d2, near


@njit(cache=True)
def faces_within(points, radius, x, faces):
    """(k, 2) int64 rows (point index, face index): every face of ``faces`` closer than radius[i] (m) to
    point i."""
    P = points.shape[0]
    cnt = 0
    for i in range(P):
        r2 = radius[i] * radius[i]
        for f in range(faces.shape[0]):
            d, _ = _closest_on_triangle(points[i], x[faces[f, 0]], x[faces[f, 1]], x[faces[f, 2]])
            if d <= r2:
                cnt += 1
    out = np.empty((cnt, 2), np.int64)
    k = 0
    for i in range(P):
        r2 = radius[i] * radius[i]
        for f in range(faces.shape[0]):
            d, _ = _closest_on_triangle(points[i], x[faces[f, 0]], x[faces[f, 1]], x[faces[f, 2]])
            if d <= r2:
                out[k, 0] = i
                out[k, 1] = f
                k += 1
    return out


def plane_coordinates(p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple:
    """(barycentric (P, 3) of p's projection onto the plane of triangle abc, signed height (P,) m along its unit
    normal (b - a) x (c - a) / |...|, unit normals (P, 3)). All arguments (P, 3)."""
    n = np.cross(b - a, c - a)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    h = np.einsum("ij,ij->i", p - a, n)
    q = p - h[:, None] * n
    e1, e2, d = b - a, c - a, q - a
    d11, d12, d22 = (e1 * e1).sum(1), (e1 * e2).sum(1), (e2 * e2).sum(1)
    r1, r2 = (d * e1).sum(1), (d * e2).sum(1)
    den = d11 * d22 - d12 * d12
    w1 = (d22 * r1 - d12 * r2) / den
    w2 = (d11 * r2 - d12 * r1) / den
    return np.stack([1.0 - w1 - w2, w1, w2], axis=1), h, n


def _csr(owner: np.ndarray, n: int) -> tuple:
    """(ptr (n+1,), order) grouping the rows of ``owner`` (k,) by their value (0..n-1)."""
    order = np.argsort(owner, kind="stable")
    ptr = np.searchsorted(owner[order], np.arange(n + 1))
    return ptr.astype(np.int64), order


def _join(a_idx: np.ndarray, keys_of_a: np.ndarray, ptr: np.ndarray, items: np.ndarray) -> tuple:
    """For pairs (a_idx[i], ...) and a CSR list (ptr, items) over keys: (i repeated, item) for every item of
    key keys_of_a[a_idx[i]]."""
    k = keys_of_a[a_idx]
    cnt = ptr[k + 1] - ptr[k]
    rep = np.repeat(np.arange(len(a_idx)), cnt)
    start = np.repeat(ptr[k], cnt)
    within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return rep, items[start + within]


def build_attachments(scene, blocks: list, x0: np.ndarray, faces: np.ndarray, edges: np.ndarray,
                      vertex_offset: np.ndarray, vertex_body: np.ndarray) -> "AttachmentSpec | None":
    """The AttachmentSpec of a scene laid out as ``blocks`` (model/system.py) over the collision surface
    (faces (F, 3), edges (E, 2) int32 global, contact offsets (N,) m), or None without attachments."""
    bodies = {b.name: b for b in scene.bodies}
    index = {blk.name: i for i, blk in enumerate(blocks)}
    vs, ts, bs, hs, owner = [], [], [], [], []
    fb = vertex_body[faces[:, 0]] if len(faces) else np.zeros(0, np.int32)
    for blk in blocks:
        b = bodies[blk.name]
        if not getattr(b, "attach_to", ""):
            continue
        tgt = blocks[index[b.attach_to]]
        tf = np.nonzero(fb == tgt.index)[0]
        if not len(tf):
            raise SceneError(f"{b.name}: Attach To {b.attach_to!r} has no faces to hang on", b.name, "attach_to")
        v = (b.attach_indices.astype(np.int64) + blk.offset)
        best, _, _ = nearest_faces(x0[v], x0, faces[tf])
        tri = faces[tf[best]]
        bary, h, _ = plane_coordinates(x0[v], x0[tri[:, 0]], x0[tri[:, 1]], x0[tri[:, 2]])
        vs.append(v)
        ts.append(tri)
        bs.append(bary)
        hs.append(h)
        owner += [b.name] * len(v)
    if not vs:
        return None
    spec = AttachmentSpec(np.ascontiguousarray(np.concatenate(vs), np.int32),
                          np.ascontiguousarray(np.concatenate(ts), np.int32),
                          np.ascontiguousarray(np.concatenate(bs)), np.concatenate(hs), owner)
    _exclusions(spec, x0, faces, edges, vertex_offset, vertex_body, float(scene.settings.contact_gap))
    return spec


def _exclusions(spec: AttachmentSpec, x0, faces, edges, vertex_offset, vertex_body, dhat: float) -> None:
    """Fill spec.excl_pt / excl_ee / excl_ef (module doc): the attached vertex's one-ring against the target's
    faces, edges and vertices within R of the anchor point."""
    N, F, E = x0.shape[0], len(faces), len(edges)
    v = spec.verts.astype(np.int64)
    anchor = (spec.bary[:, :, None] * x0[spec.tris]).sum(1)
    # the vertex's reach: its longest incident edge
    el = np.linalg.norm(x0[edges[:, 0]] - x0[edges[:, 1]], axis=1) if E else np.zeros(0)
    reach = np.zeros(N)
    if E:
        np.maximum.at(reach, edges[:, 0], el)
        np.maximum.at(reach, edges[:, 1], el)
    foff = vertex_offset[faces].max(1) if F else np.zeros(0)
    radius = reach[v] + np.abs(spec.height) + vertex_offset[v] + (foff.max() if F else 0.0) + dhat
    # target faces near each anchor, restricted to the target body
    tb = vertex_body[spec.tris[:, 0]]
    cand = np.nonzero(np.isin(vertex_body[faces[:, 0]], np.unique(tb)))[0]   # the target bodies' faces only
    near = faces_within(anchor, radius, x0, np.ascontiguousarray(faces[cand]))
    near[:, 1] = cand[near[:, 1]]
    near = near[vertex_body[faces[near[:, 1], 0]] == tb[near[:, 0]]]
    a_idx, sf = near[:, 0], near[:, 1]
    # CSR: vertex -> incident faces, vertex -> incident edges; face -> its three edge ids
    fptr, forder = _csr(faces.reshape(-1).astype(np.int64), N)
    f_of = (forder // 3).astype(np.int64)
    eptr, eorder = _csr(edges.reshape(-1).astype(np.int64), N)
    e_of = (eorder // 2).astype(np.int64)
    ekey = np.minimum(edges[:, 0], edges[:, 1]).astype(np.int64) * N + np.maximum(edges[:, 0], edges[:, 1])
    korder = np.argsort(ekey)
    fe = np.sort(np.stack([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]], 1).astype(np.int64), axis=2)
    fkey = fe[:, :, 0] * N + fe[:, :, 1]
    pos = np.minimum(np.searchsorted(ekey[korder], fkey), max(E - 1, 0))
    face_edges = np.where(ekey[korder][pos] == fkey, korder[pos], -1) if E else np.full((F, 3), -1)
    # target vertices and edges near each anchor: (a, u), (a, e')
    a3 = np.repeat(a_idx, 3)
    su = faces[sf].reshape(-1).astype(np.int64)
    se = face_edges[sf].reshape(-1)
    ok = se >= 0
    a_e, se = a3[ok], se[ok]
    # one-ring of the attached vertex: faces Fv and edges Ev
    own = v  # attachment index -> its vertex
    pt = [own[a_idx] * F + sf]                                     # (v, f in Sf)
    i, g = _join(a3, own, fptr, f_of)                              # (u in Sv, g in Fv)
    pt.append(su[i] * F + g)
    i, e = _join(a_e, own, eptr, e_of)                             # (e in Ev, e' in Se)
    lo, hi = np.minimum(e, se[i]), np.maximum(e, se[i])
    ee = [lo * E + hi]
    i, e = _join(a_idx, own, eptr, e_of)                           # (e in Ev, f in Sf)
    ef = [e * F + sf[i]]
    i, g = _join(a_e, own, fptr, f_of)                             # (e' in Se, g in Fv)
    ef.append(se[i] * F + g)
    spec.excl_pt = np.unique(np.concatenate(pt)).astype(np.int64)
    spec.excl_ee = np.unique(np.concatenate(ee)).astype(np.int64)
    spec.excl_ef = np.unique(np.concatenate(ef)).astype(np.int64)
