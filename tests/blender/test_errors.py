"""Each user error gives a clear message naming the object and the fix, and nothing baked is lost."""
import socket

import bpy
import numpy as np
import pytest

from conftest import addon
from helpers import cube, mesh_object, plane


def _bake_error() -> str:
    with pytest.raises(RuntimeError) as info:
        bpy.ops.clearance.bake()
    return str(info.value)


def _closed_port_address() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"tcp://127.0.0.1:{port}"


def test_no_object_with_a_role(blender, tmp_path):
    bpy.context.scene.clearance.cache_folder = str(tmp_path)
    cube("box")
    msg = _bake_error()
    assert "No object has a Clearance role" in msg
    assert bpy.context.scene.clearance.last_error.startswith("No object has a Clearance role")


def test_nan_vertex_names_the_object(blender):
    ob = cube("broken")
    co = np.empty(24, np.float32)
    ob.data.vertices.foreach_get("co", co)
    co[5] = np.nan
    ob.data.vertices.foreach_set("co", co)
    ob.clearance.role = "SOLID"
    msg = _bake_error()
    assert "broken" in msg and "NaN" in msg and "vertex 1" in msg


def test_open_mesh_as_solid(blender):
    ob = plane("sheet")
    ob.clearance.role = "SOLID"
    msg = _bake_error()
    assert "sheet" in msg and "closed surface" in msg and "Cloth" in msg


def test_degenerate_faces_in_a_solid(blender):
    # A tetrahedron plus a zero-area sliver glued on one face keeps the surface closed.
    verts = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (0.5, 0.5, 0)]
    faces = [(0, 2, 1), (0, 1, 3), (1, 2, 3), (0, 3, 2)]
    ob = mesh_object("tet", verts, faces)
    ob.clearance.role = "SOLID"
    assert addon("export").export_scene(bpy.context).scene.bodies[0].name == "tet"  # a clean tet passes
    bpy.data.objects.remove(ob)
    faces = [(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 4, 1), (1, 4, 2), (2, 4, 0)]  # flat bottom split at (0.5,0.5,0)
    ob = mesh_object("sliver", verts, faces)
    ob.clearance.role = "SOLID"
    msg = _bake_error()
    assert "sliver" in msg and "zero area" in msg


def test_unreachable_server(blender, tmp_path):
    ob = cube("box")
    ob.clearance.role = "SOLID"
    s = bpy.context.scene.clearance
    s.cache_folder = str(tmp_path)
    s.server_address = _closed_port_address()
    addon("preferences").get().timeout = 0.5
    msg = _bake_error()
    assert "Cannot reach the Clearance server" in msg and s.server_address in msg
    assert not s.is_baking


def test_version_mismatch(blender, server):
    from protocol.errors import VersionMismatch
    bpy.context.scene.clearance.server_address = server.address
    with pytest.raises(VersionMismatch) as info:
        addon("operators").connect(bpy.context, protocol_version=(99, 0))
    msg = str(info.value)
    assert "99.0" in msg and "1." in msg and "same Clearance release" in msg


def test_unsaved_file_with_relative_cache(blender):
    ob = cube("box")
    ob.clearance.role = "SOLID"
    msg = _bake_error()
    assert "not saved" in msg and "Cache Folder" in msg
