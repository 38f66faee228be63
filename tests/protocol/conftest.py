"""Fixtures of the protocol tests: small scenes and deep comparison of messages/scenes."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from scenes import make_scene  # noqa: E402


@pytest.fixture
def scene():
    return make_scene()
