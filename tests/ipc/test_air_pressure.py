"""Air drag, force fields and pressure in the Newton path (energies/air.py, energies/pressure.py,
integrators/external.py, model/force_fields.py): finite-difference checks of every gradient and Hessian,
then physics: a sheet falling flat reaches the terminal speed of the drag law, edge-on it falls freely,
a Wind field pushes a sheet, a Force field accelerates it, and an inflated sphere settles at
dR/R = p R (1 - nu) / (2 E t). The Preview (block-descent) solver refuses each of them by name."""
import dataclasses

import numpy as np
import pytest

from protocol.scene import Body, ForceField, Material, Scene, SceneError, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.energies import air, pressure
from solver_server.integrators.external import ExternalForces
from solver_server.model.primitives import grid_sheet, icosphere
from solver_server.model.system import build_system


def _fd_check(f, g, x, eps=1e-6, rtol=1e-5):
    """Central differences of f against g at x (flattened)."""
    x0 = x.ravel().copy()
    ga = g(x0.reshape(x.shape)).ravel()
    gn = np.empty_like(x0)
    for i in range(x0.size):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += eps
        xm[i] -= eps
        gn[i] = (f(xp.reshape(x.shape)) - f(xm.reshape(x.shape))) / (2 * eps)
    assert np.abs(ga - gn).max() <= rtol * max(1.0, np.abs(gn).max()), (ga, gn)


def _dense(rows, cols, vals, n):
    H = np.zeros((n, n))
    np.add.at(H, (rows, cols), vals)
    return H


def test_drag_gradient_and_hessian_match_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5, 3))
    xh = x + 0.1 * rng.normal(size=(5, 3))
    tris = np.array([[0, 1, 2], [1, 3, 2], [2, 3, 4]], np.int32)
    nrm, area = air.lagged_frame(xh, tris)
    disp = rng.normal(size=(3, 3)) * 0.05
    hc = 0.01 * area * np.array([1.0, 2.0, 0.5])
    E = lambda y: air.drag_energy(y, xh, tris, nrm, disp, hc)
    G = lambda y: air.drag_gradient(y, xh, tris, nrm, disp, hc, 5)
    _fd_check(E, G, x)
    from solver_server.energies.fem_common import hessian_pattern
    r, c = hessian_pattern(tris)
    H = _dense(r, c, air.drag_hessian_elems(tris, nrm, hc).reshape(-1), 15)
    for i in range(15):
        _fd_check(lambda y: G(y)[i], lambda y: H[i], x)
    assert np.linalg.eigvalsh(H).min() > -1e-14


def test_pressure_volume_gradient_and_exact_hessian():
    V, T = icosphere(0.3, subdivisions=1)
    T = T.astype(np.int32)
    assert abs(pressure.enclosed_volume(V, T) / (4 / 3 * np.pi * 0.3 ** 3) - 1) < 0.25  # coarse but outward
    rng = np.random.default_rng(2)
    x = V + 0.02 * rng.normal(size=V.shape)
    p = np.linspace(50.0, 150.0, len(T))
    n = len(V)
    E = lambda y: pressure.pressure_energy(y, T, p)
    G = lambda y: pressure.pressure_gradient(y, T, p, n)
    _fd_check(E, G, x)
    from solver_server.energies.fem_common import hessian_pattern
    r, c = hessian_pattern(T)
    H = _dense(r, c, pressure.pressure_hessian_elems(x, T, p, False).reshape(-1), 3 * n)
    for i in range(0, 3 * n, 7):
        _fd_check(lambda y: G(y)[i], lambda y: H[i], x)
    Hp = _dense(r, c, pressure.pressure_hessian_elems(x, T, p, True).reshape(-1), 3 * n)
    assert np.linalg.eigvalsh(Hp).min() > -1e-9 and np.linalg.eigvalsh(H).min() < -1.0  # exact one is indefinite


def _field(kind, strength, F, loc=(0, 0, 0), z=(0, 0, 1), **kw):
    M = np.eye(4)
    z = np.asarray(z, float) / np.linalg.norm(z)
    a = np.cross(z, [1.0, 0, 0]) if abs(z[0]) < 0.9 else np.cross(z, [0, 1.0, 0])
    a /= np.linalg.norm(a)
    M[:3, 0], M[:3, 1], M[:3, 2], M[:3, 3] = a, np.cross(z, a), z, loc
    return ForceField(f"{kind}_field", kind, np.full(F, float(strength)), np.repeat(M[None], F, 0), **kw)


