"""IPC contact for Clearance: distances, barrier potential, broad phase, CCD, friction, intersections.

All heavy work runs in numba kernels; these functions only orchestrate. Positions are (n, 3)
float64 arrays (metres) of every collision-surface vertex of the scene. See docs/contact.md.
"""
from .mesh import CollisionMesh, edges_from_faces
from .broad_phase import Candidates, find_candidates, find_candidates_ccd
from .barrier import barrier, barrier_first_derivative, barrier_second_derivative
from .potential import (barrier_energy, barrier_gradient, barrier_hessian, barrier_derivatives, count_active, min_distance,
                        contact_distance_array)
from .stiffness import adaptive_kappa, update_kappa, kappa_bounds, bbox_diagonal
from .friction import FrictionSet, friction_setup, friction_energy, friction_gradient, friction_hessian
from .intersection import count_intersections, find_intersections
from .ccd import max_step_size, point_triangle_ccd_batch, edge_edge_ccd_batch
from .distance import (point_triangle_dist2_batch, edge_edge_dist2_batch, point_triangle_dist2_grad_hess,
                       edge_edge_dist2_grad_hess, point_edge_dist2_grad_hess, point_point_dist2_grad_hess)

__all__ = [
    "CollisionMesh", "edges_from_faces", "Candidates", "find_candidates", "find_candidates_ccd",
    "barrier", "barrier_first_derivative", "barrier_second_derivative",
    "barrier_energy", "barrier_gradient", "barrier_hessian", "barrier_derivatives", "count_active", "min_distance",
    "contact_distance_array", "count_intersections", "find_intersections", "FrictionSet", "friction_setup", "friction_energy", "friction_gradient", "friction_hessian", "adaptive_kappa", "update_kappa", "kappa_bounds", "bbox_diagonal", "max_step_size", "point_triangle_ccd_batch", "edge_edge_ccd_batch",
    "point_triangle_dist2_batch", "edge_edge_dist2_batch", "point_triangle_dist2_grad_hess",
    "edge_edge_dist2_grad_hess", "point_edge_dist2_grad_hess", "point_point_dist2_grad_hess",
]
