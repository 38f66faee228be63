"""The none backend honours the Backend contract: input motion, pins, state round trip."""
import numpy as np
import pytest

from protocol.scene import SceneError
from solver_server.backends import create
from scenes import expected_positions, make_scene


def test_follows_the_input_motion_and_resumes_from_its_state():
    scene = make_scene(n_frames=5)
    s = scene.settings
    b = create(scene)
    assert b.frame == s.frame_start
    init = b.initial_positions()
    for name, p in expected_positions(scene, s.frame_start).items():
        assert np.array_equal(init[name], p)
    cloth = scene.bodies[1]
    assert np.array_equal(init[cloth.name][cloth.pin_indices], cloth.pin_targets[0])  # pins applied
    states = {}
    for f in range(s.frame_start + 1, s.frame_end + 1):
        r = b.advance()
        assert r.frame == f == b.frame
        states[f] = b.get_state()
        for name, p in expected_positions(scene, f).items():
            assert r.positions[name].dtype == np.float32 and np.array_equal(r.positions[name], p)
        assert {"newton_iterations", "contacts", "seconds"} <= set(r.stats)
    b2 = create(scene)
    b2.set_state(states[s.frame_start + 2], s.frame_start + 2)
    r = b2.advance()
    assert r.frame == s.frame_start + 3
    with pytest.raises(RuntimeError):
        b.advance()  # past frame_end


def test_debug_failure_is_a_scene_error():
    b = create(make_scene(n_frames=5, debug_fail_after=1))
    b.advance()
    with pytest.raises(SceneError) as e:
        b.advance()
    assert e.value.field == "debug_fail_after"
