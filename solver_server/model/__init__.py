"""The scene as the solvers see it: one global system of every simulated vertex and affine body.

``system`` builds it from a protocol Scene (positions, masses, elastic elements, collision surface,
pins and keyframed colliders, bodies); ``dof_map`` maps the degrees of freedom (free vertices and the
12 rows of every affine body) to vertex positions; ``tetmesh`` fills closed surfaces with tetrahedra
(``winding`` decides inside from outside); ``checks`` refuses degenerate input with a message naming
the object; ``primitives`` makes the test and demo shapes. Used by every solver; imports only the
shared ``energies`` and ``bodies`` packages.
"""
