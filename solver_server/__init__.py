"""Clearance's solver server: the server process, jobs, scene building and the solvers.

Importing the package points numba's kernel cache at a folder keyed by the sources (see
:mod:`solver_server.runtime.kernel_cache`), so edited or upgraded sources never load stale kernels.
"""
from .runtime import kernel_cache as _kernel_cache

_kernel_cache.configure()
