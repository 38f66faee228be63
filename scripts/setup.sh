#!/usr/bin/env bash
# Set up a development environment in .venv: Python 3.11 (bpy 5.0.1 is built for CPython 3.11),
# the solver server and protocol (editable), and the test tools including Blender as a Python module.
# Idempotent: a second run only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${CLEARANCE_PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
      PY=$(command -v "$cand"); break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "setup: Python 3.11 is required (bpy 5.0.1 wheels are cp311). Set CLEARANCE_PYTHON=/path/to/python3.11." >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi
stamp=.venv/.clearance-installed
want=$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup: .venv is up to date"
  exit 0
fi
echo "setup: installing Clearance and its test tools (bpy 5.0.1, numba, scipy, pyzmq, msgpack, pytest, ipctk)"
.venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v "is ignored" || true
.venv/bin/python -m pip install --quiet -e ".[test]" 2>&1 | grep -v "is ignored" || true
.venv/bin/python -c "import bpy, numba, scipy, zmq, msgpack, pytest, solver_server, protocol" \
  || { echo "setup: installation failed (see pip output above)" >&2; exit 1; }
echo "$want" > "$stamp"
echo "setup: done"
