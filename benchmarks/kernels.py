"""Throughput of the contact kernels against IPC Toolkit (ipctk) on the same pairs.

Scene: two wavy cloth sheets (n x n vertices each) a few millimetres apart, the upper one
moving down and sideways. Measured, in queries (pairs) per second or wall time:
  * point-triangle / edge-edge squared distances: our batched numba kernel vs ipctk's Python API
    called per pair;
  * additive CCD per pair: ours (batched) vs ipctk.AdditiveCCD per pair;
  * mesh-level collision-free step size (broad + narrow phase): ours vs
    ipctk.compute_collision_free_stepsize (AdditiveCCD and TightInclusion);
  * barrier potential: candidate build + energy + gradient + PSD-projected Hessian assembled as a scipy
    sparse matrix (ipctk returns one), ours vs ipctk.BarrierPotential on NormalCollisions.
Timings are the best of a few repeats after a warm-up (numba compilation excluded).
Usage: python -m benchmarks kernels [n=40]   (--quick: n = 24)
"""
from __future__ import annotations

import os
import platform
import time

import numpy as np

from solver_server.contact import (CollisionMesh, edges_from_faces, find_candidates, find_candidates_ccd,
                                       point_triangle_dist2_batch, edge_edge_dist2_batch, point_triangle_ccd_batch,
                                       edge_edge_ccd_batch, max_step_size, barrier_energy, barrier_gradient,
                                       barrier_hessian, barrier_derivatives, count_active)
from solver_server.threads import machine_has_idle_core

from .report import Table

TITLE = "Contact kernels: distances, CCD and barrier vs IPC Toolkit (ipctk)"


def _sheets(n: int, gap: float = 0.004):
    u = np.linspace(0, 1, n)
    P = np.array([[a, b, 0.0] for b in u for a in u])
    P[:, 2] = 0.003 * np.sin(9 * P[:, 0]) * np.cos(7 * P[:, 1])
    f = []
    for j in range(n - 1):
        for i in range(n - 1):
            v = n * j + i
            f += [[v, v + 1, v + n + 1], [v, v + n + 1, v + n]]
    f = np.array(f, np.int32)
    Q = P + [0.0131, 0.0177, gap]
    x = np.vstack([P, Q])
    faces = np.vstack([f, f + n * n])
    return x, faces, n * n


def _best(fn, repeat=3):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _machine() -> str:
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import numba
    return (f"{model}, {os.cpu_count()} logical CPUs, numba {numba.__version__} with "
            f"{numba.get_num_threads()} threads (kernels serial: {'no' if machine_has_idle_core() else 'yes'}, "
            f"load average {os.getloadavg()[0]:.1f}), Python {platform.python_version()}")


