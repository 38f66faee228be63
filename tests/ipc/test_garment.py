"""The sewn garment of `scripts/demo.py --scene garment`, solver side: two flat 0.6 x 0.35 m panels in one cloth
mesh, joined along both sides by loose edges (seams), in front of and behind a cone-shaped mannequin
(collider). Sewing closes the side seams from 0.5 m to the contact gap, the tube slides down the cone until
it fits and stops there; nothing ever crosses the mannequin or itself."""
import numpy as np
import pytest

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend


def cone(r_bottom=0.22, r_top=0.12, height=0.9, segments=32):
    """Closed cone frustum standing on z = 0 (vertices (n, 3), outward triangles (m, 3) int32)."""
    a = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack([np.cos(a), np.sin(a)], 1)
    V = np.concatenate([np.c_[r_bottom * ring, np.zeros(segments)], np.c_[r_top * ring, np.full(segments, height)],
                        [[0.0, 0.0, 0.0], [0.0, 0.0, height]]])
    i = np.arange(segments)
    j = (i + 1) % segments
    b, t = 2 * segments, 2 * segments + 1
    T = np.concatenate([np.stack([i, j, j + segments], 1), np.stack([i, j + segments, i + segments], 1),
                        np.stack([np.full(segments, b), j, i], 1), np.stack([np.full(segments, t), i + segments,
                                                                                j + segments], 1)])
    return V, T.astype(np.int32)


def skirt(nx=12, nz=7, width=0.6, height=0.35, gap=0.25, z0=0.45):
    xs, zs = np.meshgrid(np.linspace(-width / 2, width / 2, nx + 1), np.linspace(z0, z0 + height, nz + 1),
                         indexing="xy")
    panel = np.stack([xs.ravel(), np.zeros(xs.size), zs.ravel()], axis=1)
    V = np.concatenate([panel + (0.0, -gap, 0.0), panel + (0.0, gap, 0.0)])
    i, j = np.meshgrid(np.arange(nx), np.arange(nz), indexing="xy")
    a = (j * (nx + 1) + i).ravel()
    q = np.stack([a, a + 1, a + nx + 2, a + nx + 1], axis=1)
    q = np.concatenate([q, q[:, ::-1] + len(panel)])
    T = np.concatenate([q[:, [0, 1, 2]], q[:, [0, 2, 3]]]).astype(np.int32)
    rows = np.arange(nz + 1) * (nx + 1)
    seams = np.array([(r, len(panel) + r) for r in rows] + [(r + nx, len(panel) + r + nx) for r in rows], np.int32)
    edges = np.unique(np.sort(np.concatenate([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]], seams]), axis=1), axis=0)
    return V, T, edges.astype(np.int32), seams


@pytest.mark.slow
def test_skirt_is_sewn_around_the_mannequin_and_rests_on_it():
    V, T, E, seams = skirt()
    cloth = Body("Skirt", "cloth", V, T, edges=E,
                 material=Material(density=200.0, thickness=1e-3, youngs_modulus=2e5, bending_stiffness=5e-6,
                                   sewing=60.0, air_drag=0.5, friction=0.4))
    CV, CT = cone()
    body = Body("Mannequin", "collider", CV, CT)
    frames = 49
    b = MeshBackend(Scene(Settings(frame_start=1, frame_end=frames, solver_quality="accurate"), (cloth, body)))
    widest, lows = [], []
    for f in range(frames - 1):
        b.advance()
        x = b.stepper.x
        assert b.contact.count_intersections(np.ascontiguousarray(x)) == 0, f"frame {f + 2}"
        widest.append(float(np.linalg.norm(x[seams[:, 0]] - x[seams[:, 1]], axis=1).max()))
        lows.append(float(x[:len(V), 2].min()))
    speed = float(np.abs(b.stepper.v[:len(V)]).max())
    print(f"widest seam {widest[0] * 1e3:.1f} mm after one frame, {widest[23] * 1e3:.2f} mm at frame 25, "
          f"{widest[-1] * 1e3:.2f} mm at the end; skirt's lowest z {lows[-1]:.4f} m; fastest vertex {speed:.4f} m/s")
    assert widest[-1] < 0.01 and abs(lows[-1] - lows[-12]) < 1e-3 and speed < 0.02
