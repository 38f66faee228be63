"""Scene builders and exact checks for the fast (block descent) scene tests. The bodies are the ones
of the Newton scene tests (tests/ipc), with Settings(solver_quality="fast")."""
import numpy as np

from protocol.scene import Body, Material, Scene, Settings
from solver_server.backends.mesh_backend import MeshBackend, intersecting_pairs
from solver_server.contact import point_triangle_dist2_batch
from solver_server.model.primitives import grid_sheet


def fast_scene(*bodies, **settings):
    return Scene(Settings(solver_quality="fast", **settings), tuple(bodies))


def fast_backend(sc, **kw):
    assert sc.settings.solver_quality == "fast"
    b = MeshBackend(sc, **kw)
    assert type(b.stepper).__name__ == "BlockDescentStepper"   # really the block-descent solver
    return b


def cloth(n, z, size=1.0, name="cloth", pins=None, **mat):
    V, T, E = grid_sheet((size, size), (n, n), center=(0, 0, z))
    m = dict(density=200.0, thickness=1e-3, youngs_modulus=1e5, bending_stiffness=1e-6, friction=0.3)
    m.update(mat)
    return Body(name, "cloth", V, T, E, material=Material(**m),
                pin_indices=np.zeros(0, np.int32) if pins is None else np.asarray(pins, np.int32))


def intersections(b):
    """Exact edge-triangle intersections of the whole collision surface (every body, colliders included)."""
    return b.contact.count_intersections(b.stepper.x)


def non_collider_intersections(b):
    """Intersecting body pairs other than collider/collider ones (what the start-frame check reports)."""
    ct = b.contact
    x = b.stepper.x
    hits = ct.C.find_intersections(x, ct.mesh.faces, ct.mesh.edges)
    roles = np.array([blk.role == "collider" for blk in b.system.blocks], bool)
    return intersecting_pairs(x, hits, ct.mesh, roles)


def block_of(b, name):
    return next(blk for blk in b.system.blocks if blk.name == name)


def points_vs_convex_mesh(P, V, F):
    """(inside (m,) bool, unsigned distance (m,)) of points P to the closed convex triangle mesh (V, F)
    with outward normals: inside iff on the inner side of every face plane; distance by brute force."""
    a, bb, c = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    nrm = np.cross(bb - a, c - a)
    side = np.einsum("fk,mfk->mf", nrm, P[:, None, :] - a[None])
    inside = (side < 0).all(axis=1)
    m, f = len(P), len(F)
    d2 = point_triangle_dist2_batch(np.repeat(P, f, 0), np.tile(a, (m, 1)), np.tile(bb, (m, 1)), np.tile(c, (m, 1)))
    return inside, np.sqrt(d2.reshape(m, f).min(axis=1))


def pairwise_distance_change(X, X_ref):
    """Largest change (m) of the distance between any two vertices: 0 for a rigid motion."""
    d = np.linalg.norm(X[:, None] - X[None], axis=2)
    d0 = np.linalg.norm(X_ref[:, None] - X_ref[None], axis=2)
    return float(np.abs(d - d0).max())
