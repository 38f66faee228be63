"""The "fast" solver family: per-vertex block descent on the same incremental potential as the
Newton IPC solver (solvers/newton), sharing its scene build (model), energies, contact distances,
barrier and lagged friction (contact).

One implicit-Euler (or BDF-2) step minimises E(x) = 1/2 |x - y|_M^2 / h^2 + Psi_el(x) + kappa B(x) + D_f(x)
(y = x^n + h v^n + h^2 g) by Gauss-Seidel sweeps over graph colours: each vertex takes a 3x3
Newton step on E restricted to its own three coordinates (Vertex Block Descent, Chen et al. 2024;
the per-vertex Newton of PBNG, seed 001), vertices of one colour in parallel; stiff bodies are
12-DOF affine blocks swept after the vertex colours. No global linear solve (between batches of
sweeps, one pre-factorised stretching correction, global_correction.py). The sweep kernel can
apply Chebyshev acceleration across sweeps, but it is off (stepper.CHEBYSHEV_RHO = 0).

Penetration-free by construction (docs/solver.md, "Fast solver: why it cannot intersect"): after
every contact detection each surface vertex may move only inside a convex set around its position
at the detection: a ball of radius gamma r (r the broad-phase query distance) cut by one half-space
per nearby pair, u_ik . delta_i <= gamma s_k(x0) (s_k the pair's contact distance at the detection;
a vertex with MAX_CONSTRAINTS or more pairs gets the smaller ball of its MAX_CONSTRAINTS-th closest
pair instead), with gamma = 0.4 < 1/2 (conservative per-vertex displacement bounds, as in Offset
Geometric Contact, Chen et al. 2025; proof in bounds.py). Tetrahedra are kept positive by an exact
per-vertex volume test (a tet's volume is affine in any one of its vertices; one move keeps at least
VOLUME_KEEP of each incident tet's volume).

Modules: incidence (vertex -> element lists, colouring), vertex_elastic (per-vertex gradients and
3x3 Hessians of every elastic term), vertex_contact (barrier and friction per vertex), bounds
(detection and the admissible sets), sweep (the colour sweep kernel), stepper (one time step),
inertial_guess and collider_carry (CCD-limited start and keyframed colliders), global_correction,
free_translation, dihedral_cache; affine_block, body_kernels, body_plan, body_terms and joint_bodies
(stiff bodies as affine blocks).

The kernels take their arrays as named argument packs (typing.NamedTuple, which numba compiles like
plain tuples): EL incidence.Elements, SH dihedral_cache.DihedralCache, CT vertex_contact.ContactPack,
FR vertex_contact.FrictionPack, BD bounds.Bounds, AB affine_block.AffinePack, BL body_plan.BodyPairs;
each class's docstring lists its fields with units and shapes.
"""
