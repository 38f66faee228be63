"""Paired per-frame runs of a rigid scene from stored start states (issue 19, docs/solver.md "The body step").

    NUMBA_NUM_THREADS=1 PYTHONPATH=. python scripts/pile_frames.py save KIND SIZE FRAMES DIR
    NUMBA_NUM_THREADS=1 PYTHONPATH=. python scripts/pile_frames.py solve KIND SIZE FRAMES DIR [--frames 3,4,5]
        [--set module.NAME=value ...] [--trace OUT.json]

save: bakes ``benchmarks.rigid_scenes`` KIND with SIZE bodies for FRAMES frames and stores the backend's state
(MeshBackend.get_state) before every frame in DIR. solve: solves each chosen frame from its stored start state
(set_state, then one advance) and prints its Newton iterations, CPU s (time.process_time) and unconverged steps, so
that a change is measured on the same start states as the base (the pile's landing is chaotic: a bake's frames
drift apart at round-off). --set overrides a module constant before the run (e.g.
solver_server.solvers.newton.integrator.BODY_STEP_MAX_VERTICES=100000). --trace records every Newton iteration's
residuals, CCD bounds and search path (diagnosis only; it changes no step).
"""
import sys, os, json, time, importlib
import numpy as np
from benchmarks import rigid_scenes as rs
from solver_server.backends.mesh_backend import MeshBackend


def _set(spec):
    lhs, val = spec.split("=", 1)
    mod, name = lhs.rsplit(".", 1)
    m = importlib.import_module(mod)
    v = eval(val, {"np": np, "inf": float("inf")})
    setattr(m, name, v)


def main():
    cmd, kind, size, frames, d = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    args = sys.argv[6:]
    sel = None
    trace = None
    i = 0
    while i < len(args):
        if args[i] == "--frames":
            sel = [int(s) for s in args[i + 1].split(",")]; i += 2
        elif args[i] == "--set":
            _set(args[i + 1]); i += 2
        elif args[i] == "--trace":
            trace = args[i + 1]; i += 2
        else:
            raise SystemExit(f"unknown argument {args[i]}")
    sc, _ = rs.make(kind, frames + 1, 1, size)
    b = MeshBackend(sc)
    if cmd == "save":
        os.makedirs(d, exist_ok=True)
        for k in range(1, frames + 1):
            np.savez(os.path.join(d, f"{kind}_{size}_f{k}.npz"), **b.get_state())
            t = time.process_time()
            r = b.advance()
            print(f"frame {k}: {time.process_time()-t:.2f} s its {r.stats['newton_iterations']} "
                  f"unconv {int(r.stats.get('unconverged_steps', 0))}", flush=True)
        return
    log = None
    if trace:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import newton_trace
        log = newton_trace.install()
    b.advance()   # the JIT compilation (frame 1), not timed
    tot_t, tot_i = 0.0, 0
    for k in sel or range(2, frames + 1):
        st = dict(np.load(os.path.join(d, f"{kind}_{size}_f{k}.npz")))
        b.set_state(st, int(st["frame"]))
        if log is not None:
            log.frame = k
        t = time.process_time()
        r = b.advance()
        dt = time.process_time() - t
        tot_t += dt; tot_i += r.stats["newton_iterations"]
        print(f"frame {k}: {dt:.2f} s its {r.stats['newton_iterations']} "
              f"unconv {int(r.stats.get('unconverged_steps', 0))}", flush=True)
        if log is not None:
            json.dump(log.recs, open(trace, "w"))
    print(f"total: {tot_t:.2f} s its {tot_i}", flush=True)
    from solver_server.solvers.newton import newton as N
    print("stats:", N.SLIP_STATS, flush=True)


if __name__ == "__main__":
    main()
