"""Per-iteration trace of the Newton solves of the rigid bin (issue 19): where the iterations of a landing frame go.

    NUMBA_NUM_THREADS=1 PYTHONPATH=. python scripts/trace_bin_newton.py N FRAMES OUT.json [--terms F1,F2] [--watch B1,B2]

Bakes ``benchmarks.rigid_scenes`` "bin" with N props for FRAMES frames through a copy of Newton's loop
(solvers/newton/newton.py projected_newton, same steps) that records for every iteration: the step residual and
the per-body force residual (m/s, integrators/stop_test.py), the objective, the four bodies with the largest Newton
step (|p|_inf / h per body, m/s) and the fraction of it they took, how many bodies still step more than 0.01 / 0.1 /
0.5 m/s, the per-island search's counters (body_step.STATS), and from body_step.TRACE the taken island's factor and
its limiting pair (bodies, time of impact, contact distance). --watch: the same per-iteration record (factor, step,
closest pair and its distance, touching pairs, the pair of least time of impact) for the listed bodies.
--terms: on the listed frames, every 10th iteration (5, 15, ...), the energy change by term (affine bodies' inertia +
gravity + orthogonality, barrier, friction; J) along the largest-step body's own Newton step and bent step, at 1, 1/2,
... 1/64 of it. A diagnosis tool only: it reads the solver, it changes nothing.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from benchmarks import rigid_scenes as rs
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.integrators import stop_test
from solver_server.solvers.newton import body_step as BS
from solver_server.solvers.newton import integrator as I
from solver_server.solvers.newton import newton as N

LOG: list = []
STATE = {"frame": 0, "trace": None, "watch": (), "terms": ()}


def _terms(obj, z, cands) -> dict:
    h2 = obj.h ** 2
    xs = obj.D.to_x(z)
    return {"body": obj.ab.energy(z, obj.x_tilde, obj.g, h2), "bar": h2 * obj.contact.energy(xs, cands),
            "fric": h2 * obj.contact.friction_energy(xs, obj.h)}


def _decompose(obj, x, p, grp, rec) -> None:
    bm = np.zeros(int(grp.max()) + 1)
    np.maximum.at(bm, grp[grp >= 0], np.abs(p[grp >= 0]).max(axis=1))
    b = int(np.argmax(bm))
    pb = np.where((grp == b)[:, None], p, 0.0)
    rec["b"] = b
    rec["slope"] = float(obj.gradient(x) @ pb.ravel())
    out = []
    for f in (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625):
        for name, s in (("p", f * pb), ("q", obj.search_direction(x, f * pb))):
            cands = obj.contact.candidates_swept(obj.D.to_x(x), obj.D.to_x(x + s))
            t0, t1 = _terms(obj, x, cands), _terms(obj, x + s, cands)
            out.append((name, f, float(obj.max_step(x, s)), {k: float(t1[k] - t0[k]) for k in t0}))
    rec["terms"] = out


def _trace(ev, factor, moving, parent, obj, x, p, pair0) -> None:
    toi, touch, ga, gb, dist = pair0
    grp = obj.step_groups
    bm = np.zeros(obj.n_groups)
    np.maximum.at(bm, grp[grp >= 0], np.abs(p[grp >= 0]).max(axis=1))
    b = int(np.argmax(bm))
    roots = np.array([BS._find(parent, g) for g in range(obj.n_groups)])
    isl = roots == roots[b]
    d = {"ev": ev, "b": b, "factor": float(factor[b]), "island": int(isl.sum())}
    ini = isl[ga] | isl[gb]
    if ini.any():
        k = np.nonzero(ini)[0][np.argmin(toi[ini])]
        d["island_min"] = (int(ga[k]), int(gb[k]), float(toi[k]), float(dist[k]), bool(touch[k]))
    watch = {}
    for w in STATE["watch"]:
        ks = np.nonzero((ga == w) | (gb == w))[0]
        if ks.size:
            k, k2 = ks[np.argmin(dist[ks])], ks[np.argmin(toi[ks])]
            watch[w] = (float(factor[w]), float(bm[w]) / obj.h, int(ga[k]), int(gb[k]), float(dist[k]),
                        int(touch[ks].sum()), int(ga[k2]), int(gb[k2]), float(toi[k2]), float(dist[k2]))
    d["watch"] = watch
    STATE["trace"] = d


def traced_newton(obj, x, h, tol, max_iter, linear_solver="direct"):
    """newton.projected_newton's loop (same steps, local refinement left out: off for affine bodies), recording."""
    from solver_server.solvers.newton.linear_solve import LinearSolver
    solver = linear_solver if isinstance(linear_solver, LinearSolver) else LinearSolver(linear_solver)
    x = x.copy()
    free = obj.free_dofs
    grp = obj.step_groups
    res = res_g = np.inf
    for it in range(1, max_iter + 1):
        obj.prepare(x)
        g = obj.gradient(x)[free]
        H = obj.hessian(x)
        pf = solver.solve(H, -g)
        p = np.zeros(x.size)
        p[free] = pf
        p = p.reshape(-1, 3)
        if getattr(obj, "exact_friction", False) and obj.slip_reversals(x, p) > 0:
            obj.exact_friction = False
            H = obj.hessian(x)
            obj.exact_friction = True
            pf = solver.solve(H, -g)
            p = np.zeros(x.size)
            p[free] = pf
            p = p.reshape(-1, 3)
        res = stop_test.step_residual(pf, h)
        res_g = stop_test.net_force_residual(g, obj.mass_dofs, getattr(obj, "dof_group", None), h)
        if N.EXACT_TAIL and res < tol and hasattr(obj, "exact_friction"):
            obj.exact_friction = True
        rec = {"frame": STATE["frame"], "it": it, "res": res, "res_g": res_g, "E": obj._energy(x, obj.cands)}
        top = []
        if grp is not None:
            bm = np.zeros(int(grp.max()) + 1)
            np.maximum.at(bm, grp[grp >= 0], np.abs(p[grp >= 0]).max(axis=1) / h)
            top = [(int(b), float(bm[b])) for b in np.argsort(-bm, kind="stable")[:4]]
            rec.update(n01=int((bm > 0.01).sum()), n1=int((bm > 0.1).sum()), n5=int((bm > 0.5).sum()))
        rec["top"] = top
        if stop_test.converged(res, res_g, tol):
            rec["path"] = "converged"
            LOG.append(rec)
            if obj.max_step(x, p) >= 1.0:
                E = obj.line_search_energy(x, x + p)
                xn = x + p
                if obj.valid(xn) and E(xn) <= E(x):
                    x = xn
            return N.NewtonResult(x, it, True, res, 0, res_g, 0)
        if STATE["frame"] in STATE["terms"] and it % 10 == 5 and grp is not None:
            _decompose(obj, x, p, grp, rec)
        s0 = dict(BS.STATS)
        q = N._bent_step(obj, x, p)
        rec["search"] = {k: BS.STATS[k] - s0[k] for k in s0 if BS.STATS[k] != s0[k]}
        rec["island"], STATE["trace"] = STATE["trace"], None
        if q is not None:
            dx, rec["path"] = q, "bent"
        else:
            xn = N._backtrack(obj, x, p, 1e-12)
            if xn is None:
                rec["path"] = "fail"
                LOG.append(rec)
                return N.NewtonResult(x, it, False, res, 1, res_g, 0)
            dx, rec["path"] = xn - x, "line search"
        x = x + dx
        obj.accepted(x)
        rec["taken"] = [float(np.abs(dx[grp == b]).max() / max(np.abs(p[grp == b]).max(), 1e-300))
                        for b, _ in top] if grp is not None else []
        LOG.append(rec)
    return N.NewtonResult(x, max_iter, False, res, 0, res_g, 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("frames", type=int)
    ap.add_argument("out")
    ap.add_argument("--terms", default="")
    ap.add_argument("--watch", default="")
    a = ap.parse_args()
    STATE["terms"] = tuple(int(v) for v in a.terms.split(",") if v)
    STATE["watch"] = tuple(int(v) for v in a.watch.split(",") if v)
    I.projected_newton = traced_newton
    BS.TRACE = _trace
    sc, _ = rs.make("bin", a.frames, 1, a.n)
    b = MeshBackend(sc)
    for k in range(a.frames):
        STATE["frame"] = k + 1
        t = time.process_time()
        r = b.advance()
        print(f"frame {k + 1}: {time.process_time() - t:.2f} CPU s, {r.stats['newton_iterations']} it., "
              f"{int(r.stats.get('unconverged_steps', 0))} unconverged", flush=True)
        with open(a.out, "w") as f:
            json.dump(LOG, f)


if __name__ == "__main__":
    main()
