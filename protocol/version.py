"""The protocol version both sides announce in every envelope and in the handshake.

Rules (docs/protocol.md, "Versioning"): peers with a different MAJOR refuse each other at
the handshake; a MINOR bump only adds message types or optional fields.
"""
from __future__ import annotations

PROTOCOL_VERSION: tuple = (1, 7)
"""(major, minor). 1.1 added Settings.solver_quality (absent: "accurate", the only solver of 1.0).
1.2 added Settings.mpm_domain (absent: "box", walls) and Material.grain_size (absent: 0, sand
friction without the mu(I) rheology). 1.3 added Material.element (absent: "linear" tets; "quadratic"
asks for 10-node tets). 1.4 added Settings.integrator (absent: "implicit_euler"; "bdf2" asks for
the second-order BDF integrator that keeps bounces). 1.5 added Material.air_drag, Material.pressure and
Material.sewing (absent: 0), the scene's force_fields (absent: none), Body.field_weights (absent: all 1) , Body.pressure_samples
(absent: nil, the material's pressure throughout) and Body.vertex_scales (absent: nil, all 1). 1.6 added
Body.collision_shape (absent: "mesh", contact on the body's own triangles) with Body.shape_vertices and
Body.shape_triangles (absent: nil, the server builds the shape), Body.attach_to / Body.attach_indices
(absent: no attachment), Body.shrink_samples / Body.shrink_weights (absent: nil, the rest size fixed) and
Material.air_drag on solid, stiff and rod bodies (a 1.5 server read it on cloth only). 1.7 added
Body.world_matrices (absent: nil, results written in world space; the solver never reads it)."""

PROTOCOL_VERSION_STR: str = f"{PROTOCOL_VERSION[0]}.{PROTOCOL_VERSION[1]}"


def version_str(v) -> str:
    """"major.minor" for a (major, minor) pair."""
    return f"{int(v[0])}.{int(v[1])}"


def compatible(a, b) -> bool:
    """True when two (major, minor) versions can talk (same major)."""
    return int(a[0]) == int(b[0])
