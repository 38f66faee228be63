"""Per-iteration trace of the Newton solves of a rigid pile (issue 19, docs/solver.md "The body step", item 12).

    NUMBA_NUM_THREADS=1 PYTHONPATH=. python scripts/trace_pile_newton.py KIND SIZE FRAMES OUT.json [--nobody]

Bakes ``benchmarks.rigid_scenes`` KIND (pile100, pile100_hull, pile, ...) with SIZE bodies for FRAMES frames through
a copy of Newton's loop (solvers/newton/newton.py projected_newton, same steps, same iteration counts) that records
for every iteration: the step residual and the per-body force residual (m/s, integrators/stop_test.py), the bodies
with the largest Newton step and how many are above the tolerance, the active pairs (within dhat, from a fresh broad
phase) and how many entered / left since the last iterate, the friction pairs sticking / in the majorizer's zone
(eps <= y < 10 eps) / sliding and how many changed zone, the pairs whose slip the full step would turn to another
branch (friction.slip_reversals), the per-island search's counters (body_step.STATS), every CCD bound asked for and
the fraction of its Newton step each top body took. --nobody: the uniform search (no per-island step), as on the
1,016-vertex Mesh cubes. A diagnosis tool only: it reads the solver, it changes nothing. Summaries: an iteration
with step residual < tol but force residual >= tol is the tail's crawl (item 12).
"""
import sys, json, time, math
import numpy as np
from benchmarks import rigid_scenes as rs
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.integrators import stop_test
from solver_server.solvers.newton import body_step as BS
from solver_server.solvers.newton import integrator as I
from solver_server.solvers.newton import newton as N
from solver_server.contact.pairs import pair_set, contact_distances
from solver_server.contact.friction import tangent_displacement
from solver_server.contact.terms import EPS_V

LOG = []
ST = {"frame": 0, "calls": []}

orig_ms = I.IncrementalPotential.max_step
def max_step(self, x, p):
    a = orig_ms(self, x, p)
    ST["calls"].append(("ccd", float(a)))
    return a
I.IncrementalPotential.max_step = max_step

def active_set(obj, x):
    xs = np.ascontiguousarray(obj.D.to_x(x), np.float64)
    c = obj.contact
    cands = c.candidates(xs)
    ps = pair_set(cands, c.mesh, xs)
    if len(ps) == 0:
        return set(), {}
    s = contact_distances(xs, ps.ids, ps.is_ee, ps.off)
    vb = np.asarray(c.mesh.vertex_body)
    act = s < c.dhat
    keys = set()
    bp = {}
    for k in np.nonzero(act)[0]:
        ids = tuple(int(v) for v in ps.ids[k])
        keys.add((bool(ps.is_ee[k]),) + ids)
        a = int(vb[ids[0]]); b = int(vb[ids[2]] if ps.is_ee[k] else vb[ids[1]])
        bp[(min(a, b), max(a, b))] = min(bp.get((min(a, b), max(a, b)), 9), float(s[k] / c.dhat))
    return keys, bp

def fric_state(obj, x):
    c = obj.contact
    fs = c.fs
    if fs is None:
        return None
    xs = np.ascontiguousarray(obj.D.to_x(x), np.float64)
    xp = np.ascontiguousarray(c.x_prev, np.float64)
    eps = EPS_V * obj.h
    y = np.empty(len(fs)); u = np.empty((len(fs), 2))
    for k in range(len(fs)):
        u0, u1 = tangent_displacement(xs, xp, fs.ids, fs.coef, fs.T, k)
        u[k] = (u0, u1)
    y = np.hypot(u[:, 0], u[:, 1]) / eps
    return y, u

