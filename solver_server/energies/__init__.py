"""Elastic energies shared by every mesh solver, each with its gradient and PSD-projected Hessian.

``isotropic_models`` the hyperelastic models (stable neo-Hookean, ARAP...) as functions of singular
values; ``elastic_tet`` / ``elastic_tet10`` linear and quadratic tetrahedra; ``membrane`` cloth in-plane
stretch on triangles; ``shell_bending`` and ``bending`` (hinges and rods) out-of-plane bending;
``rod_stretch`` rod edges; ``fem_common`` the shared SVD and sparse scatter helpers; ``elasticity`` sums
them over a scene (ElasticTerms). Energies in J, positions in m, moduli in Pa. Nothing here knows of a
solver or of contact.
"""
