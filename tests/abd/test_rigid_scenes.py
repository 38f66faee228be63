"""The benchmark's rigid scenes (benchmarks/rigid_scenes.py, issue 19) at test size with the Converged solver:
the brick wall hit by the ball, props poured into the bin, the pile of 1,016-vertex cubes on Mesh and on
Convex Hull shapes. Every frame: zero crossings of the collision surfaces and of the bodies' own meshes
(exact edge-triangle test). The Bullet side runs in the benchmark only."""
import numpy as np
import pytest

from benchmarks import rigid_scenes as rs


def test_wall_is_hit_by_the_ball():
    """3 x 3 bricks and the 110 kg ball rolling off the ramp, 1 s: the ball reaches the wall and pushes bricks
    back (the one it hits first moves more than 2 cm in +x), no crossing, every step converged."""
    r = rs.run_clearance("wall", 24, 1, 3)
    assert r["cross_shape"] == 0 and r["cross"] == 0
    assert r["missed"] == 0
    moved = np.array([e[0] - s[0] for s, e in zip(r["start"][:-1], r["end"][:-1])])
    assert moved.max() > 0.02, moved
    assert r["end"][-1][0] > r["start"][-1][0] + 0.3      # the ball came down the ramp towards the wall


def test_props_poured_into_the_bin_stay_in_it():
    """12 props (boxes, cylinders, convex rocks on Convex Hull shapes) dropped into the bin, 12 frames: no
    crossing, and every prop ends inside the bin's walls and above its floor."""
    r = rs.run_clearance("bin", 12, 1, 12)
    assert r["cross_shape"] == 0 and r["cross"] == 0
    w, d, _ = rs.BIN
    for c in r["end"]:
        assert abs(c[0]) < w / 2 and abs(c[1]) < d / 2 and 0.0 < c[2] < 0.5, c
    assert min(s[2] - e[2] for s, e in zip(r["start"], r["end"])) > 0.01   # every one fell onto the floor or a prop


@pytest.mark.parametrize("kind", ["pile100", "pile100_hull", "pile100_rough"])
def test_pile_of_1016_vertex_cubes(kind):
    """4 cubes of 1,016 vertices (the issue's cubes) on Mesh shapes (flat faces merged), on Convex Hull shapes
    and on Mesh shapes with 0.05 mm of vertex noise (every triangle in contact) fall onto the ground and each
    other, 6 frames: no crossing of the bodies' own meshes or of the collision surfaces, every step converged."""
    r = rs.run_clearance(kind, 6, 1, 4)
    assert r["cross_shape"] == 0 and r["cross"] == 0
    assert r["missed"] == 0
    assert min(s[2] - e[2] for s, e in zip(r["start"], r["end"])) > 0.0


def test_the_ground_holds_a_long_line_of_dominoes():
    """30 dominoes 10 cm apart reach x = 2.9 m: the ground grows beyond the line (on the 4 m square the last ten
    stood off its edge and fell forever); the other scenes keep the 4 m square."""
    sc, _ = rs.make("dominoes", 2, 2, 30)
    ground = next(b for b in sc.bodies if b.name == "ground")
    line = np.concatenate([b.vertices for b in sc.bodies if b.role == "stiff"])
    assert ground.vertices[:, 0].max() > line[:, 0].max() + 0.4
    assert ground.vertices[:, 0].min() < line[:, 0].min() - 0.4
    sc, _ = rs.make("dominoes", 2, 2, 10)
    assert np.ptp(next(b for b in sc.bodies if b.name == "ground").vertices[:, 0]) == 4.0


def test_toppled_counts_the_boxes_turned_past_the_angle():
    """toppled(): a box turned 45 degrees about x counts, one turned 20 degrees does not, a non-box never."""
    rest = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-2, 2)], float)

    def turned(deg):
        a = np.radians(deg)
        R = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
        return rest @ R.T + [0.5, 0.0, 1.0]

    boxes = [((1, 1, 2), np.eye(3), "BOX"), ((1, 1, 2), np.eye(3), "BOX"), (None, np.eye(3), "CONVEX_HULL")]
    assert rs.toppled([rest] * 3, [turned(45), turned(20), turned(90)], boxes) == 1
