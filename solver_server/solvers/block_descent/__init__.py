"""The "fast" solver family: per-vertex block descent on the same incremental potential as the
Newton IPC solver (solver_server/), sharing its scene build, energies, contact distances,
barrier and lagged friction.

One implicit-Euler step minimises E(x) = 1/2 |x - y|_M^2 / h^2 + Psi_el(x) + kappa B(x) + D_f(x)
(y = x^n + h v^n + h^2 g) by Gauss-Seidel sweeps over graph colours: each vertex takes a 3x3
Newton step on E restricted to its own three coordinates (Vertex Block Descent, Chen et al. 2024;
the per-vertex Newton of PBNG, seed 001), vertices of one colour in parallel, with Chebyshev
acceleration across sweeps. No global linear solve.

Penetration-free by construction (docs/solver.md, "Fast solver: why it cannot intersect"): after
every contact detection each vertex may move only inside a ball whose radius is a fixed fraction
of its distance to every non-incident primitive (conservative per-vertex displacement bounds, as
in Offset Geometric Contact, Chen et al. 2025); tetrahedra are kept positive by an exact per-vertex
volume test (a tet's volume is affine in any one of its vertices).

Modules: incidence (vertex -> element lists, colouring), vertex_elastic (per-vertex gradients and
3x3 Hessians of every elastic term), vertex_contact (barrier and friction per vertex), bounds
(the displacement bounds), sweep (the colour sweep kernel), stepper (one time step).
"""
