"""Affine body dynamics (ABD) for the ``stiff`` role: 12 DOFs per body (q = p, A), an orthogonality
energy keeping A a rotation, exact mass properties from the closed surface, and the map x = J q that
puts the bodies' surface vertices into the same barrier / CCD / friction system as FEM solids, cloth
and rods (solver_server/model/dof_map.py). See docs/solver.md, "Stiff bodies (ABD)"."""
from .inertia import MassProperties, mass_properties
from .orthogonality import RIGIDITY_TOL, STIFF_FLOOR, orth_energy, orth_gradient, orth_hessian, rigidity_error, stiffness
from .affine import AffineBodies, BodySpec, polar_rotation

__all__ = ["MassProperties", "mass_properties", "RIGIDITY_TOL", "STIFF_FLOOR", "orth_energy", "orth_gradient",
           "orth_hessian", "rigidity_error", "stiffness", "AffineBodies", "BodySpec", "polar_rotation"]
