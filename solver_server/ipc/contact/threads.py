"""Thread-count policy for the numba kernels.

Every parallel region costs a fork/join; on a busy machine (other processes on the cores, as
on a render box running Blender or a CI runner) the join waits for a scheduler time slice,
measured at ~10 ms per region here, far more than small contact problems take serially.
Work below PARALLEL_MIN_ITEMS items therefore runs on the calling thread only.
"""
from contextlib import contextmanager

import numba

PARALLEL_MIN_ITEMS = 20000


@contextmanager
def threads_for(n_items: int):
    if n_items >= PARALLEL_MIN_ITEMS:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)
