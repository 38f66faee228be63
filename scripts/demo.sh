#!/usr/bin/env bash
# Set up (if needed) and run the main job headless: build a scene in Blender (bpy 5.0.1), bake it
# with Clearance through a local solver server, save out/demo/clearance_demo.blend with its .pc2
# caches and render a few frames to out/demo/frame_*.png. Arguments go to scripts/demo.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/demo.py "$@"