def _sheet(name="sheet", vertical=False, size=0.5, quads=4, z=0.0, **mat):
    V, T, _ = grid_sheet((size, size), (quads, quads), center=(0.0, 0.0, 0.0))
    if vertical:
        V = V[:, [0, 2, 1]]
        T = T[:, ::-1]
    V = V + [0.0, 0.0, z]
    mat = {"density": 200.0, "thickness": 1e-3, "youngs_modulus": 1e5, "bending_stiffness": 1e-6, **mat}
    return Body(name, "cloth", V, np.ascontiguousarray(T, np.int32), material=Material(**mat))


def _scene(bodies, fields=(), frames=24, **st):
    st = {"solver_quality": "accurate", "frame_start": 1, "frame_end": frames, "fps": 24.0, **st}
    return Scene(Settings(**st), tuple(bodies), force_fields=tuple(fields))


def test_step_terms_gradient_and_hessian_match_finite_differences():
    F = 4
    sheet = _sheet(air_drag=0.8)
    sc = _scene([sheet], [_field("wind", 3.0, F, z=(1, 0, 1)), _field("vortex", 2.0, F, loc=(0.1, 0, 0)),
                          _field("force", 4.0, F, loc=(0, 0, -1), shape="point", falloff_power=1.0,
                                 flow=np.full(F, 0.5)),
                          _field("turbulence", 1.5, F, size=0.3, seed=7)], frames=F)
    sysm = build_system(sc)
    ef = ExternalForces(sysm)
    rng = np.random.default_rng(3)
    x_n = sysm.x0 + 0.01 * rng.normal(size=sysm.x0.shape)
    st = ef.for_step(x_n, x_n - 0.01, 0.02, 2.5)
    assert st.has_air and st.has_field and np.any(st.air_disp) and np.any(st.flow_c)
    x = x_n + 0.01 * rng.normal(size=x_n.shape)
    _fd_check(st.energy, st.gradient, x)
    n3 = 3 * sysm.n
    H = _dense(*st.hessian(x), n3)
    for i in range(0, n3, 5):
        _fd_check(lambda y: st.gradient(y)[i], lambda y: H[i], x)


def _mean_velocity(b, sc):
    n = len(sc.bodies[0].vertices)
    return b.stepper.v[:n].mean(axis=0)


def test_field_directions_and_blenders_falloff():
    from solver_server.model.force_fields import field_at
    pts = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0], [0.0, 3.0, 0.5]])
    vortex, _ = field_at(_field("vortex", 2.0, 3), 0.0, pts[:1])
    assert np.allclose(vortex, [[0.0, 2.0, 0.0]])                       # s unit(z x (x - o))
    force, flow = field_at(_field("force", 3.0, 3, shape="point", falloff_power=1.0, flow=np.full(3, 0.4)), 1.5, pts)
    assert np.allclose(force[1], [0.0, 0.0, 3.0 / (1.0 + 2.0)]) and np.isclose(flow[1], 0.4 / 3.0)
    wind, _ = field_at(_field("wind", 1.0, 3, falloff_power=2.0, use_min=True, distance_min=0.5, use_max=True,
                              distance_max=1.0), 0.0, pts)
    # plane: r = |z.(x - o)| = 0, 2, 0.5 -> inside r_min: 1; beyond r_max: 0; at r_min: (1 + 0)^-2 = 1
    assert np.allclose(wind[:, 2], [1.0, 0.0, 1.0]) and np.allclose(wind[:, :2], 0.0)
    line, _ = field_at(_field("wind", 1.0, 3, shape="line", falloff_power=1.0), 0.0, pts)
    assert np.allclose(line[:, 2], [1 / 2.0, 1 / 1.0, 1 / 4.0])         # r = distance from the Z axis: 1, 0, 3
    keyed = _field("wind", 0.0, 3)
    keyed = dataclasses.replace(keyed, strength=np.array([0.0, 2.0, 4.0]))
    assert np.allclose(field_at(keyed, 1.25, pts[:1])[0], [[0.0, 0.0, 2.5]])   # linear between frames


