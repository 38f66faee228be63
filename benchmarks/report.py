"""The one table format of the benchmarks, the machine line and the report's composition."""
from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Sequence


@dataclass
class Table:
    """A markdown table: ``headers``, ``rows`` (cells: str, or numbers shown with ``str``), ``numeric``
    columns right-aligned (default: every column whose cells in all rows are numbers or look like them)."""

    headers: Sequence[str]
    rows: list = field(default_factory=list)
    numeric: Sequence[bool] = ()

    def add(self, *cells) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"{len(cells)} cells for {len(self.headers)} columns: {cells}")
        self.rows.append(tuple(cells))

    def markdown(self) -> str:
        right = list(self.numeric) or [bool(self.rows) and all(_looks_numeric(r[i]) for r in self.rows)
                                       for i in range(len(self.headers))]
        lines = ["| " + " | ".join(self.headers) + " |",
                 "| " + " | ".join("---:" if r else "---" for r in right) + " |"]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)


def _looks_numeric(cell) -> bool:
    if isinstance(cell, (int, float)):
        return True
    s = str(cell).strip().replace(",", "").rstrip("x%").strip()
    if s in ("-", ""):
        return True
    try:
        float(s)
        return True
    except ValueError:
        return False


def render(parts: Sequence) -> str:
    """A section's markdown: its paragraphs and tables separated by blank lines."""
    out = []
    for p in parts:
        text = p.markdown() if isinstance(p, Table) else str(p).strip("\n")
        if text:
            out.append(text)
    return "\n\n".join(out)


def log(area: str, msg: str) -> None:
    """Progress on stderr (the section goes to stdout)."""
    print(f"[{area} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine() -> str:
    """One line describing the CPU, core count, memory and Python/numba versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    try:
        import numba
        nb = f", numba {numba.__version__}"
    except ImportError:
        nb = ""
    return f"{cpu}, {os.cpu_count()} cores{mem}, Python {platform.python_version()}{nb}, {platform.system()} {platform.release()}"
