"""Fixtures of the stiff-body tests."""
import pytest

from solver_server.model import planar_merge


@pytest.fixture
def dense_mesh_shapes(monkeypatch):
    """The Mesh collision shape without the flat-region merge (model/planar_merge.py): every triangle of a
    subdivided cube stays a contact primitive. For the tests of the dense contact path's kernels, which need
    many pairs on few bodies."""
    monkeypatch.setattr(planar_merge, "MERGE", False)