def test_turbulence_is_a_smooth_pattern_of_the_asked_speed_that_moves_cloth():
    """Unit RMS per axis over space (so strength is the RMS air speed, m/s), smooth at the feature size,
    fixed by the seed; a sheet in it is pushed unevenly (it wrinkles) where wind would push it flat."""
    from solver_server.model.force_fields import turbulence_pattern
    q = np.random.default_rng(0).uniform(0.0, 20.0, size=(20000, 3))
    u = turbulence_pattern(q, 3)
    assert np.allclose(np.sqrt((u ** 2).mean(axis=0)), 1.0, atol=0.15)
    du = np.linalg.norm(turbulence_pattern(q + [0.01, 0, 0], 3) - u, axis=1).mean()
    assert du < 0.1                                             # 1% of the feature size: nearly the same air
    assert np.abs(turbulence_pattern(q, 4) - u).mean() > 0.5    # another seed, another pattern
    F = 13
    sc = _scene([_sheet(air_drag=1.0)], [_field("turbulence", 2.0, F, size=0.5, seed=1)], frames=F,
                gravity=(0.0, 0.0, 0.0))
    b = MeshBackend(sc)
    for _ in range(F - 1):
        b.advance()
    z = b.stepper.x[:25, 2]
    print(f"sheet in turbulence (2 m/s RMS, 0.5 m): z spread {np.ptp(z):.3f} m after 0.5 s")
    assert np.ptp(z) > 0.02


@pytest.mark.parametrize("integrator", ["implicit_euler", "bdf2"])
def test_sheet_falling_flat_reaches_the_drag_laws_terminal_speed(integrator):
    """Linear normal drag k (Pa s/m) on a sheet of areal density rho_A: v_t = rho_A g / k (both integrators)."""
    k = 1.0
    sc = _scene([_sheet(air_drag=k, z=5.0)], frames=49, integrator=integrator)   # 2 s = 10 time constants
    b = MeshBackend(sc)
    for _ in range(48):
        b.advance()
    v = _mean_velocity(b, sc)
    vt = 200.0 * 1e-3 * 9.81 / k
    print(f"{integrator}: terminal speed {-v[2]:.4f} m/s, drag law {vt:.4f} m/s")
    assert abs(-v[2] / vt - 1.0) < 0.01 and np.abs(v[:2]).max() < 1e-3 * vt


def test_sheet_falling_edge_on_feels_little_drag():
    sc = _scene([_sheet(vertical=True, air_drag=1.0, z=5.0)], frames=13)
    b = MeshBackend(sc)
    for _ in range(12):
        b.advance()
    v = _mean_velocity(b, sc)
    print(f"edge-on after 0.5 s: {-v[2]:.4f} m/s, free fall {9.81 * 0.5:.4f} m/s, flat terminal 1.962 m/s")
    assert -v[2] > 0.99 * 9.81 * 0.5


def test_wind_pushes_a_flat_sheet_at_the_air_speed_and_not_an_edge_on_one():
    """No gravity: a free sheet facing a wind of speed u (m/s) across it is carried towards u (the relative air
    speed decays with time constant rho_A / k); an edge-on sheet in the same wind does not move."""
    F = 25
    sc = _scene([_sheet(air_drag=1.0)], [_field("wind", 2.0, F)], frames=F, gravity=(0.0, 0.0, 0.0))
    b = MeshBackend(sc)
    for _ in range(F - 1):
        b.advance()
    v = _mean_velocity(b, sc)
    # implicit Euler on m dv/dt = k A (u - v): v_n = u (1 - (1 + h k / rho_A)^-n)
    expect = 2.0 * (1.0 - (1.0 + (1.0 / 24) * 1.0 / 0.2) ** -(F - 1))
    print(f"flat sheet in 2 m/s wind after 1 s: {v[2]:.4f} m/s, implicit Euler of the drag law {expect:.4f} m/s")
    assert abs(v[2] / expect - 1.0) < 1e-3 and np.abs(v[:2]).max() < 1e-6
    sc = _scene([_sheet(vertical=True, air_drag=1.0)], [_field("wind", 2.0, F, z=(0, 0, 1))], frames=F,
                gravity=(0.0, 0.0, 0.0))
    b = MeshBackend(sc)
    for _ in range(F - 1):
        b.advance()
    assert np.abs(_mean_velocity(b, sc)).max() < 1e-6
    # field weight 0: no wind
    sc = _scene([dataclasses.replace(_sheet(air_drag=1.0), field_weights=(0.0, 1.0, 1.0, 1.0))], [_field("wind", 2.0, F)],
                frames=F, gravity=(0.0, 0.0, 0.0))
    b = MeshBackend(sc)
    b.advance()
    assert np.abs(_mean_velocity(b, sc)).max() < 1e-9


