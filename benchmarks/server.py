"""Server responsiveness figures (the timing that tests must not assert, issue 8 items 6 and 12).

Starts a real ``python -m solver_server serve`` on a free loopback port and measures:

* cancel latency: a job sleeping in a 60 s frame is cancelled; time from the ``cancel``
  request to its ``done`` (documented bound: 1 s);
* ping round trips of a second client while jobs end one after the other (the server used to
  block up to 2 s in ``join`` at every job end);
* submit-to-done of a 3-frame none-backend job (process spawn included).

Usage: ``python -m benchmarks server [jobs=10] [cancels=5]``: one table row per figure (median and max).
Nothing is asserted: the numbers depend on the machine.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from protocol import Client, Done, Frame, Progress
from tests.protocol.scenes import make_scene

from .report import Table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TITLE = "Server responsiveness: cancel latency, pings while jobs end, submit to done (none backend)"


def start_server() -> tuple:
    """A server subprocess on a free port: (Popen, address)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "solver_server", "serve", "--bind", "tcp://127.0.0.1:0"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, line.split()[-1]


def summary(table: Table, name: str, xs: list) -> None:
    """A row of ``table``: count, median and max of ``xs`` (seconds) in milliseconds."""
    table.add(name, len(xs), f"{1000 * statistics.median(xs):.1f}", f"{1000 * max(xs):.1f}")


def section(quick: bool = False, jobs: int = 10, cancels: int = 5) -> list:
    """``jobs`` short jobs run back to back, ``cancels`` cancels of a long frame (--quick: 3 and 2)."""
    n_jobs, n_cancels = (3, 2) if quick else (jobs, cancels)
    table = Table(["figure", "n", "median (ms)", "max (ms)"])
    proc, address = start_server()
    tmp = tempfile.mkdtemp(prefix="clearance_bench_server_")
    try:
        cancel_s = []
        with Client(address, timeout=10.0) as c:
            c.connect()
            for i in range(n_cancels):
                job = c.submit(make_scene(n_frames=4, debug_frame_delay=60.0), os.path.join(tmp, f"cancel{i}"))
                seen_frame = False
                for ev in c.events(job, timeout=60.0):   # the first frame, then "solving" the second
                    seen_frame = seen_frame or isinstance(ev, Frame)
                    if seen_frame and isinstance(ev, Progress) and ev.state == "solving":
                        break
                time.sleep(0.2)                              # now surely inside the 60 s frame
                t0 = time.perf_counter()
                c.cancel(job)
                for ev in c.events(job, timeout=30.0):
                    if isinstance(ev, Done):
                        break
                cancel_s.append(time.perf_counter() - t0)
        summary(table, "cancel mid-frame -> done", cancel_s)

        pings, stop = [], threading.Event()

        def pinger() -> None:
            with Client(address, timeout=10.0, client_name="pinger") as p:
                p.connect()
                while not stop.is_set():
                    pings.append(p.ping())
                    time.sleep(0.01)

        t = threading.Thread(target=pinger)
        t.start()
        done_s = []
        try:
            with Client(address, timeout=10.0) as c:
                c.connect()
                for i in range(n_jobs):
                    t0 = time.perf_counter()
                    job = c.submit(make_scene(n_frames=3), os.path.join(tmp, f"job{i}"))
                    for ev in c.events(job, timeout=60.0):
                        if isinstance(ev, Done):
                            break
                    done_s.append(time.perf_counter() - t0)
        finally:
            stop.set()
            t.join()
        summary(table, "3-frame none job, submit -> done", done_s)
        summary(table, "ping of another client while jobs end", pings)
    finally:
        proc.terminate()
        proc.wait(10)
    return ["A real `python -m solver_server serve` on a loopback port; none-backend jobs.", table]
