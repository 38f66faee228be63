"""3D MLS-MPM / APIC solver for granular and continuum bodies (sand, snow, water, jelly, mud).

Modules, one concept each:
``kernels`` quadratic B-spline weights; ``linalg3`` 3x3 SVD; ``materials`` presets, packed
parameters and constitutive return mappings; ``grid`` the dense background grid and particle
binning; ``transfer`` P2G / grid update / G2P kernels; ``sdf`` collider signed distance fields;
``boundary`` wall and collider boundary conditions; ``inside`` ray-parity inside tests;
``sampling`` particles inside closed meshes;
``timestep`` the CFL rule; ``memory`` the up-front memory estimate; ``solver`` one simulation.
See docs/mpm.md.
"""