def test_force_field_accelerates_and_falloff_cuts_it_off():
    F = 7
    h = 1.0 / 24
    ff = _field("force", 3.0, F, loc=(0.0, 0.0, -10.0), shape="point")     # ~ +z at the sheet, 3 m/s^2
    sc = _scene([_sheet()], [ff], frames=F, gravity=(0.0, 0.0, 0.0))
    b = MeshBackend(sc)
    for _ in range(F - 1):
        b.advance()
    v = _mean_velocity(b, sc)
    assert abs(v[2] / (3.0 * (F - 1) * h) - 1.0) < 0.01
    far = dataclasses.replace(ff, use_max=True, distance_max=5.0)
    b = MeshBackend(_scene([_sheet()], [far], frames=F, gravity=(0.0, 0.0, 0.0)))
    b.advance()
    assert np.abs(b.stepper.v).max() < 1e-12


def test_inflated_sphere_settles_at_membrane_theory_radius():
    """Thin sphere under internal pressure p: dR/R = p R (1 - nu) / (2 E t) (small strain)."""
    R, E, t, nu, p = 0.5, 1.0e6, 1.0e-3, 0.3, 20.0
    V, T = icosphere(R, subdivisions=3)
    body = Body("ball", "cloth", V, T.astype(np.int32),
                material=Material(density=200.0, thickness=t, youngs_modulus=E, poisson_ratio=nu,
                                  bending_stiffness=0.0, pressure=p))
    sc = _scene([body], frames=13, fps=4.0, gravity=(0.0, 0.0, 0.0), newton_tol=1e-5)
    b = MeshBackend(sc)
    r0 = np.linalg.norm(V, axis=1).mean()
    for _ in range(12):
        r = b.advance()
    x = b.stepper.x[:len(V)]
    dr = np.linalg.norm(x, axis=1).mean() / r0 - 1.0
    theory = p * R * (1 - nu) / (2 * E * t)
    print(f"dR/R {dr:.5f}, membrane theory {theory:.5f} ({dr / theory - 1:+.1%}), speed left "
          f"{np.abs(b.stepper.v).max():.2e} m/s, newton {r.stats['newton_iterations']}")
    assert abs(dr / theory - 1.0) < 0.10
    assert np.abs(b.stepper.v).max() < 1e-3 * theory * R * 4.0


def test_keyed_pressure_is_followed_frame_by_frame():
    """Pressure keyed 0 -> 20 Pa over frames 1..7 then held: the radius follows the quasi-static membrane
    answer for each frame's pressure (the sphere's breathing period, 26 ms, is far below a frame)."""
    R, E, t, nu = 0.5, 1.0e6, 1.0e-3, 0.3
    V, T = icosphere(R, subdivisions=2)
    keys = np.concatenate([np.linspace(0.0, 20.0, 7), np.full(6, 20.0)])
    body = Body("ball", "cloth", V, T.astype(np.int32),
                material=Material(density=200.0, thickness=t, youngs_modulus=E, poisson_ratio=nu,
                                  bending_stiffness=0.0), pressure_samples=keys)
    b = MeshBackend(_scene([body], frames=13, fps=4.0, gravity=(0.0, 0.0, 0.0), newton_tol=1e-5))
    r0 = np.linalg.norm(V, axis=1).mean()
    grow = []
    for _ in range(12):
        b.advance()
        grow.append(np.linalg.norm(b.stepper.x[:len(V)], axis=1).mean() / r0 - 1.0)
    per_pa = R * (1 - nu) / (2 * E * t)
    print("dR/R per frame / theory:", np.round(np.array(grow) / (keys[1:] * per_pa), 3))
    assert abs(grow[2] / (keys[3] * per_pa) - 1.0) < 0.10       # frame 4: 10 Pa
    assert abs(grow[-1] / (20.0 * per_pa) - 1.0) < 0.10


