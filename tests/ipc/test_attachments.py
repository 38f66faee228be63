"""Attachments (Body.attach_to / attach_indices; model/attachments.py, energies/attachment.py, contact/exclusions.py):
finite-difference checks of the coupling energy's gradient and Hessian (alone, as a step term, and pulled back
through a stiff body's affine map), the anchors reproducing the start positions, then physics: a cloth strip
whose edge lies on the face of a stiff box thrown sideways is carried with the box (its attached vertices stay
within micrometres of their carried targets), the whole system's momentum is the initial one plus M g t
(conservation: the coupling is internal) and no edge crosses a triangle anywhere else; a strip attached to a
keyframed collider follows it. The Preview solver refuses attachments by name."""
import dataclasses

import numpy as np
import pytest

from protocol.scene import Body, Material, Scene, SceneError, Settings
from solver_server.backends.mesh_backend import MeshBackend
from solver_server.energies import attachment
from solver_server.energies.air import lagged_frame
from solver_server.energies.fem_common import hessian_pattern
from solver_server.integrators.external import ExternalForces
from solver_server.model.primitives import box, grid_sheet
from solver_server.model.system import build_system


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


def _dense(rows, cols, vals, n):
    H = np.zeros((n, n))
    np.add.at(H, (np.asarray(rows), np.asarray(cols)), vals)
    return H


