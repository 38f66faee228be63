"""Time integration shared by the solvers: ``bdf2`` (the BDF-2 history and the gravity rows of the
incremental potential), ``damping`` (Rayleigh material damping of a step) and ``step_stats`` (what a
step reports: iterations, contacts, the smallest gap, whether it met its stop test)."""
