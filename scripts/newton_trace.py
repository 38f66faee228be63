"""A light per-iteration trace of Newton's search on affine-body scenes (diagnosis only; issue 19).

install() wraps stop_test.converged (one record per Newton iteration: step and force residuals), newton._bent_step
(the path taken and the fraction of the Newton step each body moved) and IncrementalPotential.max_step (every CCD
bound asked for). With PER_BODY, an iteration whose full bent step is not collision free also gets each body's own
smallest time of impact along that step (a swept broad phase and ACCD per candidate pair, body_step._tois): how many
bodies a per-body step bound would have cut. It changes no step taken.
"""
import numpy as np
from solver_server.integrators import stop_test
from solver_server.solvers.newton import newton as N
from solver_server.solvers.newton import integrator as I
from solver_server.solvers.newton import body_step as BS

import os
PER_BODY = os.environ.get("TRACE_PER_BODY", "1") == "1"


class Log:
    def __init__(self):
        self.recs = []
        self.frame = 0
        self.cur = None
        self.prev_p = None


def _groups(obj):
    vb = np.asarray(obj.contact.mesh.vertex_body, np.int64)
    g = -np.ones(obj.D.n_z, np.int64)
    g[:obj.nx] = vb
    for b in range(obj.ab.n):
        r = int(obj.ab.row0[b])
        g[r:r + 4] = vb[int(obj.ab.vertex_offset[b])]
    return g


def install():
    log = Log()
    conv0 = stop_test.converged
    bent0 = N._bent_step
    ms0 = I.IncrementalPotential.max_step

    def converged(res, res_g, tol):
        log.cur = {"frame": log.frame, "res": float(res), "res_g": float(res_g), "ccd": []}
        log.recs.append(log.cur)
        return conv0(res, res_g, tol)

    def max_step(self, x, p):
        a = ms0(self, x, p)
        if log.cur is not None:
            log.cur["ccd"].append(round(float(a), 5))
        return a

    def bent(obj, x, p, *args):
        rec = log.cur
        grp = _groups(obj)
        ng = int(obj.n_groups)
        mag = np.zeros(ng)
        np.maximum.at(mag, grp[grp >= 0], np.abs(p[grp >= 0]).max(axis=1))
        moving = (mag > 0) & ~obj.group_static
        if PER_BODY and rec is not None:
            q = obj.search_direction(x, p)
            c = obj.contact
            xs = np.ascontiguousarray(obj.D.to_x(x), np.float64)
            d0 = np.ascontiguousarray(obj.D.to_x(q), np.float64)
            cands = c.candidates_swept(xs, xs + d0, dhat=float(c.dhat))
            toi, touch, ga, gb, dist, near1 = BS._tois(obj, xs, d0, cands)
            bt = np.ones(ng)
            np.minimum.at(bt, ga, toi)
            np.minimum.at(bt, gb, toi)
            bt[~moving] = 1.0
            rec["ncut"] = int((bt < 1).sum())
            rec["cut_q"] = [round(float(v), 4) for v in np.sort(bt[bt < 1])[:8]]
            rec["nmoving"] = int(moving.sum())
            h = obj.h
            rec["above"] = int((mag[moving] / h > 0.01).sum())
            # bodies above tol and cut by their own toi
            rec["above_cut"] = int(((mag / h > 0.01) & (bt < 1) & moving).sum())
        if rec is not None:
            pv = p.ravel()
            if log.prev_p is not None and log.prev_p.shape == pv.shape:
                n0, n1 = np.linalg.norm(log.prev_p), np.linalg.norm(pv)
                if n0 > 0 and n1 > 0:
                    rec["cos"] = round(float(pv @ log.prev_p / (n0 * n1)), 4)
                    rec["ratio"] = round(float(n1 / n0), 4)
            log.prev_p = pv.copy()
        if rec is not None and rec["res"] < 0.01 <= rec["res_g"]:
            # the crawl: which DOF group holds the force residual, and its step
            free = obj.free_dofs
            g = obj.gradient(x)[free]
            dg = np.asarray(obj.dof_group, np.int64)
            md = obj.mass_dofs
            has = md > 0
            idx = np.nonzero(has)[0]
            key = dg[idx] * 3 + idx % 3
            f = np.bincount(key, weights=g[idx])
            mm = np.bincount(key, weights=md[idx])
            r = np.where(mm > 0, np.abs(f) / np.where(mm > 0, mm, 1.0), 0.0) / obj.h
            k = int(np.argmax(r))
            pf = p.ravel()[free]
            sel = idx[key == k]
            rec["crawl_key"] = k
            rec["crawl_r"] = round(float(r[k]), 4)
            rec["crawl_p"] = round(float(np.abs(pf[sel]).max() / obj.h), 6)
            rec["n_above"] = int((r > 0.01).sum())
        q = bent0(obj, x, p, *args)
        if rec is not None:
            rec["path"] = "bent" if q is not None else "ls"
            if q is not None:
                fr = np.zeros(ng)
                np.maximum.at(fr, grp[grp >= 0], np.abs(q[grp >= 0]).max(axis=1))
                big = moving & (mag / obj.h > 0.01)
                rec["taken_med"] = float(np.median(fr[big] / mag[big])) if big.any() else 1.0
        return q

    stop_test.converged = converged
    N._bent_step = bent
    I.IncrementalPotential.max_step = max_step
    return log
