"""Visible progress while numba compiles the solver kernels (issue 10 item 2, issue 8 item 11, issue 20 item 11).

A cold first bake compiles tens of kernels for minutes. :class:`CompileProgress` listens to
numba's ``numba:compile`` event, which numba fires only for a real compilation (a kernel loaded
from the on-disk cache fires nothing), and reports each finished kernel of the solver:

    compiling solver kernels 12/~58: barrier.barrier_hessian (41 s)

Only Clearance's own kernels (functions of ``solver_server``) are counted and named. numba
also compiles its own helpers on the way (``arrayobj.impl``, ``linalg.impl``: 62% of the names
printed before issue 20, and they made the count run from ~254 to 379); their time is part of the
kernel that needed them, and they are never shown.

The total is the most kernels one job of this solver family (backend and solver quality) has
compiled on this machine, remembered in ``$CLEARANCE_STATE_DIR/compile_counts.json``. Before any
such job there is no total (``compiling solver kernels 12: ...``), and a count that runs past
the remembered one drops it rather than show 61/58.
"""
from __future__ import annotations

import json
import os
import time
from typing import Callable, Optional

from . import kernel_cache

EXPECTED: dict = {}
"""A total to show before this machine has compiled a family once: none is claimed (kernel counts
depend on the scene, so a shipped figure was wrong as often as right); see the module docstring."""
COUNTS_KEY = "own/{}"
"""Key of a family in compile_counts.json: own kernels only (older files counted numba's helpers too,
under the bare family name; those counts are ignored)."""
OWN_PACKAGE = "solver_server"
"""Kernels of this package are the solver's own; everything else numba compiles is its helpers."""

Report = Callable[[int, int, str, float], None]
"""report(done, expected, kernel name, seconds since the first compilation started)."""


def key_of(backend: str, solver_quality: str) -> str:
    """'ipc/fast', 'ipc/accurate', 'mpm', 'none': the solver family whose kernels are counted."""
    return f"{backend}/{solver_quality}" if backend == "ipc" else backend


def _counts_path() -> str:
    return os.path.join(kernel_cache.state_dir(), "compile_counts.json")


def expected_kernels(key: str) -> int:
    """The estimate for ``key``: the largest count of own kernels remembered on this machine, else
    EXPECTED's (none: 0, shown without a total)."""
    try:
        with open(_counts_path(), "r", encoding="utf-8") as f:
            seen = json.load(f)
        n = seen.get(COUNTS_KEY.format(key)) if isinstance(seen, dict) else None
        if isinstance(n, int) and n > 0:
            return n
    except (OSError, ValueError):
        pass
    return EXPECTED.get(key, 0)


def remember_count(key: str, n: int) -> None:
    """Keep ``n`` for ``key`` when it is the largest seen (a job finding part of the cache warm compiles
    fewer), as the next cold start's total (best effort; a read-only home is fine)."""
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
        if n <= int(seen.get(COUNTS_KEY.format(key), 0) or 0):
            return
        seen[COUNTS_KEY.format(key)] = n
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(seen, f)
        os.replace(tmp, path)
    except (OSError, ValueError, TypeError):
        pass


def message(done: int, expected: int, name: str, seconds: float) -> str:
    """The progress line: 'compiling solver kernels 12/~58: module.kernel (41 s)'."""
    count = f"{done}/~{expected}" if expected >= done else f"{done}"
    return f"compiling solver kernels {count}: {name} ({seconds:.0f} s)"


def is_own_kernel(dispatcher) -> bool:
    """True for a kernel of the solver (a function of ``solver_server``), False for numba's own
    helpers (``numba.np.arrayobj`` ...) compiled on the way."""
    func = getattr(dispatcher, "py_func", None)
    module = getattr(func, "__module__", "") or ""
    return module == OWN_PACKAGE or module.startswith(OWN_PACKAGE + ".")


def kernel_name(dispatcher) -> str:
    """'elastic_tet.dPdF_projected' (module's last part and function name) of a numba dispatcher."""
    func = getattr(dispatcher, "py_func", None)
    if func is None:
        return "kernel"
    module = (getattr(func, "__module__", "") or "").rsplit(".", 1)[-1]
    return f"{module}.{func.__name__}" if module else func.__name__


class CompileProgress:
    """Context manager: while active, ``report`` is called after every solver kernel numba compiles.

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
                dispatcher = (ev.data or {}).get("dispatcher")
                if not is_own_kernel(dispatcher):   # numba's helper: part of the kernel that needed it
                    return
                outer.done += 1
                outer.seconds = time.perf_counter() - (outer.t0 or time.perf_counter())
                name = kernel_name(dispatcher)
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