def run(n: int = 40, max_ipctk_pairs: int = 20000) -> dict:
    """Run the benchmark; returns a dict of measured figures (queries/s and seconds)."""
    import ipctk
    x, faces, nv = _sheets(n)
    edges = edges_from_faces(faces)
    mesh = CollisionMesh.build(x.shape[0], faces, edges, vertex_body=np.repeat([0, 1], nv), rest_positions=x)
    dhat = 0.01
    p = np.zeros_like(x)
    p[nv:] = [0.02, -0.01, -0.012]
    res = {"machine": _machine(), "n_verts": int(x.shape[0]), "n_faces": int(faces.shape[0]),
           "n_edges": int(edges.shape[0])}

    # candidate pairs, shared by both libraries
    c = find_candidates_ccd(x, x + p, mesh, dhat)
    res["pt_pairs"], res["ee_pairs"] = int(c.pt.shape[0]), int(c.ee.shape[0])
    PT0 = np.concatenate([x[c.pt[:, 0]], x[faces[c.pt[:, 1]]].reshape(-1, 9)], axis=1)
    PT1 = np.concatenate([(x + p)[c.pt[:, 0]], (x + p)[faces[c.pt[:, 1]]].reshape(-1, 9)], axis=1)
    EE0 = np.concatenate([x[edges[c.ee[:, 0]]].reshape(-1, 6), x[edges[c.ee[:, 1]]].reshape(-1, 6)], axis=1)
    EE1 = np.concatenate([(x + p)[edges[c.ee[:, 0]]].reshape(-1, 6), (x + p)[edges[c.ee[:, 1]]].reshape(-1, 6)],
                         axis=1)

    def split(X):
        return [np.ascontiguousarray(X[:, 3 * i:3 * i + 3]) for i in range(4)]

    rows = []
    for name, X0, X1, dist, ccd, idist, iccd in (
            ("point-triangle", PT0, PT1, point_triangle_dist2_batch, point_triangle_ccd_batch,
             ipctk.point_triangle_distance, "point_triangle_ccd"),
            ("edge-edge", EE0, EE1, edge_edge_dist2_batch, edge_edge_ccd_batch,
             ipctk.edge_edge_distance, "edge_edge_ccd")):
        S = split(X0)
        dist(*[s[:10] for s in S])
        ccd(X0[:10], X1[:10])
        m = X0.shape[0]
        t_ours, _ = _best(lambda: dist(*S))
        k = min(m, max_ipctk_pairs)
        t_ipc, _ = _best(lambda: [idist(a[0:3], a[3:6], a[6:9], a[9:12]) for a in X0[:k]], repeat=2)
        rows.append((f"{name} distance", m / t_ours, k / t_ipc))
        t_ours, _ = _best(lambda: ccd(X0, X1))
        accd = ipctk.AdditiveCCD()
        f = getattr(accd, iccd)
        t_ipc, _ = _best(lambda: [f(a[0:3], a[3:6], a[6:9], a[9:12], b[0:3], b[3:6], b[6:9], b[9:12])
                                  for a, b in zip(X0[:k], X1[:k])], repeat=2)
        rows.append((f"{name} additive CCD", m / t_ours, k / t_ipc))
    res["per_pair"] = rows

    # mesh-level step size, broad phase included
    max_step_size(x, p, mesh, dhat)
    t_ours, a_ours = _best(lambda: max_step_size(x, p, mesh, dhat), repeat=5)
    imesh = ipctk.CollisionMesh(x, edges, faces)
    t_ia, a_ia = _best(lambda: ipctk.compute_collision_free_stepsize(imesh, x, x + p,
                                                                      narrow_phase_ccd=ipctk.AdditiveCCD()), repeat=5)
    t_it, a_it = _best(lambda: ipctk.compute_collision_free_stepsize(imesh, x, x + p), repeat=1)
    res["step_size"] = {"ours": (t_ours, a_ours), "ipctk_additive": (t_ia, a_ia), "ipctk_tight_inclusion": (t_it, a_it)}

    # barrier potential (energy + gradient + Hessian) on the active set at x
    cands = find_candidates(x, mesh, dhat)

    import scipy.sparse as sp
    n3 = x.size

    def ours_barrier():   # like ipctk: build, then energy, gradient and an assembled sparse Hessian
        c_ = find_candidates(x, mesh, dhat)
        barrier_energy(x, c_, mesh, dhat, 1.0)
        barrier_gradient(x, c_, mesh, dhat, 1.0)
        r, c, v = barrier_hessian(x, c_, mesh, dhat, 1.0)
        return sp.csr_matrix((v, (r, c)), shape=(n3, n3))

    def ours_fused():
        c_ = find_candidates(x, mesh, dhat)
        e, g, (r, c, v) = barrier_derivatives(x, c_, mesh, dhat, 1.0)
        return sp.csr_matrix((v, (r, c)), shape=(n3, n3))
    ours_barrier()
    ours_fused()
    res["active_pairs"] = int(count_active(x, cands, mesh, dhat))
    t_ob, _ = _best(ours_barrier, repeat=5)
    t_of, _ = _best(ours_fused, repeat=5)

    def ipc_barrier():
        col = ipctk.NormalCollisions()
        col.build(imesh, x, dhat)
        B = ipctk.BarrierPotential(dhat, 1.0)
        B(col, imesh, x)
        B.gradient(col, imesh, x)
        return B.hessian(col, imesh, x, ipctk.PSDProjectionMethod.CLAMP)   # ours projects too
    try:
        t_ib, _ = _best(ipc_barrier, repeat=5)
    except Exception as exc:  # API differences across ipctk versions
        t_ib = float("nan")
        res["ipctk_barrier_error"] = repr(exc)
    res["barrier"] = {"ours": t_ob, "ours_fused": t_of, "ipctk": t_ib}
    return res


def section(quick: bool = False, n: int = 0) -> list:
    res = run(n or (24 if quick else 40))
    per = Table(["kernel", "ours (queries/s)", "ipctk per pair (queries/s)", "ratio"])
    for name, qo, qi in res["per_pair"]:
        per.add(name, f"{qo:,.0f}", f"{qi:,.0f}", f"{qo / qi:.1f}x")
    mesh = Table(["mesh-level", "ours", "ipctk", "ratio"], numeric=[False, True, True, True])
    s = res["step_size"]
    for key, label in (("ipctk_additive", "step size vs ipctk AdditiveCCD"),
                       ("ipctk_tight_inclusion", "step size vs ipctk TightInclusion")):
        mesh.add(label, f"{s['ours'][0] * 1e3:.1f} ms (alpha {s['ours'][1]:.4f})",
                 f"{s[key][0] * 1e3:.1f} ms (alpha {s[key][1]:.4f})", f"{s[key][0] / s['ours'][0]:.1f}x")
    b = res["barrier"]
    mesh.add(f"barrier build + energy + gradient + PSD Hessian as CSR ({res['active_pairs']} active pairs)",
             f"{b['ours'] * 1e3:.1f} ms", f"{b['ipctk'] * 1e3:.1f} ms", f"{b['ipctk'] / b['ours']:.1f}x")
    mesh.add("same, fused barrier_derivatives", f"{b['ours_fused'] * 1e3:.1f} ms", f"{b['ipctk'] * 1e3:.1f} ms",
             f"{b['ipctk'] / b['ours_fused']:.1f}x")
    return [f"Machine: {res['machine']}\n"
            f"Scene: two wavy sheets, {res['n_verts']} vertices, {res['n_faces']} triangles, {res['n_edges']} edges; "
            f"CCD candidates: {res['pt_pairs']} point-triangle, {res['ee_pairs']} edge-edge", per, mesh]
