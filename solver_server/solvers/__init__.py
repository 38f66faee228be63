"""The solvers, one package each; they share model/, energies/, contact/, bodies/ and integrators/ and
never import each other (tests/test_layout.py checks it):

- ``newton``: Newton IPC, implicit Euler (or BDF-2) as energy minimisation with a sparse direct solve,
  CCD-filtered line search and lagged friction (the Accurate solver);
- ``block_descent``: per-vertex (and per affine body) block descent on the same energy, inside
  per-vertex displacement bounds (the Fast solver);
- ``mpm``: MLS-MPM / APIC for sand, snow, water and jelly.
"""
