"""Everything that runs the solvers for users, outside the numerics: ``server`` (the ZeroMQ server),
``jobs`` and ``runner`` (a bake in a child process), ``cache`` (a bake's folder: frames, state, lock),
``security`` (secrets, limits, throttles), ``bake`` (the headless ``clearance-server bake``), and the
numba kernel cache (``kernel_cache``, ``numba_locator``, ``warmup``, ``compile_progress``)."""
