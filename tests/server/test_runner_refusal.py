"""A re-bake the backend refuses keeps the previous job's cache (frames and resume state)."""
import os

import numpy as np

from protocol.scene import Body, Scene, Settings
from solver_server.runtime.runner import run_job
from scenes import make_scene


def _open_solid_scene() -> Scene:
    """A 'solid' that is a single open triangle: the IPC backend refuses it while building."""
    tri = Body(name="Sheet", role="solid", vertices=np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float64),
               triangles=np.array([[0, 1, 2]], np.int32))
    return Scene(Settings(frame_start=1, frame_end=3, backend="ipc"), (tri,))


def test_refused_rebake_keeps_the_previous_cache(tmp_path):
    cache = str(tmp_path / "cache")
    events = []
    assert run_job(make_scene(n_frames=4), cache, False, events.append, lambda: False) == "done"
    before = {f: open(os.path.join(cache, "frames", f), "rb").read() for f in os.listdir(os.path.join(cache, "frames"))}
    states = sorted(os.listdir(os.path.join(cache, "state")))
    assert len(before) == 4 and len(states) == 4

    events.clear()
    assert run_job(_open_solid_scene(), cache, False, events.append, lambda: False) == "failed"
    end = events[-1]
    assert end[0] == "end" and end[1] == "failed" and "Sheet" in end[4]      # the refusal names the object
    after = {f: open(os.path.join(cache, "frames", f), "rb").read() for f in os.listdir(os.path.join(cache, "frames"))}
    assert after == before                                                     # frames untouched
    assert sorted(os.listdir(os.path.join(cache, "state"))) == states          # resume state untouched

    events.clear()                                   # and the old job can still be resumed
    assert run_job(make_scene(n_frames=4), cache, True, events.append, lambda: False) == "done"