def traced_newton(obj, x, h, tol, max_iter, linear_solver="direct"):
    from solver_server.solvers.newton.linear_solve import LinearSolver
    solver = linear_solver if isinstance(linear_solver, LinearSolver) else LinearSolver(linear_solver)
    x = x.copy()
    free = obj.free_dofs
    grp = obj.step_groups
    if grp is None:
        vb = np.asarray(obj.contact.mesh.vertex_body, np.int64)
        grp = -np.ones(obj.D.n_z, np.int64); grp[:obj.nx] = vb
        for b in range(obj.ab.n):
            r = int(obj.ab.row0[b]); grp[r:r + 4] = vb[int(obj.ab.vertex_offset[b])]
    prev_act, prev_bp, prev_y = None, None, None
    for it in range(1, max_iter + 1):
        obj.prepare(x)
        g = obj.gradient(x)[free]
        H = obj.hessian(x)
        pf = solver.solve(H, -g)
        p = np.zeros(x.size); p[free] = pf; p = p.reshape(-1, 3)
        res = stop_test.step_residual(pf, h)
        res_g = stop_test.net_force_residual(g, obj.mass_dofs, obj.dof_group, h)
        rec = {"frame": ST["frame"], "it": it, "res": res, "res_g": res_g}
        bm = np.zeros(int(grp.max()) + 1)
        np.maximum.at(bm, grp[grp >= 0], np.abs(p[grp >= 0]).max(axis=1) / h)
        rec["nabove"] = int((bm > tol).sum())
        rec["top"] = [(int(b), round(float(bm[b]), 4)) for b in np.argsort(-bm, kind="stable")[:4]]
        # body net force residual per body
        act, bp = active_set(obj, x)
        rec["nact"] = len(act)
        if prev_act is not None:
            rec["enter"] = len(act - prev_act); rec["leave"] = len(prev_act - act)
            rec["bp_enter"] = sorted(set(bp) - set(prev_bp))[:6]; rec["bp_leave"] = sorted(set(prev_bp) - set(bp))[:6]
        prev_act, prev_bp = act, bp
        fy = fric_state(obj, x)
        if fy is not None:
            y, u = fy
            rec["fr"] = [int((y < 1).sum()), int(((y >= 1) & (y < 10)).sum()), int((y >= 10).sum())]
            if prev_y is not None:
                rec["fr_change"] = int(((y < 1) != (prev_y < 1)).sum() + ((y < 10) != (prev_y < 10)).sum())
            prev_y = y
            # predicted: full-step branch changes
            rec["fr_rev"] = int(obj.slip_reversals(x, p))
        if stop_test.converged(res, res_g, tol):
            rec["path"] = "conv"
            LOG.append(rec)
            if obj.max_step(x, p) >= 1.0:
                E = obj.line_search_energy(x, x + p); xn = x + p
                if obj.valid(xn) and E(xn) <= E(x):
                    x = xn
            return N.NewtonResult(x, it, True, res, 0, res_g, 0)
        ST["calls"] = []
        s0 = dict(BS.STATS)
        q = N._bent_step(obj, x, p)
        rec["bs"] = {k: BS.STATS[k] - s0[k] for k in s0 if BS.STATS[k] != s0[k]}
        calls = list(ST["calls"])
        if q is not None:
            dx = q; rec["path"] = "bent"
        else:
            ST["calls"] = []
            xn = N._backtrack(obj, x, p, 1e-12)
            if xn is None:
                rec["path"] = "fail"; LOG.append(rec)
                return N.NewtonResult(x, it, False, res, 1, res_g, 0)
            dx = xn - x
            rec["path"] = "ls"
            calls += ST["calls"]
        rec["ccd"] = [round(c[1], 4) for c in calls]
        # taken fraction per top body, and overall alpha (max over bodies of taken / step)
        tk = []
        for b, _ in rec["top"]:
            m = grp == b
            pm = np.abs(p[m]).max()
            tk.append(round(float(np.abs(dx[m]).max() / max(pm, 1e-300)), 4))
        rec["taken"] = tk
        x = x + dx
        obj.accepted(x)
        LOG.append(rec)
    return N.NewtonResult(x, max_iter, False, res, 0, res_g, 0)

def main() -> None:
    kind, size, frames, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if "--nobody" in sys.argv:
        I.BODY_STEP_MAX_VERTICES = 0
    I.projected_newton = traced_newton
    sc, _ = rs.make(kind, frames + 1, 1, size)
    b = MeshBackend(sc)
    for k in range(frames):
        ST["frame"] = k + 1
        t = time.process_time()
        r = b.advance()
        print(f"frame {k+1}: {time.process_time()-t:.2f} CPU s, {r.stats['newton_iterations']} it, {int(r.stats.get('unconverged_steps',0))} unconv", flush=True)
        json.dump(LOG, open(out, "w"))


if __name__ == "__main__":
    main()
