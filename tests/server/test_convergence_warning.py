"""A frame whose solver steps miss their tolerance reaches the user: the frame stats say which
steps and which objects, with the likely cause; ``clearance-server bake`` prints it.

Real ``python -m solver_server serve`` / ``bake`` processes, the real IPC solver (Accurate, so the
iteration cap is Max Newton Iterations): a soft cube thrown at the floor at 30 m/s with a cap of 2
Newton iterations cannot converge; the same cube falling gently with the default cap does.
"""
import dataclasses
import os
import subprocess
import sys

import numpy as np

from protocol import Client, Done, Frame, save_scene
from protocol.convergence import ConvergenceReport, frame_ranges, split_objects, summarize
from protocol.scene import Body, Material, Scene, Settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def box_on_floor(speed: float = 0.0, max_it: int = 100, frames: int = 2) -> Scene:
    """A 0.2 m soft cube 0.1 m above a floor collider, thrown down at ``speed`` m/s."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64) * 0.1
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))], np.int32)
    cube = Body("Soft Cube", "solid", corners + (0, 0, 0.2), tris, material=Material(youngs_modulus=1e5),
                initial_velocity=(0.0, 0.0, -speed))
    floor = Body("Floor", "collider", np.array([(-1, -1, 0), (1, -1, 0), (1, 1, 0), (-1, 1, 0)], np.float64),
                 np.array([(0, 1, 2), (0, 2, 3)], np.int32))
    st = Settings(frame_start=1, frame_end=1 + frames, backend="ipc", solver_quality="accurate",
                  max_newton_iterations=max_it)
    return Scene(st, (cube, floor), name="box on floor")


def _bake(address: str, scene: Scene, folder) -> dict:
    with Client(address, timeout=10.0) as c:
        c.connect()
        job = c.submit(scene, str(folder))
        evs = list(c.events(job, timeout=900.0))
    assert [e for e in evs if isinstance(e, Done)][-1].state == "done"
    return {e.frame: e.stats for e in evs if isinstance(e, Frame)}


def test_unconverged_frames_are_reported_with_objects_and_cause(server, tmp_path):
    stats = _bake(server.address, box_on_floor(speed=30.0, max_it=2), tmp_path / "thrown")
    bad = {f: st for f, st in stats.items() if f != 1 and st.get("converged") is False}
    assert bad, stats
    for st in bad.values():
        assert st["unconverged_steps"] >= 1 and st["steps"] == 1
        assert split_objects(st) == ["Soft Cube"]
        assert "Soft Cube" in st["warning"] and "Max Newton Iterations (2)" in st["warning"]
    assert "too fast" in bad[min(bad)]["warning"] and "Substeps" in bad[min(bad)]["warning"]
    summary = summarize(bad, len(stats) - 1)
    assert summary.startswith(f"{len(bad)} of 2 frames did not converge") and "Soft Cube" in summary


def test_converged_frames_carry_no_warning(server, tmp_path):
    stats = _bake(server.address, box_on_floor(), tmp_path / "gentle")
    for f, st in stats.items():
        if f != 1:
            assert st["converged"] is True and st["unconverged_steps"] == 0, st
            assert "warning" not in st and "unconverged_objects" not in st


def test_bake_cli_prints_the_warning(tmp_path):
    path = str(tmp_path / "thrown.clrscene")
    save_scene(path, box_on_floor(speed=30.0, max_it=2))
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "solver_server", "bake", path, "--out", str(tmp_path / "o")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(line.startswith("warning: frame 2 did not converge") and "Soft Cube" in line for line in lines), r.stdout
    assert lines[-1].startswith("warning: ") and "frames did not converge" in lines[-1] and "Soft Cube" in lines[-1]


def test_report_collects_and_summarizes():
    rep = ConvergenceReport()
    ok = {"converged": True}
    bad = {"converged": False, "unconverged_steps": 1, "unconverged_objects": "A\nB", "warning": "A is too fast"}
    worse = dict(bad, unconverged_steps=3, warning="B is too stiff")
    for f, st in ((2, ok), (3, bad), (4, bad), (5, worse), (7, bad), (8, ok)):
        rep.add(f, st)
    assert frame_ranges(rep.frames) == "3–5, 7" and rep.objects() == ["A", "B"]
    assert rep.summary() == ("4 of 6 frames did not converge (frames 3–5, 7); the result may be softer, lag or "
                             "miss the set tolerance there. Frame 5: B is too stiff")
    rep.add(5, ok)                     # re-sent after a resume, now converged
    assert 5 not in rep.frames
    assert ConvergenceReport().summary() is None
