"""Thread-count policy for the numba kernels.

Every parallel region costs a fork/join; on a busy machine (other processes on the cores, as
on a render box running Blender or a CI runner) the join waits for a scheduler time slice of
the starved worker. Measured here (2 cores, load average ~4 from other jobs): the contact
kernels ran 2-10x *slower* with 2 threads than with 1 (a 2.4 ms energy pass took 36 ms, the
mesh step size 54 -> 133 ms). So kernels run on the calling thread unless the work is large
(>= PARALLEL_MIN_ITEMS items) and the machine has an idle core for the workers (1-minute load
average at most cpu_count - 1, our own busy thread included).
"""
import os
from contextlib import contextmanager

import numba

PARALLEL_MIN_ITEMS = 20000


def machine_has_idle_core(busy_others: float = 0.0) -> bool:
    """True when the 1-minute load average leaves at least one core free besides ours; with
    ``busy_others`` > 0, other processes may use up to that many cores' worth as well."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return True
    return load <= (os.cpu_count() or 1) - 1.0 + busy_others


@contextmanager
def threads_for(n_items: int, min_items: int = PARALLEL_MIN_ITEMS, busy_others: float = 0.0):
    """Run the enclosed kernels on numba's threads only for >= min_items items of work on a machine
    with an idle core (machine_has_idle_core), else on the calling thread."""
    if n_items >= min_items and machine_has_idle_core(busy_others):
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)
