"""MPMBackend contract: fixed particle count per body, stats, resumable state, backends.create."""
import numpy as np
import pytest

from solver_server.backends import create
from solver_server.solvers.mpm.materials import preset
from .scenes import collider_box, granular, scene


def build(progress=None):
    sand = granular("Sand", (0.3, 0.3, 0.3), (0.5, 0.5, 0.5), preset("sand", particle_spacing=0.025))
    snow = granular("Snow", (0.55, 0.3, 0.1), (0.7, 0.45, 0.25), preset("snow", particle_spacing=0.025))
    rock = collider_box("Rock", (0.35, 0.35, 0.0), (0.45, 0.45, 0.15), friction=0.4)
    return create(scene([sand, snow, rock], frames=4), progress)


def test_advance_returns_particles_stats_and_resumes_exactly():
    events = []
    be = build(lambda state, f: events.append(state))
    assert "compiling" in events
    init = be.initial_positions()
    assert set(init) == {"Sand", "Snow"}
    counts = {k: v.shape[0] for k, v in init.items()}
    r1 = be.advance()
    assert r1.frame == 2
    for k, v in r1.positions.items():
        assert v.dtype == np.float32 and v.shape == (counts[k], 3)
        assert np.isfinite(v).all()
    st = r1.stats
    assert st["substeps"] >= 1 and st["particles"] == sum(counts.values()) and st["max_speed"] > 0
    assert st["particle_radius"] == {"Sand": pytest.approx(0.0125), "Snow": pytest.approx(0.0125)}
    # sand fell under gravity (free fall for ~1/24 s: about 8.5 mm at the top layer)
    assert init["Sand"][:, 2].max() - r1.positions["Sand"][:, 2].max() > 0.005
    state = be.get_state()
    r2 = be.advance()
    r3 = be.advance()
    fresh = build()
    fresh.set_state(state, 2)
    q2 = fresh.advance()
    q3 = fresh.advance()
    assert q3.frame == r3.frame == 4
    for k in r3.positions:
        assert np.array_equal(q2.positions[k], r2.positions[k])
        assert np.array_equal(q3.positions[k], r3.positions[k])
    # no particle inside the rock collider
    for k, v in r3.positions.items():
        inside = np.all((v > [0.35, 0.35, 0.0]) & (v < [0.45, 0.45, 0.15]), axis=1)
        assert not inside.any()
