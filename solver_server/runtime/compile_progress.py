"""Visible progress while numba compiles the solver kernels (issue 10 item 2, issue 8 item 11).

A cold first bake compiles tens of kernels for minutes. :class:`CompileProgress` listens to
numba's ``numba:compile`` event, which numba fires only for a real compilation (a kernel loaded
from the on-disk cache fires nothing), and reports each finished kernel:

    compiling solver kernels 12/~254: barrier.barrier_hessian (41 s)

The total is an estimate: the most kernels one job of this backend (and solver quality) has
compiled on this machine, remembered in ``$CLEARANCE_STATE_DIR/compile_counts.json``, or the
figure measured for this release (:data:`EXPECTED`) before any. Which kernels a bake needs
depends on the scene, so the count may end below or run past it; past it the message drops the
total rather than show 61/58.
"""
from __future__ import annotations

import json
import os
import time
from typing import Callable, Optional

from . import kernel_cache

EXPECTED = {"ipc/fast": 254, "ipc/accurate": 277, "none": 0}
"""Kernels (numba's own helpers included) a cold 3-frame IPC bake of a box landing on a floor
compiled, measured on this release (docs/benchmarks.md, "Cold and warm start"). MPM is not
measured yet: its first cold bake shows the count without a total, later ones the count remembered."""

Report = Callable[[int, int, str, float], None]
"""report(done, expected, kernel name, seconds since the first compilation started)."""


def key_of(backend: str, solver_quality: str) -> str:
    """'ipc/fast', 'ipc/accurate', 'mpm', 'none': the solver family whose kernels are counted."""
    return f"{backend}/{solver_quality}" if backend == "ipc" else backend


def _counts_path() -> str:
    return os.path.join(kernel_cache.state_dir(), "compile_counts.json")


def expected_kernels(key: str) -> int:
    """The estimate for ``key``: the largest count remembered on this machine, else EXPECTED."""
    try:
        with open(_counts_path(), "r", encoding="utf-8") as f:
            seen = json.load(f)
        n = seen.get(key) if isinstance(seen, dict) else None
        if isinstance(n, int) and n > 0:
            return n
    except (OSError, ValueError):
        pass
    return EXPECTED.get(key, 0)


def remember_count(key: str, n: int) -> None:
    """Keep ``n`` for ``key`` when it is the largest seen (best effort; a read-only home is fine)."""
    if n <= 0:
        return
    path = _counts_path()
    try:
        try:
            with open(path, "r", encoding="utf-8") as f:
                seen = json.load(f)
            seen = seen if isinstance(seen, dict) else {}
        except (OSError, ValueError):
            seen = {}
        if n <= int(seen.get(key, 0) or 0):
            return
        seen[key] = n
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(seen, f)
        os.replace(tmp, path)
    except (OSError, ValueError, TypeError):
        pass


def message(done: int, expected: int, name: str, seconds: float) -> str:
    """The progress line: 'compiling solver kernels 12/~254: module.kernel (41 s)'."""
    count = f"{done}/~{expected}" if expected >= done else f"{done}"
    return f"compiling solver kernels {count}: {name} ({seconds:.0f} s)"


def kernel_name(dispatcher) -> str:
    """'elastic_tet.dPdF_projected' (module's last part and function name) of a numba dispatcher;
    numba's own helpers compiled on the way read like 'linalg.impl'."""
    func = getattr(dispatcher, "py_func", None)
    if func is None:
        return "kernel"
    module = (getattr(func, "__module__", "") or "").rsplit(".", 1)[-1]
    return f"{module}.{func.__name__}" if module else func.__name__


class CompileProgress:
    """Context manager: while active, ``report`` is called after every kernel numba compiles.

    ``key`` names the solver family (:func:`key_of`) for the estimated total; on exit the count is
    remembered for the next cold start. ``done`` and ``seconds`` are readable afterwards."""

    def __init__(self, report: Report, key: str, expected: Optional[int] = None):
        self.report = report
        self.key = key
        self.expected = expected_kernels(key) if expected is None else expected
        self.done = 0
        self.t0: Optional[float] = None
        self.seconds = 0.0
        self._listener = None

    def __enter__(self) -> "CompileProgress":
        from numba.core import event

        outer = self

        class _Listener(event.Listener):
            def on_start(self, ev) -> None:
                if outer.t0 is None:
                    outer.t0 = time.perf_counter()

            def on_end(self, ev) -> None:
                outer.done += 1
                outer.seconds = time.perf_counter() - (outer.t0 or time.perf_counter())
                name = kernel_name((ev.data or {}).get("dispatcher"))
                try:
                    outer.report(outer.done, outer.expected, name, outer.seconds)
                except Exception:   # a closed pipe must not break numba's compilation
                    pass

        self._listener = _Listener()
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event
        if self._listener is not None:
            event.unregister("numba:compile", self._listener)
            self._listener = None
        if exc[0] is None:
            remember_count(self.key, self.done)