def test_coupling_energy_gradient_and_hessian_match_finite_differences():
    """Exact gradient everywhere; the Gauss-Newton Hessian is exact where the residual vanishes (what the stiff
    coupling holds) and with zero height, and off by the order of the residual elsewhere; always PSD."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(7, 3))
    elems = attachment.elements(np.array([0, 1], np.int32), np.array([[2, 3, 4], [4, 5, 6]], np.int32))
    bary = np.array([[0.2, 0.5, 0.3], [1.1, -0.05, -0.05]])
    c = np.array([3.0, 0.7])
    r, cc = hessian_pattern(elems)
    for height in (np.array([0.0, 0.0]), np.array([0.3, -0.2])):
        E = lambda y: attachment.attach_energy(y, elems, bary, height, c)
        G = lambda y: attachment.attach_gradient(y, elems, bary, height, c, 7)
        _fd_check(E, G, x)
        # on the attachment's manifold (r = 0): move each attached vertex onto its target
        x0 = x.copy()
        for _ in range(3):
            x0[[0, 1]] -= attachment.residuals(x0, elems, bary, height)
        assert np.abs(attachment.residuals(x0, elems, bary, height)).max() < 1e-14
        H = lambda y: _dense(r, cc, attachment.attach_hessian_elems(y, elems, bary, height, c).reshape(-1), 21)
        H0 = H(x0)
        for i in range(21):
            _fd_check(lambda y: G(y)[i], lambda y: H0[i], x0)
        assert np.linalg.eigvalsh(H(x)).min() > -1e-12


def _strip(name="Strip", x0=0.1, quads=(6, 2), size=(0.12, 0.04), attach_to="Box", **mat):
    V, T, _ = grid_sheet(size, quads, center=(0.0, 0.0, 0.0))
    V = V + [x0 + 0.5 * size[0], 0.0, 0.0]
    edge = np.nonzero(np.isclose(V[:, 0], x0))[0].astype(np.int32)
    m = {"density": 200.0, "thickness": 1e-3, "youngs_modulus": 1e5, "bending_stiffness": 1e-6, **mat}
    return Body(name, "cloth", V, np.ascontiguousarray(T, np.int32), material=Material(**m), attach_to=attach_to,
                attach_indices=edge)


def _box(role="stiff", velocity=(0.0, 0.0, 0.0), animation=None):
    V, T = box((0.2, 0.2, 0.2), center=(0.0, 0.0, 0.0), divisions=2)
    return Body("Box", role, V, T, material=Material(density=500.0), initial_velocity=velocity, animation=animation)


def _scene(bodies, frames=13, **st):
    st = {"solver_quality": "accurate", "frame_start": 1, "frame_end": frames, "fps": 24.0, **st}
    return Scene(Settings(**st), tuple(bodies))


def _targets(att, x):
    """Carried targets (A, 3) of the attachments at positions x (the anchor triangle's current normal)."""
    n, _ = lagged_frame(x, att.tris)
    return (att.bary[:, :, None] * x[att.tris]).sum(1) + att.height[:, None] * n


def test_anchors_reproduce_the_start_and_exclude_their_own_pairs():
    sysm = build_system(_scene([_strip(), _box()]))
    at = sysm.attachments
    assert len(at) == 3 and set(at.owner) == {"Strip"}
    np.testing.assert_allclose(_targets(at, sysm.x0), sysm.x0[at.verts], atol=1e-12)
    assert np.abs(at.height).max() < 1e-12         # the strip's edge lies on the box's face
    F = len(sysm.coll_faces)
    fid = {tuple(sorted(f)): i for i, f in enumerate(sysm.coll_faces.tolist())}
    for v, t in zip(at.verts, at.tris):
        assert int(v) * F + fid[tuple(sorted(t.tolist()))] in set(at.excl_pt.tolist())
    # why: the attached edge touches the face, and touching counts as intersecting, so without the exclusions
    # the start-frame check would refuse the scene and the barrier would be infinite there
    from solver_server.contact.terms import ContactTerms
    ct = ContactTerms(sysm, 1e-3)
    raw = ct.C.find_intersections(sysm.x0, ct.mesh.faces, ct.mesh.edges)
    assert len(raw) > 0 and len(ct.find_intersections(sysm.x0)) == 0
    c = ct.C.find_candidates(sysm.x0, ct.mesh, 1e-3)
    ct.kappa = 1.0
    raw_e, kept_e = ct.C.barrier_energy(sysm.x0, c, ct.mesh, 1e-3, 1.0), ct.energy(sysm.x0, ct.candidates(sysm.x0))
    print(f"start frame: {len(raw)} touching edge-triangle pairs, barrier {raw_e:.3g} J/kappa unfiltered, "
          f"{kept_e:.3g} with the exclusions; {len(c)} candidate pairs, {len(ct.candidates(sysm.x0))} kept")
    assert not (raw_e <= 1e-12) and kept_e == 0.0


def test_step_terms_pulled_back_through_a_stiff_body_match_finite_differences():
    """E(W z) of the coupling to a stiff body: W^T g and W^T H W (what the Newton potential assembles) against
    central differences in the body's affine DOFs and the strip's vertices."""
    sysm = build_system(_scene([_strip(), _box()], frames=3))
    ef = ExternalForces(sysm)
    D = sysm.dof_map
    rng = np.random.default_rng(5)
    z_n = D.sync(sysm.z0 + 0.002 * rng.normal(size=sysm.z0.shape))
    st = ef.for_step(D.to_x(z_n), D.to_x(z_n), 1.0 / 24, 2.0)
    z = D.sync(z_n + 0.002 * rng.normal(size=z_n.shape))
    free = np.nonzero(~D.is_slaved)[0]

    def E(zz):
        return st.energy(D.to_x(D.sync(zz.copy())))

    def G(zz):
        return D.pull_gradient(st.gradient(D.to_x(D.sync(zz.copy())))).reshape(-1, 3)

    rows = np.concatenate([np.arange(3 * k, 3 * k + 3) for k in free])
    g_fd = lambda zz: G(zz)
    _fd_check(E, lambda zz: np.where(np.repeat(D.is_slaved, 3), 0.0, g_fd(zz).ravel()), z, eps=1e-7, rtol=1e-4)
    H = _dense(*D.pull_coo(*st.hessian(D.to_x(z))), 3 * D.n_z)
    for i in rows[::4]:
        _fd_check(lambda zz: G(zz).ravel()[i], lambda zz: np.where(np.repeat(D.is_slaved, 3), 0.0, H[i]), z,
                  eps=1e-7, rtol=1e-4)


@pytest.mark.parametrize("role", ["stiff", "solid"])
def test_strip_is_carried_by_a_thrown_box_and_momentum_is_conserved(role):
    """The box (4 kg; stiff: an affine body, solid: a soft tet mesh) is thrown sideways at 1 m/s with the
    0.96 g strip at rest on its face: the strip is yanked along, its attached edge stays on the box's face,
    and the system's momentum is m_box v0 + M g t (implicit Euler keeps linear momentum exactly under
    internal forces)."""
    frames = 13
    sc = _scene([_strip(), _box(role=role, velocity=(0.0, 1.0, 0.0))], frames=frames)
    b = MeshBackend(sc)
    s = b.system
    at = s.attachments
    n_strip = len(sc.bodies[0].vertices)
    m_strip = s.mass[:n_strip]
    if role == "stiff":
        ab = s.affine
        row = int(ab.row0[0])
        m_box = float(ab.mbar[0, 0, 0])
        box_v = lambda: b.stepper.v[row]
        box_p = lambda: b.stepper.x[row]
    else:
        mb = s.mass[n_strip:]
        m_box = float(mb.sum())
        box_v = lambda: (mb[:, None] * b.stepper.v[n_strip:s.n]).sum(0) / m_box
        box_p = lambda: (mb[:, None] * b.stepper.x[n_strip:s.n]).sum(0) / m_box
    worst = 0.0
    for f in range(frames - 1):
        b.advance()
        x = s.dof_map.to_x(b.stepper.x)
        worst = max(worst, float(np.linalg.norm(x[at.verts] - _targets(at, x), axis=1).max()))
        assert b.contact.count_intersections(np.ascontiguousarray(x)) == 0
    t = (frames - 1) / 24.0
    v = b.stepper.v
    P = m_box * box_v() + (m_strip[:, None] * v[:len(m_strip)]).sum(0)
    P_law = m_box * np.array([0.0, 1.0, 0.0]) + (m_box + m_strip.sum()) * np.array([0.0, 0.0, -9.81]) * t
    x = s.dof_map.to_x(b.stepper.x)
    strip_dy = float(x[:len(m_strip), 1].mean() - sc.bodies[0].vertices[:, 1].mean())
    box_dy = float(box_p()[1])
    print(f"{role}: attached vertices within {worst * 1e6:.3f} um of their targets; momentum {P} vs m v0 + M g t {P_law}; "
          f"strip moved {strip_dy:.4f} m sideways, box {box_dy:.4f} m")
    assert worst < 1e-4
    np.testing.assert_allclose(P, P_law, atol=1e-6 * np.abs(P_law).max())
    assert abs(strip_dy / box_dy - 1.0) < 0.1


def test_strip_follows_a_keyframed_collider():
    frames = 7
    V, _ = box((0.2, 0.2, 0.2), divisions=2)
    anim = np.stack([V + [0.0, 0.02 * f, 0.0] for f in range(frames)]).astype(np.float32)
    sc = _scene([_strip(), _box(role="collider", animation=anim)], frames=frames, gravity=(0.0, 0.0, 0.0))
    b = MeshBackend(sc)
    at = b.system.attachments
    for _ in range(frames - 1):
        b.advance()
    x = b.stepper.x
    err = np.linalg.norm(x[at.verts] - _targets(at, x), axis=1).max()
    moved = x[at.verts, 1] - sc.bodies[0].vertices[at.verts - 0, 1]
    print(f"collider moved 0.12 m; attached vertices moved {moved.mean():.5f} m, {err * 1e6:.3f} um from targets")
    assert err < 1e-5 and np.allclose(moved, 0.12, atol=1e-4)


def test_preview_refuses_attachments_by_name():
    sc = _scene([_strip(), _box()], frames=3, solver_quality="fast")
    with pytest.raises(SceneError) as e:
        MeshBackend(sc)
    assert e.value.obj == "Strip" and e.value.field == "attach_to" and "Converged" in str(e.value)


def test_cape_on_a_resting_crate_drapes_over_its_edge_without_passing_through():
    """Everywhere but under the attached vertices the barrier holds: a cape attached along one column 2 mm
    above a stiff crate's top face (the crate resting on the ground) droops over the crate's edge under
    gravity and wraps its side; no edge crosses a triangle on any frame, and the part hanging below the top
    stays outside the crate's side face."""
    frames = 19
    V, T, _ = grid_sheet((0.3, 0.12), (15, 6), center=(0.1, 0.0, 0.203))
    att = np.nonzero(np.isclose(V[:, 0], -0.05))[0].astype(np.int32)
    cape = Body("Cape", "cloth", V, np.ascontiguousarray(T, np.int32),
                material=Material(density=200.0, thickness=1e-3, youngs_modulus=1e5, bending_stiffness=1e-6),
                attach_to="Crate", attach_indices=att)
    BV, BT = box((0.2, 0.2, 0.2), center=(0.0, 0.0, 0.101), divisions=2)
    crate = Body("Crate", "stiff", BV, BT, material=Material(density=500.0))
    GV, GT, _ = grid_sheet((1.0, 1.0), (2, 2), center=(0.0, 0.0, 0.0))
    ground = Body("Ground", "collider", GV, np.ascontiguousarray(GT, np.int32))
    b = MeshBackend(_scene([cape, crate, ground], frames=frames))
    at = b.system.attachments
    worst = 0.0
    for _ in range(frames - 1):
        b.advance()
        x = b.system.dof_map.to_x(b.stepper.x)
        assert b.contact.count_intersections(np.ascontiguousarray(x)) == 0
        worst = max(worst, float(np.linalg.norm(x[at.verts] - _targets(at, x), axis=1).max()))
    c = x[:len(V)]
    crate_x = b.system.body_positions(b.stepper.x)["Crate"][:, 0].max()   # its own vertices (x = A X + p)
    below = c[:, 2] < 0.19
    print(f"cape: {below.sum()} vertices hang below the crate's top, lowest z {c[:, 2].min():.3f} m, their "
          f"smallest x {c[below, 0].min():.4f} m vs the crate's side at {crate_x:.4f} m; attached within "
          f"{worst * 1e6:.2f} um")
    assert below.sum() >= 14 and c[below, 0].min() > crate_x and worst < 1e-4


def test_a_rod_hangs_from_a_thrown_stiff_box():
    """A rod (a strand of 11 vertices) whose end vertex is attached to the side of a stiff box thrown upwards
    and sideways is carried along; momentum m_box v0 + M g t holds and the end stays on the box."""
    frames = 13
    n = 10
    V = np.stack([0.1 + np.linspace(0.0, 0.15, n + 1), np.zeros(n + 1), np.zeros(n + 1)], 1)
    E = np.stack([np.arange(n), np.arange(1, n + 1)], 1).astype(np.int32)
    rod = Body("Hair", "rod", V, np.zeros((0, 3), np.int32), edges=E,
               material=Material(density=1000.0, thickness=2e-3, youngs_modulus=1e7, bending_stiffness=1e-5),
               attach_to="Box", attach_indices=np.array([0], np.int32))
    sc = _scene([rod, _box(velocity=(0.0, 1.0, 2.0))], frames=frames)
    b = MeshBackend(sc)
    s = b.system
    at, ab = s.attachments, s.affine
    row, m_box = int(ab.row0[0]), float(ab.mbar[0, 0, 0])
    worst = 0.0
    for _ in range(frames - 1):
        b.advance()
        x = s.dof_map.to_x(b.stepper.x)
        worst = max(worst, float(np.linalg.norm(x[at.verts] - _targets(at, x), axis=1).max()))
    v = b.stepper.v
    t = (frames - 1) / 24.0
    P = m_box * v[row] + (s.mass[:n + 1, None] * v[:n + 1]).sum(0)
    P_law = m_box * np.array([0.0, 1.0, 2.0]) + (m_box + s.mass[:n + 1].sum()) * np.array([0.0, 0.0, -9.81]) * t
    print(f"rod end within {worst * 1e6:.3f} um of its target; momentum {P} vs {P_law}")
    assert worst < 1e-4
    np.testing.assert_allclose(P, P_law, atol=1e-6 * np.abs(P_law).max())


def test_a_label_attached_to_a_swinging_cloth_flap_follows_its_deformation():
    """Cloth on cloth: a 0.1 m label lying 1.5 mm above a 0.4 m flap, every label vertex attached to the flap;
    the flap, pinned along one edge, swings down under gravity and bends, and the label follows the flap's
    deforming surface (its vertices within micrometres of their carried targets, 0 intersections)."""
    frames = 13
    V, T, _ = grid_sheet((0.4, 0.4), (8, 8), center=(0.2, 0.0, 0.0))
    pins = np.nonzero(np.isclose(V[:, 0], 0.0))[0].astype(np.int32)
    mat = Material(density=200.0, thickness=1e-3, youngs_modulus=1e5, bending_stiffness=1e-5)
    flap = Body("Flap", "cloth", V, np.ascontiguousarray(T, np.int32), material=mat, pin_indices=pins)
    LV, LT, _ = grid_sheet((0.1, 0.1), (3, 3), center=(0.27, 0.01, 0.0025))
    label = Body("Label", "cloth", LV, np.ascontiguousarray(LT, np.int32), material=mat, attach_to="Flap",
                 attach_indices=np.arange(len(LV), dtype=np.int32))
    b = MeshBackend(_scene([label, flap], frames=frames))
    at = b.system.attachments
    worst = 0.0
    for _ in range(frames - 1):
        b.advance()
        x = b.stepper.x
        assert b.contact.count_intersections(np.ascontiguousarray(x)) == 0
        worst = max(worst, float(np.linalg.norm(x[at.verts] - _targets(at, x), axis=1).max()))
    drop = float(LV[:, 2].mean() - x[:len(LV), 2].mean())
    print(f"label dropped {drop:.3f} m with the flap, its vertices within {worst * 1e6:.3f} um of their targets")
    assert drop > 0.1 and worst < 1e-4
