"""Shared pytest setup: the repository root on sys.path so tests import protocol/,
solver_server/ and blender_addon/ straight from the checkout."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
