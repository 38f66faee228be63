"""Issue 20 item 4: a bake never writes outside its cache folder through a symbolic link.

A ``frames/`` linked to a user's folder let a re-bake overwrite 3 and add 1 of the user's files,
and two caches whose ``frames/`` pointed at one folder both reported "done" with each other's
frames. Now any link in the cache tree (the folder's entries, ``frames/``, ``state/``) is refused
with code ``cache`` and a one-line message naming it, before anything is written; writes create
their temporaries with O_NOFOLLOW inside the opened folder. Real server process, real folders;
every user file is checked byte for byte (and by mtime) afterwards.
"""
import hashlib
import os

import pytest

from protocol import Client, Done, RemoteError
from scenes import make_scene


def _snapshot(folder) -> dict:
    """name -> (sha256, mtime_ns) of every file in ``folder``."""
    out = {}
    for name in sorted(os.listdir(folder)):
        p = os.path.join(folder, name)
        with open(p, "rb") as f:
            out[name] = (hashlib.sha256(f.read()).hexdigest(), os.stat(p).st_mtime_ns)
    return out


def _bake(client, scene, cache, resume=False) -> Done:
    job = client.submit(scene, str(cache), resume)
    for ev in client.events(job, timeout=60.0):
        if isinstance(ev, Done):
            return ev


@pytest.fixture
def user_files(tmp_path):
    """A user's folder whose names collide with a cache's frames (the issue's case)."""
    d = tmp_path / "users_folder"
    d.mkdir()
    for n in ("frame_00003.npz", "frame_00004.npz", "frame_00005.npz", "notes.txt"):
        (d / n).write_bytes(b"user data " + n.encode())
    return d


def _refused(client, scene, cache, resume=False) -> RemoteError:
    with pytest.raises(RemoteError) as e:
        client.submit(scene, str(cache), resume)
    assert e.value.code == "cache" and e.value.field == "cache_dir"
    assert "symbolic link" in e.value.message and "\n" not in e.value.message
    return e.value


@pytest.mark.parametrize("resume", [False, True], ids=["rebake", "resume"])
def test_a_linked_frames_folder_is_refused_and_the_users_files_are_untouched(server, tmp_path, user_files, resume):
    scene = make_scene(n_frames=3)
    cache = tmp_path / "cache"
    with Client(server.address, timeout=30.0) as c:
        c.connect()
        assert _bake(c, scene, cache).state == "done"
        for f in os.listdir(cache / "frames"):
            os.remove(cache / "frames" / f)
        os.rmdir(cache / "frames")
        os.symlink(user_files, cache / "frames")
        before = _snapshot(user_files)
        err = _refused(c, scene, cache, resume)
        assert str(cache / "frames") in err.message
        assert _snapshot(user_files) == before
        c.ping()


def test_two_caches_linked_to_one_frames_folder(server, tmp_path):
    """The second cache's frames/ points at the first's: refused, the first keeps its frames."""
    with Client(server.address, timeout=30.0) as c:
        c.connect()
        a, b = tmp_path / "a", tmp_path / "b"
        assert _bake(c, make_scene(n_frames=3, seed=1), a).state == "done"
        b.mkdir()
        os.symlink(a / "frames", b / "frames")
        before = _snapshot(a / "frames")
        _refused(c, make_scene(n_frames=3, seed=2), b)
        assert _snapshot(a / "frames") == before


@pytest.mark.parametrize("where", ["frames/frame_00004.npz", "state/state_00003.npz", "stats.json",
                                   "frames/frame_00004.npz.tmp1"])
def test_a_link_anywhere_in_the_tree_is_refused(server, tmp_path, user_files, where):
    scene = make_scene(n_frames=3)
    cache = tmp_path / "cache"
    with Client(server.address, timeout=30.0) as c:
        c.connect()
        assert _bake(c, scene, cache).state == "done"
        target = cache / where
        if target.exists():
            os.remove(target)
        os.symlink(user_files / "notes.txt", target)
        before = _snapshot(user_files)
        for resume in (False, True):
            err = _refused(c, scene, cache, resume)
            assert str(target) in err.message
        assert _snapshot(user_files) == before


def test_bake_cli_refuses_a_linked_pc2(tmp_path, user_files):
    """``clearance-server bake --out``: a link among the outputs is refused too, nothing written."""
    import subprocess
    import sys
    from protocol.scenefile import save_scene
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    scene_file = tmp_path / "s.clrscene"
    save_scene(str(scene_file), make_scene(n_frames=3))
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(user_files / "notes.txt", out / "Ground.pc2")
    before = _snapshot(user_files)
    r = subprocess.run([sys.executable, "-m", "solver_server", "bake", str(scene_file), "--out", str(out)],
                       cwd=root, env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "symbolic link" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert _snapshot(user_files) == before
