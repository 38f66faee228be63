"""Air on solids' surfaces and along rods (energies/air.py, model/force_fields.py): finite-difference checks of
the rod segments' cross drag, then the drag laws. The linear normal drag -k A n (n . v) on every boundary
triangle of a cube of side a falling face-first sums to 2 k a^2 v (top and bottom faces; the sides are
edge-on), so it falls at most rho a g / (2 k), whether soft (tets) or stiff (affine body, the drag pulled back
through x = A X + p). A horizontal rod of diameter d feels k d per metre across it: v_t = rho pi d g / (4 k);
falling along its length it feels nothing. A Wind field pushes a rod at the air's speed."""
import numpy as np
import pytest

from protocol.scene import Body, ForceField, Material, Scene, SceneError, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.energies import air
from solver_server.energies.fem_common import hessian_pattern
from solver_server.model.primitives import box


def _fd_check(f, g, x, eps=1e-6, rtol=1e-5):
    x0 = x.ravel().copy()
    ga = np.asarray(g(x0.reshape(x.shape))).ravel()
    gn = np.empty_like(x0)
    for i in range(x0.size):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += eps
        xm[i] -= eps
        gn[i] = (f(xp.reshape(x.shape)) - f(xm.reshape(x.shape))) / (2 * eps)
    assert np.abs(ga - gn).max() <= rtol * max(1.0, np.abs(gn).max()), (ga, gn)


def test_segment_drag_gradient_and_hessian_match_finite_differences():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(4, 3))
    xh = x + 0.1 * rng.normal(size=(4, 3))
    segs = np.array([[0, 1], [1, 2], [2, 3]], np.int32)
    tau, ln = air.lagged_tangents(xh, segs)
    disp = 0.05 * rng.normal(size=(3, 3))
    hc = 0.02 * ln * np.array([1.0, 3.0, 0.5])
    E = lambda y: air.segment_energy(y, xh, segs, tau, disp, hc)
    G = lambda y: air.segment_gradient(y, xh, segs, tau, disp, hc, 4)
    _fd_check(E, G, x)
    r, c = hessian_pattern(segs)
    H = np.zeros((12, 12))
    np.add.at(H, (r, c), air.segment_hessian_elems(tau, hc).reshape(-1))
    for i in range(12):
        _fd_check(lambda y: G(y)[i], lambda y: H[i], x)
    assert np.linalg.eigvalsh(H).min() > -1e-14


def _scene(bodies, frames, fields=()):
    return Scene(Settings(frame_start=1, frame_end=frames, solver_quality="accurate"), tuple(bodies),
                 force_fields=tuple(fields))


@pytest.mark.parametrize("role", ["solid", "stiff", "stiff on a Box shape"])
def test_cube_falls_at_the_drag_laws_terminal_speed(role):
    """A falling cube reaches the drag law's terminal speed: as a solid (its boundary triangles), as a stiff body
    (its Mesh shape, flat faces merged: the air acts on the 12 merged triangles) and on a Box shape (the air acts on
    the shape's triangles, the body's own vertices not being in the system)."""
    a, rho, k = 0.2, 50.0, 20.0
    V, T = box((a, a, a), center=(0.0, 0.0, 5.0), divisions=2)
    shape = "box" if "Box" in role else "mesh"
    role = role.split()[0]
    cube = Body("cube", role, V, T, material=Material(density=rho, youngs_modulus=1e5, air_drag=k),
                collision_shape=shape)
    b = MeshBackend(_scene([cube], 49))                 # 2 s, 8 time constants
    for _ in range(48):
        b.advance()
    if role == "stiff":
        v = b.stepper.v[int(b.system.affine.row0[0])]
    else:
        m = b.system.mass
        v = (m[:, None] * b.stepper.v[:len(m)]).sum(0) / m.sum()
    vt = rho * a * 9.81 / (2 * k)
    print(f"{role} cube: terminal speed {-v[2]:.4f} m/s, drag law rho a g / (2 k) = {vt:.4f} m/s")
    assert abs(-v[2] / vt - 1.0) < 0.005 and np.abs(v[:2]).max() < 1e-3 * vt


def _rod(axis, n=10, length=0.5, z=5.0, d=0.01, k=50.0, rho=1000.0):
    t = np.linspace(-length / 2, length / 2, n + 1)
    V = np.zeros((n + 1, 3))
    V[:, axis] = t
    V[:, 2] += z
    E = np.stack([np.arange(n), np.arange(1, n + 1)], 1).astype(np.int32)
    return Body("rod", "rod", V, np.zeros((0, 3), np.int32), edges=E,
                material=Material(density=rho, thickness=d, youngs_modulus=1e7, bending_stiffness=1e-3, air_drag=k))


def test_rod_falls_across_at_the_drag_law_and_freely_along_its_length():
    d, k, rho = 0.01, 50.0, 1000.0
    b = MeshBackend(_scene([_rod(0, d=d, k=k, rho=rho)], 49))
    for _ in range(48):
        b.advance()
    v = b.stepper.v.mean(axis=0)
    vt = rho * np.pi * d * 9.81 / (4 * k)
    print(f"horizontal rod: terminal speed {-v[2]:.4f} m/s, drag law rho pi d g / (4 k) = {vt:.4f} m/s")
    assert abs(-v[2] / vt - 1.0) < 0.005
    b = MeshBackend(_scene([_rod(2, d=d, k=k, rho=rho)], 13))
    for _ in range(12):
        b.advance()
    v = b.stepper.v.mean(axis=0)
    print(f"vertical rod after 0.5 s: {-v[2]:.4f} m/s, free fall {9.81 * 0.5:.4f} m/s")
    assert abs(-v[2] / (9.81 * 0.5) - 1.0) < 1e-3


def test_wind_pushes_a_weightless_rod_to_the_air_speed():
    F = 25
    M = np.repeat(np.eye(4)[None], F, 0)
    M[:, :3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]      # local +Z -> world -y
    wind = ForceField("Wind", "wind", np.full(F, 2.0), M)
    sc = Scene(Settings(frame_start=1, frame_end=F, solver_quality="accurate", gravity=(0.0, 0.0, 0.0)),
               (_rod(0, k=50.0),), force_fields=(wind,))
    b = MeshBackend(sc)
    for _ in range(F - 1):
        b.advance()
    v = b.stepper.v.mean(axis=0)
    zdir = M[0, :3, 2]
    print(f"rod in a 2 m/s wind along {zdir}: velocity {v}")
    assert abs(v @ zdir / 2.0 - 1.0) < 0.01


def test_preview_refuses_air_on_a_solid_by_name():
    V, T = box((0.2, 0.2, 0.2))
    sc = Scene(Settings(frame_start=1, frame_end=3, solver_quality="fast"),
               (Body("cube", "solid", V, T, material=Material(air_drag=1.0)),))
    with pytest.raises(SceneError) as e:
        MeshBackend(sc)
    assert e.value.obj == "cube" and e.value.field == "air_drag"
