"""The benchmark runner (benchmarks/): one table format, one argument parser, one report.

The areas themselves take minutes and measure time, so they are not run here except the server area at
its quick size (a real server process, a few seconds): the runner must write its section and compose
docs/benchmarks.md from every area's file.
"""
import os
import subprocess
import sys

import pytest

from benchmarks import AREAS
from benchmarks.__main__ import settings
from benchmarks.report import Table, render

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_table_format_right_aligns_numeric_columns():
    t = Table(["solver", "s/frame", "ratio"])
    t.add("Fast", "0.123", "2.5x")
    t.add("Blender cloth", "1,234.5", "-")
    assert t.markdown().splitlines() == ["| solver | s/frame | ratio |", "| --- | ---: | ---: |",
                                         "| Fast | 0.123 | 2.5x |", "| Blender cloth | 1,234.5 | - |"]
    with pytest.raises(ValueError):
        t.add("too", "few")
    assert render(["A paragraph.", t, ""]).split("\n\n")[0] == "A paragraph."


def test_settings_take_the_type_of_the_section_keyword():
    assert settings("fast", ["sizes=24,64", "frames=12", "blender=no", "accurate_size=0"]) == \
        {"sizes": [24, 64], "frames": 12, "blender": False, "accurate_size": 0}
    assert settings("abd", ["fem-quality=both", "fem_only=yes"]) == {"fem_quality": "both", "fem_only": True}
    with pytest.raises(SystemExit, match="has no setting 'cubes'"):
        settings("fast", ["cubes=3"])
    with pytest.raises(SystemExit, match="expected yes or no"):
        settings("fast", ["blender=maybe"])


def test_every_area_module_has_a_title_and_a_section():
    import importlib
    import inspect
    for area in AREAS:
        m = importlib.import_module(f"benchmarks.{area}")
        assert m.TITLE and "quick" in inspect.signature(m.section).parameters, area


def test_the_runner_writes_the_area_and_composes_the_report(tmp_path):
    out = tmp_path / "docs" / "benchmarks.md"
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(out), "server"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    part = (tmp_path / "docs" / "bench" / "server.md").read_text()
    assert part.startswith("## Server responsiveness") and "| cancel mid-frame -> done | 2 |" in part
    assert "`python -m benchmarks --quick server`" in part
    report = out.read_text()
    assert report.count("\n## ") == len(AREAS) and "Not measured yet: `python -m benchmarks protocol`" in report
    bad = subprocess.run([sys.executable, "-m", "benchmarks", "--out", str(out), "nosuch"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown area 'nosuch'" in bad.stderr


def test_suite_settings_and_refusal_of_an_unknown_scene():
    assert settings("suite", ["scenes=slope,rod", "sizes=24,48", "addon=no", "frames=6"]) == \
        {"scenes": ["slope", "rod"], "sizes": [24, 48], "addon": False, "frames": 6}
    from benchmarks import suite
    with pytest.raises(SystemExit, match="unknown scene 'nosuch'"):
        suite.run(["nosuch"], quick=True)


@pytest.mark.slow
def test_suite_runs_a_quick_scene_into_a_full_row():
    """One quick scene (the box on the slope, 4 frames, Converged and Preview) through the suite's own code:
    the row carries the reference, the answer and its error, the convergence fields, times and the table."""
    from benchmarks import suite
    res = suite.run(["slope"], quick=True, frames=4)
    (r,) = res["rows"]
    assert r["reference"].startswith("sticks") and r["ref_value"] == 0.0
    assert r["answer"] >= 0.0 and r["error"] == pytest.approx(r["answer"]) and r["error_text"].endswith(" mm")
    assert r["converged"] is (r["unconverged_steps"] == 0) and r["steps"] == 4
    assert r["cpu_per_frame"] > 0.0 and r["preview_cpu"] > 0.0 and r["preview_error"] is not None
    assert r["intersections"] == 0 and r["preview_intersections"] == 0
    assert isinstance(r["bar"], bool) and r["load"] >= 0.0
    md = suite.table(res["rows"]).markdown()
    assert md.splitlines()[2].startswith("| box on 20 deg slope") and "| 0 / 0 / - |" in md


def test_a_run_with_settings_gets_its_own_section_after_the_full_run(tmp_path):
    """`python -m benchmarks suite sizes=128` must not replace the suite's full table: its part file is
    suite--<settings>.md, composed right after suite.md."""
    from benchmarks.__main__ import compose, part_slug
    assert part_slug(["sizes=128", "frames=24"]) == "sizes-128_frames-24"
    parts = tmp_path / "bench"
    parts.mkdir()
    (parts / "suite.md").write_text("## Suite\n\nfull table\n")
    (parts / f"suite--{part_slug(['sizes=128'])}.md").write_text("### Suite: sizes=128\n\nthe 128 row\n")
    out = tmp_path / "benchmarks.md"
    compose(str(out), str(parts))
    text = out.read_text()
    assert text.index("full table") < text.index("the 128 row")
    assert text.count("\n## ") == len(AREAS) and "\n### Suite: sizes=128" in text
