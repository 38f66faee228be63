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
echo "setup: installing Clearance and its test tools (bpy 5.0.1, numba, scipy, pyzmq, msgpack, pytest, pytest-xdist, hypothesis, ipctk; CHOLMOD if apt can)"
.venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v "is ignored" || true
# setuptools warns about every editable install ("Editable installation ... be careful with folders"), nine
# lines a newcomer takes for an error; the install is what we want, so that one warning is silenced
.venv/bin/python -W "ignore:Editable installation:UserWarning" -m pip install --quiet -e ".[test]" 2>&1 \
  | grep -v "is ignored" || true
.venv/bin/python -c "import bpy, numba, scipy, zmq, msgpack, pytest, xdist, hypothesis, solver_server, protocol" \
  || { echo "setup: installation failed (see pip output above)" >&2; exit 1; }

# Optional: CHOLMOD (SuiteSparse) through scikit-sparse, the Accurate solver's sparse Cholesky (2-3x faster
# factorisation than SuperLU on its Newton systems, docs/solver.md). It builds against Debian's
# libsuitesparse-dev and needs an optimised BLAS (OpenBLAS, serial: the 2 cores are shared; with the
# reference BLAS CHOLMOD is slower than SuperLU and the solver does not use it). Best effort: without apt,
# root or a compiler the solver falls back to SuperLU and says so in one line.
if ! .venv/bin/python -c "import sksparse.cholmod" >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
  need=""
  dpkg -s libsuitesparse-dev >/dev/null 2>&1 || need=" libsuitesparse-dev"
  dpkg -l 'libopenblas0*' 2>/dev/null | grep -q '^ii' || need="$need libopenblas0-serial"
  if [ -n "$need" ]; then
    if command -v apt-get >/dev/null 2>&1 && { [ -z "$SUDO" ] || sudo -n true 2>/dev/null; }; then
      echo "setup: installing$need with apt-get, for CHOLMOD"
      { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $need; } >/dev/null 2>&1 \
        || echo "setup: apt-get install$need failed; the Accurate solver will use SuperLU"
    else
      echo "setup: no apt-get (or no root): skipping CHOLMOD (needs$need); the Accurate solver will use SuperLU"
    fi
  fi
  if [ -f /usr/include/suitesparse/cholmod.h ]; then
    # 0.5 needs SuiteSparse 7; Debian 12 ships 5.12
    .venv/bin/python -m pip install --quiet "scikit-sparse>=0.4.12,<0.5" >/dev/null 2>&1 \
      || echo "setup: scikit-sparse did not build; the Accurate solver will use SuperLU"
  fi
fi
echo "$want" > "$stamp"
echo "setup: done"
