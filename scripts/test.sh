#!/usr/bin/env bash
# Set up (if needed) and run the default test suite: unit kernels, physics scenes, protocol over
# real sockets, server processes, and the add-on inside real Blender (bpy 5.0.1).
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m slow` for the long scenes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "$#" -eq 0 ]; then
  set -- -m "not slow"
fi
exec .venv/bin/python -m pytest -q "$@"