def _hanging(scales=None, quads=4, quality="accurate"):
    """A 0.5 m sheet hanging from its pinned top row in gravity, 2 s at 24 fps with air drag to settle it;
    returns the final positions and the sheet's vertex count per row."""
    V, T, _ = grid_sheet((0.5, 0.5), (quads, quads), center=(0.0, 0.0, 0.0))
    V = V[:, [0, 2, 1]] + [0.0, 0.0, 1.0]
    T = np.ascontiguousarray(T[:, ::-1], np.int32)
    top = np.nonzero(V[:, 2] > 1.0 + 0.25 - 1e-9)[0].astype(np.int32)
    body = Body("sheet", "cloth", V, T, pin_indices=top, vertex_scales=scales,
                material=Material(density=200.0, thickness=1e-3, youngs_modulus=2e4, bending_stiffness=1e-6,
                                  air_drag=0.0 if quality == "fast" else 2.0, damping=0.0))
    b = MeshBackend(_scene([body], frames=49, solver_quality=quality))
    for _ in range(48):
        b.advance()
    return V, b.stepper.x[:len(V)]


def _height(x):
    return float(x[:, 2].max() - x[:, 2].min())


def test_vertex_maps_scale_stretch_stiffness_and_mass():
    """A soft sheet (E t = 20 N/m) hanging under its own weight stretches ~2% (w L / (2 E t)): ten times
    the stiffness stretches it about a tenth as far, twice the mass about twice as far."""
    V, x1 = _hanging()
    n = len(V)
    stiff = np.ones((n, 4))
    stiff[:, 0] = 10.0
    heavy = np.ones((n, 4))
    heavy[:, 2] = 2.0
    L = _height(V)
    s1 = _height(x1) - L
    s10 = _height(_hanging(stiff)[1]) - L
    s2 = _height(_hanging(heavy)[1]) - L
    print(f"stretch of the hanging sheet: {s1 * 1000:.2f} mm, x10 stiffness {s10 * 1000:.2f} mm "
          f"(ratio {s1 / s10:.2f}), x2 mass {s2 * 1000:.2f} mm (ratio {s2 / s1:.2f})")
    assert s1 > 0.004 and 8.5 < s1 / s10 < 11.5 and 1.85 < s2 / s1 < 2.15


def test_shrink_map_makes_a_free_sheet_smaller_and_fast_refuses_maps():
    """Rest size 0.8 everywhere, no gravity: the sheet settles at 0.8 of its size (StVK's rest state)."""
    V, T, _ = grid_sheet((0.5, 0.5), (4, 4), center=(0.0, 0.0, 0.0))
    sc = np.ones((len(V), 4))
    sc[:, 3] = 0.8
    body = Body("sheet", "cloth", V, np.ascontiguousarray(T, np.int32), vertex_scales=sc,
                material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5, bending_stiffness=1e-6))
    b = MeshBackend(_scene([body], frames=25, gravity=(0.0, 0.0, 0.0)))
    for _ in range(24):
        b.advance()
    ratio = np.ptp(b.stepper.x[:len(V), 0]) / np.ptp(V[:, 0])
    print(f"shrunk to {ratio:.4f} of its width (asked 0.8)")
    assert abs(ratio - 0.8) < 0.005
    with pytest.raises(SceneError) as e:
        MeshBackend(_scene([body], frames=3, solver_quality="fast"))
    assert e.value.obj == "sheet" and e.value.field == "vertex_scales" and "need the Converged solver" in str(e.value)


