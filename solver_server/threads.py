"""Thread-count policy for the numba kernels.

Every parallel region costs a fork/join; on a busy machine (other processes on the cores, as
on a render box running Blender or a CI runner) the join waits for a scheduler time slice of
the starved worker. Measured here (2 cores, load average ~4 from other jobs): the contact
kernels ran 2-10x *slower* with 2 threads than with 1 (a 2.4 ms energy pass took 36 ms, the
mesh step size 54 -> 133 ms). So kernels run on the calling thread unless the work is large
(>= PARALLEL_MIN_ITEMS items) and the machine has an idle core for the workers: the 1-minute load
average, less this process's own CPU use averaged the same way, leaves a core for each of our two
threads. (Counting our own threads as "others" made a long bake switch itself to one thread once
its own two threads had raised the load average: the 64^2 Fast drape ran at 2.6 s/frame after two
smaller drapes in the same process, 1.4 s/frame on its own.)
"""
import math
import os
import time
from contextlib import contextmanager
from typing import Optional

import numba

PARALLEL_MIN_ITEMS = 5000
# items of work (elements, vertices + edges, pairs) from which a kernel runs on numba's threads when the
# machine has an idle core: on an idle 2-core machine the 64^2 drape (4,225 vertices; every kernel between
# 5,000 and 20,000 items) took 197 ms per Newton iteration at 5,000 against 225 ms at 20,000 (the value
# before), the 24^2 drape 42 vs 43 ms (same iterations, same bytes: tests/server/test_determinism.py runs
# every kernel threaded)


LOAD_WINDOW = 60.0  # s, the time constant of the kernel's 1-minute load average
NOISE = 0.25        # cores of others' load still counted as idle (daemons, the shell, Blender waiting)


class OwnLoad:
    """This process's CPU use (cores, all threads) as an exponential average with the load average's
    1-minute time constant, so it can be taken out of the load average (which counts our threads)."""

    def __init__(self, clock=time.monotonic, cpu=time.process_time):
        self.clock, self.cpu = clock, cpu
        self.t = self.c = None
        self.rate = 0.0

    def __call__(self) -> float:
        t, c = self.clock(), self.cpu()
        if self.t is not None and t > self.t:
            a = math.exp(-(t - self.t) / LOAD_WINDOW)
            self.rate = a * self.rate + (1.0 - a) * (c - self.c) / (t - self.t)
        self.t, self.c = t, c
        return self.rate


_own_load = OwnLoad()


def others_load() -> float:
    """The 1-minute load average less this process's own share (cores), at least 0."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 0.0
    return max(0.0, load - _own_load())


def machine_has_idle_core(busy_others: float = 0.0) -> bool:
    """True when other processes leave a core for each of our two threads (their load at most
    cpu_count - 2, plus NOISE); with ``busy_others`` > 0 they may use up to that many cores' worth more."""
    return others_load() <= (os.cpu_count() or 1) - 2.0 + max(busy_others, NOISE)


@contextmanager
def threads_for(n_items: int, min_items: Optional[int] = None, busy_others: float = 0.0):
    """Run the enclosed kernels on numba's threads only for >= min_items items of work (default
    PARALLEL_MIN_ITEMS, read at each call) on a machine with an idle core (machine_has_idle_core),
    else on the calling thread."""
    if min_items is None:
        min_items = PARALLEL_MIN_ITEMS
    if n_items >= min_items and machine_has_idle_core(busy_others):
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)


@numba.njit(cache=True, fastmath=False)
def ordered_sum(a):
    """a[0] + a[1] + ... + a[-1] of a 1-d float array, left to right on the calling thread: the same bits
    whatever the thread count. Kernels compiled with parallel=True must total their per-element (or
    per-chunk) results with this, not a.sum(): numba turns an array reduction in a parallel kernel into
    a parallel one, with one partial sum per thread, so its rounding changes with numba's thread count
    (an energy's last bits, then the energy guard's velocity scale, then a whole bake). On one thread
    it adds in this order (the bits of a.sum() before)."""
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    return s
