"""``python -m benchmarks [--quick] [areas] [name=value ...]``: run the benchmarks and write docs/benchmarks.md.

The chosen areas (default: all, :data:`benchmarks.AREAS`) run one after the other, each in a process
of its own (so one area's JIT warm-up or memory does not disturb another). Each area's latest
section is kept in docs/bench/<area>.md (with its date and machine) and docs/benchmarks.md is
composed from those files, so areas can be re-measured one at a time. ``name=value`` settings go to
the one area named as keyword arguments of its ``section()`` (lists comma-separated, booleans
yes/no), e.g. ``python -m benchmarks abd cubes=8 div=4 frames=12``.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import inspect
import os
import subprocess
import sys
import time

from . import AREAS
from .report import machine, render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _area(name: str):
    return importlib.import_module(f"benchmarks.{name}")


def _value(text: str, default):
    """``text`` as the type of ``default`` (a section() keyword's default)."""
    if isinstance(default, bool):
        if text.lower() in ("1", "yes", "true", "on"):
            return True
        if text.lower() in ("0", "no", "false", "off"):
            return False
        raise ValueError(f"expected yes or no, got {text!r}")
    if isinstance(default, (list, tuple)):
        items = [t for t in text.split(",") if t]
        try:
            return [int(t) for t in items]
        except ValueError:
            return items
    if isinstance(default, (int, float, str)):
        return type(default)(text)
    for kind in (int, float):   # default None: a number when it reads as one
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def settings(area: str, items: list) -> dict:
    """{keyword: value} of ``name=value`` items for ``area``'s section() (SystemExit on an unknown one)."""
    params = inspect.signature(_area(area).section).parameters
    out = {}
    for item in items:
        name, _, text = item.partition("=")
        name = name.replace("-", "_")
        if name not in params or name == "quick":
            known = ", ".join(p for p in params if p != "quick")
            raise SystemExit(f"python -m benchmarks: {area} has no setting {name!r}; its settings: {known}")
        try:
            out[name] = _value(text, params[name].default)
        except ValueError as e:
            raise SystemExit(f"python -m benchmarks: {area} {name}={text}: {e}")
    return out


def run_one(area: str, quick: bool, items: list) -> int:
    """In the area's own process: print its section (markdown) on stdout."""
    print(render(_area(area).section(quick=quick, **settings(area, items))), flush=True)
    return 0


def part_slug(items: list) -> str:
    """File-name part for a run's name=value settings ("sizes=128", "frames=24" -> "sizes-128_frames-24")."""
    return "_".join("".join(c if c.isalnum() else "-" for c in it) for it in items)


def compose(out: str, parts_dir: str) -> None:
    """docs/benchmarks.md from the areas' docs/bench/<area>.md."""
    sections = []
    for area in AREAS:
        part = os.path.join(parts_dir, f"{area}.md")
        if os.path.exists(part):
            with open(part) as f:
                sections.append(f.read().strip())
        else:
            sections.append(f"## {_area(area).TITLE}\n\nNot measured yet: `python -m benchmarks {area}`.")
        for extra in sorted(n for n in os.listdir(parts_dir) if n.startswith(f"{area}--") and n.endswith(".md")):
            with open(os.path.join(parts_dir, extra)) as f:     # runs with name=value settings
                sections.append(f.read().strip())
    head = (
        "# Benchmarks\n\n"
        "Written by `python -m benchmarks` (benchmarks/__init__.py); each area's section comes from\n"
        "docs/bench/<area>.md and states when and where it was measured. Every figure is measured with\n"
        "its peer in the same run on the same machine, so compare ratios within a section. Sections measured\n"
        "before the areas moved into benchmarks/ (issue 22; they were scripts/bench_<area>.py with --options)\n"
        "give their command in today's equivalent syntax.\n"
    )
    with open(out, "w") as f:
        f.write(head + "\n" + "\n\n".join(sections) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("areas", nargs="*", default=[],
                    help=f"areas to run (default: all of {', '.join(AREAS)}), then name=value settings for one area")
    ap.add_argument("--quick", action="store_true", help="smaller problem sizes")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--compose-only", action="store_true",
                    help="run nothing: rewrite the report from docs/bench/<area>.md (after editing one by hand)")
    ap.add_argument("--in-process", metavar="AREA", help=argparse.SUPPRESS)   # the driver's child process
    args = ap.parse_intermixed_args(argv)   # options may come between the areas and the settings
    items = [a for a in args.areas if "=" in a]
    areas = [a for a in args.areas if "=" not in a]
    unknown = [a for a in areas if a not in AREAS]
    if unknown:
        ap.error(f"unknown area {unknown[0]!r}; choose from {', '.join(AREAS)}")
    if args.in_process:
        return run_one(args.in_process, args.quick, items)
    if items and len(areas) != 1:
        ap.error("name=value settings need exactly one area")
    if items:
        settings(areas[0], items)   # refuse a bad setting before running anything
    areas = [] if args.compose_only else (areas or list(AREAS))
    parts_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "bench")
    os.makedirs(parts_dir, exist_ok=True)
    stamp = f"_Measured {datetime.date.today().isoformat()}{' (quick sizes)' if args.quick else ''} on {machine()}._"
    failed = 0
    for area in areas:
        cmd = [sys.executable, "-m", "benchmarks", "--in-process", area] + (["--quick"] if args.quick else []) + items
        print(f"== {area}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            failed += 1
            sys.stderr.write(proc.stderr[-4000:])
            print(f"== {area} FAILED (exit {proc.returncode}); its previous results are kept")
            continue
        how = " ".join(["python -m benchmarks"] + (["--quick"] if args.quick else []) + [area] + items)
        name, title = f"{area}.md", f"## {_area(area).TITLE}"
        if items:   # a run with settings gets a section of its own: it never replaces the area's full run
            name = f"{area}--{part_slug(items)}.md"
            title = f"### {_area(area).TITLE}: {' '.join(items)}"
        with open(os.path.join(parts_dir, name), "w") as f:
            f.write(f"{title}\n\n{proc.stdout.strip()}\n\n{stamp} Whole run: {dt:.0f} s (`{how}`).\n")
    compose(args.out, parts_dir)
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
