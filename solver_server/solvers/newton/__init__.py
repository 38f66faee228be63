"""Newton IPC (the Accurate solver): ``integrator`` one implicit step as the minimisation of the
incremental potential (inertia + elasticity + barrier + lagged friction, pins by penalty), ``newton``
the projected Newton loop with its CCD-filtered backtracking line search and stop test, ``linear_solve``
the sparse direct solve (CHOLMOD when present, else SuperLU), ``assembly`` the free-DOF sparsity pattern.
"""
