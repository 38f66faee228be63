"""hinge_vertex (one vertex's Jacobian block only, used by the sweep) equals bending_vertex (the full
hinge Jacobian of ipc/bending.py) for every slot, flat and curved rest states, random hinges."""
import numpy as np
import pytest

from solver_server.blockdescent.vertex_elastic import bending_vertex, hinge_vertex


@pytest.mark.parametrize("d0", [0.0, 0.7])
def test_hinge_slot_block_equals_full_hinge_jacobian(d0):
    rng = np.random.default_rng(7)
    h = np.array([0, 1, 2, 3], np.int32)
    for _ in range(300):
        x = rng.normal(size=(4, 3))
        for a in range(4):
            g1, H1, g2, H2 = np.zeros(3), np.zeros((3, 3)), np.zeros(3), np.zeros((3, 3))
            hinge_vertex(x, h, 2.0, d0, a, g1, H1, np.zeros((3, 12)))
            bending_vertex(0, x, h, 2.0, d0, a, g2, H2, np.zeros((3, 12)), np.zeros((5, 3)), np.zeros(3), np.zeros(3))
            np.testing.assert_allclose(g1, g2, rtol=1e-9, atol=1e-11)
            np.testing.assert_allclose(H1, H2, rtol=1e-9, atol=1e-11)
            assert np.linalg.eigvalsh(H1).min() > -1e-9 * max(1.0, np.abs(H1).max())