def _two_panels(gap=0.1, quads=4, size=0.3):
    """Two square panels in the plane z = 0, side by side along x with ``gap`` m between their facing edges,
    and a loose edge (seam) joining each vertex of one facing edge to its partner on the other."""
    V, T, _ = grid_sheet((size, size), (quads, quads), center=(0.0, 0.0, 0.0))
    n = len(V)
    left = V - [size / 2 + gap / 2, 0.0, 0.0]
    right = V + [size / 2 + gap / 2, 0.0, 0.0]
    verts = np.concatenate([left, right])
    tris = np.concatenate([T, T + n]).astype(np.int32)
    a = np.nonzero(np.isclose(left[:, 0], -gap / 2))[0]
    b = np.nonzero(np.isclose(right[:, 0], gap / 2))[0] + n
    a, b = a[np.argsort(left[a, 1])], b[np.argsort(right[b - n, 1])]
    face_edges = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
    edges = np.concatenate([face_edges, np.stack([a, b], 1)]).astype(np.int32)
    return verts, tris, edges, np.stack([a, b], 1)


def test_seam_energy_gradient_and_hessian_match_finite_differences():
    from solver_server.energies import seam
    from solver_server.energies.fem_common import hessian_pattern
    V, T, E, pairs = _two_panels()
    seams = seam.loose_edges(E, T)
    assert sorted(map(tuple, seams)) == sorted(map(tuple, np.sort(pairs, axis=1)))
    rng = np.random.default_rng(5)
    x = V + 0.01 * rng.normal(size=V.shape)
    k = np.linspace(1.0, 3.0, len(seams))
    n = len(V)
    G = lambda y: seam.seam_gradient(y, seams, k, n)
    _fd_check(lambda y: seam.seam_energy(y, seams, k), G, x)
    r, c = hessian_pattern(seams)
    H = _dense(r, c, seam.seam_hessian_elems(k).reshape(-1), 3 * n)
    for i in range(0, 3 * n, 11):
        _fd_check(lambda y: G(y)[i], lambda y: H[i], x)


def test_sewing_closes_two_panels_to_the_contact_gap_without_crossing():
    """Two 0.3 m panels 10 cm apart, seams along their facing edges, no gravity: the seams pull the edges
    together; the contact barrier stops them within the contact gap (1 mm) and nothing ever crosses."""
    V, T, E, pairs = _two_panels()
    body = Body("garment", "cloth", V, T, edges=E,
                material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5, bending_stiffness=1e-5,
                                  sewing=20.0, air_drag=1.0))
    b = MeshBackend(_scene([body], frames=49, gravity=(0.0, 0.0, 0.0)))
    gaps, dmin = [], np.inf
    for _ in range(48):
        r = b.advance()
        x = b.stepper.x[:len(V)]
        gaps.append(float(np.linalg.norm(x[pairs[:, 0]] - x[pairs[:, 1]], axis=1).max()))
        if r.stats["min_distance"] is not None:
            dmin = min(dmin, r.stats["min_distance"])
    print(f"seam gap by frame: {np.round(gaps[::6], 4)} m; min contact distance {dmin:.2e} m")
    assert gaps[-1] < 2.5e-3 and dmin > 0.0
    # closed from their own sides: each seam's left vertex is still left of its partner (the edges met, not crossed)
    assert (x[pairs[:, 0], 0] < x[pairs[:, 1], 0]).all()


def test_pressure_on_an_open_cloth_is_refused_by_name():
    with pytest.raises(SceneError) as e:
        MeshBackend(_scene([_sheet(pressure=10.0)], frames=3))
    assert e.value.obj == "sheet" and e.value.field == "pressure" and "closed" in str(e.value)


@pytest.mark.parametrize("what", ["air_drag", "pressure", "field", "sewing"])
def test_fast_solver_refuses_air_fields_and_pressure_by_name(what):
    V, T = icosphere(0.3, subdivisions=1)
    mat = {"air_drag": Material(air_drag=0.5), "pressure": Material(pressure=10.0), "field": Material(),
           "sewing": Material(sewing=5.0)}[what]
    body = Body("ball", "cloth", V, T.astype(np.int32), material=mat)
    fields = [_field("wind", 1.0, 3)] if what == "field" else []
    with pytest.raises(SceneError) as e:
        MeshBackend(_scene([body], fields, frames=3, solver_quality="fast"))
    assert "needs the Converged solver" in str(e.value) or "need the Converged solver" in str(e.value)
    assert e.value.obj == ("wind_field" if what == "field" else "ball")
