"""Issue 20 items 7 and 8: whose cache folder it is, and a Cache Folder that cannot be one.

Two .blend files in one folder used to share ``//clearance_cache/``: baking ``shot_baked.blend``
silently overwrote the ``box.pc2`` that ``shot.blend`` plays. Now the default Cache Folder is
``//clearance_cache/<blend name>/``, and a bake that finds a folder recorded as another existing
.blend's refuses with one line naming both files (so does Free Bake). A Cache Folder that is a
file (or lies under one) is refused with one line and no traceback. Real bpy, a real server.
"""
import hashlib
import os

import bpy
import pytest

from conftest import addon
from helpers import cube, make_linear


def _shot(server, frames):
    """A fresh scene with one keyed cube (backend none) baking to ``server``."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames
    ob = cube("box", size=1.0, location=(0, 0, 1))
    ob.clearance.role = "SOLID"
    ob.keyframe_insert("location", index=2, frame=frames[0])
    ob.location.z = 2.0
    ob.keyframe_insert("location", index=2, frame=frames[1])
    make_linear(ob)
    s = scene.clearance
    s.backend = "none"
    s.server_address = server.address
    return s


def _digest(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_each_blend_gets_its_own_cache_folder_by_default(blender, server, tmp_path):
    s = _shot(server, (1, 5))
    assert s.cache_folder == "//clearance_cache/"
    shot = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=shot)
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    first = tmp_path / "clearance_cache" / "shot" / "box.pc2"
    assert first.is_file()
    before = _digest(first)
    bpy.context.scene.frame_end = 12                         # "Save As" a variant and bake it longer
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot_baked.blend"))
    assert bpy.ops.clearance.bake() == {"FINISHED"}, bpy.context.scene.clearance.last_error
    assert (tmp_path / "clearance_cache" / "shot_baked" / "box.pc2").is_file()
    assert _digest(first) == before                          # shot.blend still plays its own 5 frames
    mod = bpy.data.objects["box"].modifiers["Clearance Cache"]
    assert os.path.normpath(bpy.path.abspath(mod.filepath)).endswith(os.path.join("shot_baked", "box.pc2"))


def test_a_folder_of_another_blend_is_refused_naming_both(blender, server, tmp_path):
    shared = str(tmp_path / "farm_cache")
    s = _shot(server, (1, 5))
    s.cache_folder = shared
    shot_010 = str(tmp_path / "shot_010.blend")
    bpy.ops.wm.save_as_mainfile(filepath=shot_010)
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    pc2 = os.path.join(shared, "box.pc2")
    before = _digest(pc2)
    shot_020 = str(tmp_path / "shot_020.blend")
    bpy.ops.wm.save_as_mainfile(filepath=shot_020)           # the same objects, the same Cache Folder
    with pytest.raises(RuntimeError):                        # the operator reports an ERROR
        bpy.ops.clearance.bake()
    err = bpy.context.scene.clearance.last_error
    assert shot_010 in err and shot_020 in err and "\n" not in err, err
    assert _digest(pc2) == before
    with pytest.raises(RuntimeError):                        # nor may Free Bake remove shot_010's caches
        bpy.ops.clearance.free_bake()
    assert os.path.isfile(pc2) and _digest(pc2) == before
    os.remove(shot_010)                                      # the owner is gone: the folder is free again
    assert bpy.ops.clearance.bake() == {"FINISHED"}, bpy.context.scene.clearance.last_error


@pytest.mark.parametrize("where", ["folder", "parent"])
def test_a_cache_folder_that_is_a_file_is_one_line_without_traceback(blender, server, tmp_path, capfd, where):
    s = _shot(server, (1, 3))
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a user's file")
    s.cache_folder = str(blocker) if where == "folder" else str(blocker / "cache")
    with pytest.raises(RuntimeError):
        bpy.ops.clearance.bake()
    err = bpy.context.scene.clearance.last_error
    assert err and "is a file, not a folder" in err and str(blocker) in err and "\n" not in err, err
    assert "Traceback" not in capfd.readouterr().err
    assert blocker.read_text() == "a user's file"
    assert addon("writeback").OWNER_FILE not in os.listdir(tmp_path)


def test_free_bake_removes_only_the_servers_own_files(blender, server, tmp_path):
    """Issue 20 item 11: Free Bake deleted the whole server/ subfolder of the cache folder, with any
    file a user had put there. It now removes only the names the bake writes (protocol.cache_layout);
    a user's files and anything behind a symbolic link stay, byte for byte and mtime."""
    s = _shot(server, (1, 5))
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    srv = tmp_path / "clearance_cache" / "shot" / "server"
    assert (srv / "scene.json").is_file() and (srv / "frames" / "frame_00005.npz").is_file()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "frame_00001.npz").write_bytes(b"a user's file with a bake's name")
    mine = {srv / "notes.txt": b"my notes", srv / "frames" / "reference.png": b"\x89PNG", outside / "frame_00001.npz": None}
    for p, data in mine.items():
        if data is not None:
            p.write_bytes(data)
    (srv / "linked").symlink_to(outside, target_is_directory=True)
    before = {p: (_digest(p), os.stat(p).st_mtime_ns) for p in mine}
    assert bpy.ops.clearance.free_bake() == {"FINISHED"}
    assert {p: (_digest(p), os.stat(p).st_mtime_ns) for p in mine} == before      # user files touched: 0
    assert (srv / "linked").is_symlink()
    assert sorted(p.name for p in srv.iterdir()) == ["frames", "linked", "notes.txt"]
    assert sorted(p.name for p in (srv / "frames").iterdir()) == ["reference.png"]
    # with nothing of the user's left in it, the server folder goes entirely
    for p in (srv / "notes.txt", srv / "frames" / "reference.png", srv / "linked"):
        p.unlink()
    assert bpy.ops.clearance.bake() == {"FINISHED"}, s.last_error
    assert bpy.ops.clearance.free_bake() == {"FINISHED"}
    assert not srv.exists()
