"""Clearance's benchmarks, one module per area, run by one command:

    python -m benchmarks                      # every area, full sizes; writes docs/bench/<area>.md, docs/benchmarks.md
    python -m benchmarks --quick              # smaller sizes, minutes instead of tens of minutes
    python -m benchmarks protocol mpm         # only these areas (the others keep their last results)
    python -m benchmarks abd cubes=8 div=4    # one area with its own settings (keyword arguments of its section())
    python -m benchmarks --compose-only       # only rewrite docs/benchmarks.md from docs/bench/*.md

Each area module measures Clearance against a peer in the same run (a memory copy, IPC Toolkit,
Blender's cloth or rigid bodies, Taichi, the other solver quality) and exposes

    TITLE: str                                  the section's heading
    section(quick=False, **settings) -> list    the section: paragraphs (str) and tables (report.Table)

so there is one argument parser (benchmarks/__main__.py) and one table format (report.Table).
Progress goes to stderr; the driver runs each area in a process of its own.
"""

AREAS = ("protocol", "kernels", "ipc", "mpm", "fast", "accurate", "coldstart", "abd", "tet10", "server", "suite")
"""Every area, in the order of docs/benchmarks.md."""
