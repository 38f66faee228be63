"""``clearance-server bake`` in a child process, with two test hooks set through the environment:

CLEARANCE_TEST_THREADS=parallel|serial forces the load-aware thread policy (solver_server/threads.py)
    one way: "parallel" runs every guarded kernel on numba's threads whatever the work size and the
    machine's load (as on an idle machine with a large scene), "serial" runs them on the calling thread
    (as on a busy machine). The thread count itself is NUMBA_NUM_THREADS. The MPM solver picks its
    kernels by particle count (solvers/mpm/solver.py PARALLEL_MIN_PARTICLES), not by load: "parallel"
    takes every MPM scene onto its threaded kernels, "serial" keeps every one on the single-threaded ones.
CLEARANCE_TEST_KILL_AFTER=K sends this process SIGKILL right after frame K's resume state is on disk,
    the way a crash or a kill -9 ends a bake (nothing else is flushed or cleaned up).

Usage: python tests/server/bake_child.py <bake arguments>
"""
import os
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

policy = os.environ.get("CLEARANCE_TEST_THREADS")
if policy:
    import solver_server.solvers.mpm.solver as mpm_solver
    import solver_server.threads as threads
    mpm_solver.PARALLEL_MIN_PARTICLES = 0 if policy == "parallel" else 1 << 62
    threads.machine_has_idle_core = lambda busy_others=0.0: policy == "parallel"
    if policy == "parallel":
        threads.PARALLEL_MIN_ITEMS = 0                      # no size threshold either
        import solver_server.backends.mesh_backend as mesh_backend
        import solver_server.solvers.block_descent.stepper as stepper
        mesh_backend.SMALL_PROBLEM = 0
        stepper.SWEEP_PARALLEL_MIN_VERTICES = 0

kill_after = os.environ.get("CLEARANCE_TEST_KILL_AFTER")
if kill_after:
    from solver_server.runtime.cache import JobCache
    write_state = JobCache.write_state

    def write_state_then_die(self, frame, state):
        write_state(self, frame, state)
        if frame == int(kill_after):
            os.kill(os.getpid(), signal.SIGKILL)

    JobCache.write_state = write_state_then_die

from solver_server.cli import main  # noqa: E402

sys.exit(main(["bake", *sys.argv[1:]]))
