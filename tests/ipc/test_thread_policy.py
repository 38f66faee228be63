"""The numba thread policy (solver_server/threads.py) takes this process's own CPU use out of the load
average, so a bake's own threads do not make it fall back to one thread."""
import math

from solver_server import threads


def test_own_load_tracks_a_steady_cpu_rate_with_the_load_average_time_constant():
    t = [0.0]
    c = [0.0]
    own = threads.OwnLoad(clock=lambda: t[0], cpu=lambda: c[0])
    assert own() == 0.0                       # nothing known yet
    for _ in range(600):                      # 10 minutes at two busy cores, sampled every second
        t[0] += 1.0
        c[0] += 2.0
        r = own()
    assert abs(r - 2.0) < 1e-3
    # one minute idle: the average falls by e, as the kernel's load average does
    t[0] += 60.0
    assert abs(own() - r * math.exp(-1.0)) < 1e-12


def test_our_own_threads_do_not_count_as_others(monkeypatch):
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (2.0, 2.0, 2.0))
    monkeypatch.setattr(threads, "_own_load", lambda: 1.9)      # we are the load
    assert threads.machine_has_idle_core(0.5)
    monkeypatch.setattr(threads, "_own_load", lambda: 0.0)      # someone else is
    assert not threads.machine_has_idle_core(0.5)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (0.2, 0.2, 0.2))   # background noise only
    assert threads.machine_has_idle_core(0.0)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1.0, 1.0, 1.0))   # another busy process
    assert not threads.machine_has_idle_core(0.0)
