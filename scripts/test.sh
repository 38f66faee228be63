#!/usr/bin/env bash
# Set up (if needed) and run the default test suite: unit kernels, physics scenes, protocol over
# real sockets, server processes, and the add-on inside real Blender (bpy 5.0.1).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m slow` for the long scenes.
# Tests run in CLEARANCE_TEST_WORKERS (default 2: the project's machines have 2 cores) pytest-xdist
# worker processes, each test module whole on one worker (module fixtures are computed once);
# CLEARANCE_TEST_WORKERS=0 runs them in this one process. A `-n N` among the arguments wins.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$#" -eq 0 ]; then
  set -- -m "not slow"
fi
workers=${CLEARANCE_TEST_WORKERS:-2}
if [ "$workers" != 0 ]; then
  set -- -n "$workers" --dist loadscope "$@"
fi
exec .venv/bin/python -m pytest -q --durations=25 "$@"
