"""Issue 8: no request, file or fault crashes the server, loses a frame or touches a user's file.

Every test drives a real ``python -m solver_server serve`` subprocess over tcp loopback (or a
real ``clearance-server bake`` process) against real folders: bad ``cache_dir`` values,
damaged cache files, a FIFO named scene.json, a user's files beside the cache, two jobs into
one folder, a full and a read-only file system (a small tmpfs, when the tests run as root)
and a per-process file size limit (RLIMIT_FSIZE, any user).
"""
import contextlib
import json
import os
import resource
import subprocess
import sys
import uuid

import msgpack
import numpy as np
import pytest
import zmq

from protocol import Client, Done, Error, Frame, Hello, Ping, Pong, Progress, RemoteError, Welcome, save_scene
from protocol.codec import encode
from protocol.messages import decode_message, encode_message
from protocol.scenewire import scene_to_wire
from scenes import expected_positions, make_scene

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- helpers ------------------------------------------------------------------------------------
def _collect(client, job, timeout=30.0):
    frames, errors, done = {}, [], None
    for ev in client.events(job, timeout=timeout):
        if isinstance(ev, Frame):
            frames[ev.frame] = ev
        elif isinstance(ev, Error):
            errors.append(ev)
        elif isinstance(ev, Done):
            done = ev
    return frames, errors, done


def _bake(address, scene, folder, resume=False):
    """Submit and wait; returns (frames, errors, done)."""
    with Client(address, timeout=10.0) as c:
        c.connect()
        return _collect(c, c.submit(scene, str(folder), resume=resume))


def _refusal(address, scene, folder, resume=False):
    """The RemoteError with which the server refuses this submit (fails if it accepts)."""
    with Client(address, timeout=10.0) as c:
        c.connect()
        with pytest.raises(RemoteError) as e:
            c.submit(scene, str(folder), resume=resume)
        c.ping()   # and the server is still serving
        return e.value


class RawPeer:
    """A DEALER socket that sends hand-made frames (what a hostile or buggy client could send)."""

    def __init__(self, address):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        self.send(encode_message(Hello("raw", "0")))
        assert isinstance(self.reply(), Welcome)

    def send(self, frames):
        self.sock.send_multipart(frames)

    def reply(self, timeout_ms=10000):
        assert self.sock.poll(timeout_ms), "no reply: the server died or hangs"
        return decode_message(self.sock.recv_multipart())[0]

    def close(self):
        self.sock.close(0)
        self.ctx.term()


def _submit_frames(cache_dir, scene=None, resume=False):
    """A Submit whose cache_dir skips the client-side check (as a foreign client could send it)."""
    body = {"scene": scene_to_wire(scene or make_scene(n_frames=2)), "cache_dir": cache_dir, "resume": resume}
    return encode("submit", body, msg_id=uuid.uuid4().hex)


def _run_cli(*args, timeout=60, preexec_fn=None):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("CLEARANCE_SECRET", None)
    return subprocess.run([sys.executable, "-m", "solver_server", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=preexec_fn)


def _tmp_leftovers(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*.tmp[0-9]*"))


def _assert_frames_equal(folder, scene, frames):
    for f in frames:
        with np.load(folder / "frames" / f"frame_{f:05d}.npz") as z:
            exp = expected_positions(scene, f)
            assert [str(n) for n in z["names"]] == list(exp)
            for i, name in enumerate(exp):
                assert np.array_equal(z[f"p{i}"], exp[name])


# -- item 1: cache_dir is checked at the protocol boundary --------------------------------------
def test_bad_cache_dir_is_a_protocol_error_and_the_server_survives(server, tmp_path):
    root_link = tmp_path / "to_root"
    os.symlink("/", root_link)
    deep = str(tmp_path) + "/a" * 1000
    bad = {"NUL": str(tmp_path / "x\0y"), "deep": deep, "root": "/", "root via ..": "/tmp/../..",
           "root via a symlink": str(root_link)}
    peer = RawPeer(server.address)
    try:
        for what, cache_dir in bad.items():
            peer.send(_submit_frames(cache_dir))
            err = peer.reply()
            assert isinstance(err, Error), (what, err)
            assert err.code == "protocol" and err.field == "cache_dir", (what, err)
        peer.send(encode_message(Ping()))
        assert isinstance(peer.reply(), Pong)
    finally:
        peer.close()
    assert not os.path.exists("/scene.json") and not os.path.exists("/frames")
    assert not (tmp_path / "a").exists()
    _, errors, done = _bake(server.address, make_scene(n_frames=3), tmp_path / "ok")   # still bakes
    assert done.state == "done" and not errors


# -- item 10: hostile structure is a protocol error, not an internal one ---------------------------
def _with_shape(frames, shape):
    h = msgpack.unpackb(frames[0], raw=False, ext_hook=lambda c, d: msgpack.ExtType(c, d))
    h["arrays"][0]["shape"] = shape
    return [msgpack.packb(h, use_bin_type=True), b""]


def test_deep_nesting_and_impossible_shapes_get_code_protocol(server):
    nested = 1
    for _ in range(1000):
        nested = [nested]
    empty = encode("status", {"job_id": np.zeros((0, 3), np.float32)})
    cases = {
        "nested body": (encode("status", {"job_id": nested}), "job_id"),
        "nested scene": (encode("submit", {"scene": {"bodies": nested}, "cache_dir": "/tmp/x"}), "scene.bodies"),
        "shape [0, 2**63]": (_with_shape(empty, [0, 2 ** 63]), "arrays[0].shape"),
    }
    peer = RawPeer(server.address)
    try:
        for what, (frames, field) in cases.items():
            peer.send(frames)
            err = peer.reply()
            assert isinstance(err, Error) and err.code == "protocol", (what, err)
            assert err.field.startswith(field), (what, err)
        peer.send(encode_message(Ping()))
        assert isinstance(peer.reply(), Pong)
    finally:
        peer.close()


# -- item 2: damaged cache files ----------------------------------------------------------------
def _finished_bake(server, scene, folder):
    _, errors, done = _bake(server.address, scene, folder)
    assert done.state == "done" and not errors


@pytest.mark.parametrize("damage", ["invalid json", "json list", "not utf-8", "fifo", "directory"])
def test_resume_with_a_damaged_scene_json_names_it_and_the_server_survives(server, tmp_path, damage):
    scene = make_scene(n_frames=3)
    folder = tmp_path / "c"
    _finished_bake(server, scene, folder)
    sj = folder / "scene.json"
    sj.unlink()
    if damage == "invalid json":
        sj.write_text('{"scene_hash": ')
    elif damage == "json list":
        sj.write_text("[1, 2, 3]")
    elif damage == "not utf-8":
        sj.write_bytes(b'{"scene_hash": "\xff\xfe"}')
    elif damage == "fifo":
        os.mkfifo(sj)
    else:
        sj.mkdir()
    err = _refusal(server.address, scene, folder, resume=True)
    assert err.code == "cache" and err.field == "cache_dir", err
    assert str(sj) in err.message, err.message
    err = _refusal(server.address, scene, folder)   # nor is a fresh bake allowed to replace it
    assert err.code == "cache" and str(sj) in err.message


def test_bake_resume_with_a_fifo_scene_json_does_not_hang(tmp_path):
    scene = make_scene(n_frames=3)
    save_scene(tmp_path / "s.clrscene", scene)
    out = tmp_path / "out"
    assert _run_cli("bake", str(tmp_path / "s.clrscene"), "--out", str(out)).returncode == 0
    (out / "scene.json").unlink()
    os.mkfifo(out / "scene.json")
    r = _run_cli("bake", str(tmp_path / "s.clrscene"), "--out", str(out), "--resume", timeout=120)
    assert r.returncode == 1
    assert str(out / "scene.json") in r.stderr and "not a regular file" in r.stderr, r.stderr


def _bake_with_progress(address, scene, folder, resume=False):
    """Submit and wait; returns (frames, errors, done, progress messages)."""
    frames, errors, done, notes = {}, [], None, []
    with Client(address, timeout=10.0) as c:
        c.connect()
        for ev in c.events(c.submit(scene, str(folder), resume=resume), timeout=30.0):
            if isinstance(ev, Frame):
                frames[ev.frame] = ev
            elif isinstance(ev, Error):
                errors.append(ev)
            elif isinstance(ev, Done):
                done = ev
            elif isinstance(ev, Progress) and ev.message:
                notes.append(ev.message)
    return frames, errors, done, notes


@pytest.mark.parametrize("which", ["state", "frame"])
@pytest.mark.parametrize("damage", [b"", b"PK\x03\x04 truncated zip", b"\x93NUMPY garbage"])
def test_resume_past_a_damaged_file_falls_back_to_the_last_good_state(server, tmp_path, which, damage):
    """Issue 20 item 10: a damaged state (or frame) used to fail every Resume on the same file until the
    user deleted it. Resume now continues from the last frame before it with a usable state, says so,
    bakes the rest again and replaces the damaged file; the result equals an uninterrupted bake."""
    scene = make_scene(n_frames=6)
    s = scene.settings
    folder = tmp_path / "c"
    _finished_bake(server, scene, folder)
    for f in (s.frame_end - 1, s.frame_end):          # as if the bake had stopped two frames early
        (folder / "frames" / f"frame_{f:05d}.npz").unlink()
        (folder / "state" / f"state_{f:05d}.npz").unlink()
    last = s.frame_end - 2
    bad = folder / ("state" if which == "state" else "frames") / f"{which}_{last:05d}.npz"
    bad.write_bytes(damage)
    frames, errors, done, notes = _bake_with_progress(server.address, scene, folder, resume=True)
    assert errors == [] and done.state == "done", (errors, done)
    note = [m for m in notes if "damaged" in m]
    assert note == [f"{bad} is damaged: resuming after frame {last - 1} instead of {last}; frames {last}-{last} "
                    "are baked again"], notes
    assert sorted(frames) == list(range(s.frame_start, s.frame_end + 1))
    _assert_frames_equal(folder, scene, range(s.frame_start, s.frame_end + 1))
    assert bad.read_bytes() != damage
    assert f"clearance-server: job {done.job_id[:8]}: {note[0]}" in server.stderr_text()
    # and a second Resume of the finished bake is a plain one
    frames, errors, done, notes = _bake_with_progress(server.address, scene, folder, resume=True)
    assert errors == [] and done.state == "done" and not [m for m in notes if "damaged" in m]


def test_resume_with_no_usable_state_says_so_and_bakes_from_the_start(server, tmp_path):
    scene = make_scene(n_frames=4)
    s = scene.settings
    folder = tmp_path / "c"
    _finished_bake(server, scene, folder)
    for f in range(s.frame_start + 1, s.frame_end + 1):
        (folder / "state" / f"state_{f:05d}.npz").unlink()
    bad = folder / "state" / f"state_{s.frame_start:05d}.npz"
    bad.write_bytes(b"PK\x03\x04 truncated zip")
    user = folder / "notes.txt"
    user.write_text("mine")
    frames, errors, done, notes = _bake_with_progress(server.address, scene, folder, resume=True)
    assert errors == [] and done.state == "done", (errors, done)
    assert f"cannot resume: {bad} is damaged and no earlier frame has a usable state; baking from the start" in notes
    _assert_frames_equal(folder, scene, range(s.frame_start, s.frame_end + 1))
    assert user.read_text() == "mine"          # starting over removes only the bake's own files


# -- item 3: the bake touches only its own files -------------------------------------------------
def test_rebake_keeps_the_users_files_and_removes_only_its_own_temporaries(server, tmp_path):
    folder = tmp_path / "c"
    _finished_bake(server, make_scene(n_frames=3), folder)
    user = {"notes.tmpl": "my template", "report.tmp.txt": "my report", "x.tmp": "mine",
            "frames/frame_final.npz.bak": "mine too", "state/README": "mine"}
    for name, text in user.items():
        (folder / name).write_text(text)
    ours = ["scene.json.tmp4242", "stats.json.tmp17", "frames/frame_00009.npz.tmp4242",
            "state/state_00003.npz.tmp99"]
    for name in ours:
        (folder / name).write_bytes(b"half written")
    scene = make_scene(n_frames=4, seed=3)
    _, errors, done = _bake(server.address, scene, folder)       # a fresh bake: clears its old files
    assert done.state == "done" and not errors
    for name, text in user.items():
        assert (folder / name).read_text() == text, name
    assert not any((folder / name).exists() for name in ours)
    assert json.loads((folder / "scene.json").read_text())["frame_end"] == scene.settings.frame_end
    _assert_frames_equal(folder, scene, range(scene.settings.frame_start, scene.settings.frame_end + 1))


@pytest.mark.parametrize("resume", [False, True])
def test_a_folder_that_is_not_a_clearance_cache_is_refused_untouched(server, tmp_path, resume):
    users = tmp_path / "project"
    users.mkdir()
    (users / "notes.txt").write_text("do not touch")
    (users / "stats.json").write_text('{"my": "statistics"}')
    err = _refusal(server.address, make_scene(n_frames=3), users, resume=resume)
    assert err.code == "cache" and err.field == "cache_dir" and str(users) in err.message, err
    assert "notes.txt" in err.message or "stats.json" in err.message
    assert sorted(p.name for p in users.iterdir()) == ["notes.txt", "stats.json"]
    assert (users / "stats.json").read_text() == '{"my": "statistics"}'
    foreign = tmp_path / "other_tool"
    foreign.mkdir()
    (foreign / "scene.json").write_text('{"scene": "of another program"}')
    err = _refusal(server.address, make_scene(n_frames=3), foreign, resume=resume)
    assert err.code == "cache" and str(foreign / "scene.json") in err.message, err
    assert (foreign / "scene.json").read_text() == '{"scene": "of another program"}'
    assert sorted(p.name for p in foreign.iterdir()) == ["scene.json"]


def test_bake_cli_refuses_a_users_folder(tmp_path):
    scene = make_scene(n_frames=3)
    save_scene(tmp_path / "s.clrscene", scene)
    out = tmp_path / "home"
    out.mkdir()
    (out / "stats.json").write_text("my numbers")
    r = _run_cli("bake", str(tmp_path / "s.clrscene"), "--out", str(out))
    assert r.returncode == 1 and "not a Clearance cache folder" in r.stderr, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["stats.json"]
    assert (out / "stats.json").read_text() == "my numbers"


# -- item 7: one job per cache folder ------------------------------------------------------------
def test_a_second_job_into_the_same_folder_is_refused_while_the_first_runs(server_factory, tmp_path):
    srv = server_factory("--workers", "2", env={"CLEARANCE_STATE_DIR": str(tmp_path / "state")})
    folder = tmp_path / "c"
    link = tmp_path / "link_to_c"
    os.symlink(folder, link)
    slow = make_scene(n_frames=4, debug_frame_delay=60.0)
    save_scene(tmp_path / "s.clrscene", make_scene(n_frames=3))
    with Client(srv.address, timeout=10.0) as c:
        c.connect()
        job = c.submit(slow, str(folder))
        for ev in c.events(job, timeout=30.0):   # the job runs and holds the folder
            if isinstance(ev, Frame):
                break
        for other in (folder, link, str(folder) + "/./", str(tmp_path / "x" / ".." / "c")):
            with pytest.raises(RemoteError) as e:
                c.submit(make_scene(n_frames=3), str(other))
            assert e.value.code == "busy" and e.value.field == "cache_dir", (other, e.value)
        # another process (a `clearance-server bake`) is refused too, through the folder lock
        r = _run_cli("bake", str(tmp_path / "s.clrscene"), "--out", str(link))
        assert r.returncode == 1 and "another job is baking into" in r.stderr, r.stderr
        # and so is another server
        srv2 = server_factory(env={"CLEARANCE_STATE_DIR": str(tmp_path / "state2")})
        err = _refusal(srv2.address, make_scene(n_frames=3), link)
        assert err.code == "busy" and err.field == "cache_dir", err
        c.cancel(job)
        assert _collect(c, job)[2].state == "cancelled"
        # once the first job has ended, the folder is free again
        job = c.submit(make_scene(n_frames=3), str(link), resume=False)
        _, errors, done = _collect(c, job)
        assert done.state == "done" and not errors


# -- item 8: disk full, read-only, file size limit ------------------------------------------------
@contextlib.contextmanager
def _tmpfs(path, size):
    """A tmpfs of ``size`` mounted at ``path`` (skips the test when mounting is not allowed)."""
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _big_scene(n_frames):
    return make_scene(n_frames=n_frames, n_vertices=3000)


def test_disk_full_names_the_file_keeps_every_frame_and_resume_completes(server, tmp_path):
    scene = _big_scene(12)                 # ~72 KB a frame + a tiny state: about 1 MB in all
    s = scene.settings
    with _tmpfs(tmp_path / "small", "1m") as disk:
        filler = disk / "filler.bin"       # leave room for a few frames only
        filler.write_bytes(b"\0" * (1024 * 1024 - 5 * 80 * 1024))
        folder = disk / "c"
        frames, errors, done = _bake(server.address, scene, folder)
        assert done.state == "failed" and len(errors) == 1, (done, errors)
        err = errors[0]
        assert err.code == "cache" and err.field == "cache_dir", err
        assert "No space left on device" in err.message and str(folder) in err.message, err.message
        assert "Traceback" not in err.message
        assert 1 <= len(frames) < s.n_frames
        assert _tmp_leftovers(folder) == []              # no partial file left behind
        _assert_frames_equal(folder, scene, sorted(frames))   # every frame sent is whole on disk
        filler.unlink()
        frames2, errors2, done2 = _bake(server.address, scene, folder, resume=True)
        assert done2.state == "done" and not errors2, errors2
        assert sorted(frames2) == list(range(s.frame_start, s.frame_end + 1))
        _assert_frames_equal(folder, scene, range(s.frame_start, s.frame_end + 1))
        assert _tmp_leftovers(folder) == []


def test_read_only_cache_is_a_clear_error(server, tmp_path):
    scene = make_scene(n_frames=4)
    with _tmpfs(tmp_path / "ro", "4m") as disk:
        folder = disk / "c"
        _finished_bake(server, scene, folder)
        for f in (scene.settings.frame_end,):
            (folder / "frames" / f"frame_{f:05d}.npz").unlink()
            (folder / "state" / f"state_{f:05d}.npz").unlink()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        frames, errors, done = _bake(server.address, scene, folder, resume=True)
        assert done.state == "failed" and errors[0].code == "cache", errors
        assert "Read-only file system" in errors[0].message and str(folder) in errors[0].message
        err = _refusal(server.address, scene, disk / "new")     # a new folder cannot even be made
        assert err.code == "cache" and str(disk / "new") in err.message and "Read-only" in err.message, err


def test_file_size_limit_fails_cleanly_and_resume_leaves_no_temporaries(tmp_path):
    scene = _big_scene(6)
    save_scene(tmp_path / "s.clrscene", scene)
    out = tmp_path / "out"
    s = scene.settings

    def limit():   # a frame is ~72 KB: the first frame file cannot be written
        resource.setrlimit(resource.RLIMIT_FSIZE, (60 * 1024, 60 * 1024))

    r = _run_cli("bake", str(tmp_path / "s.clrscene"), "--out", str(out), preexec_fn=limit)
    assert r.returncode == 1
    assert "File too large" in r.stderr and str(out / "frames" / f"frame_{s.frame_start:05d}.npz") in r.stderr, \
        r.stderr
    assert "Traceback" not in r.stderr
    assert _tmp_leftovers(out) == []                      # the partial temporary was removed
    assert _run_cli("bake", str(tmp_path / "s.clrscene"), "--out", str(out)).returncode == 0
    for f in (s.frame_end - 1, s.frame_end):              # as if killed two frames before the end ...
        (out / "frames" / f"frame_{f:05d}.npz").unlink()
        (out / "state" / f"state_{f:05d}.npz").unlink()
    # ... in the middle of writing: a killed job leaves temporaries of exactly our names
    (out / "state" / f"state_{s.frame_end - 1:05d}.npz.tmp31337").write_bytes(b"partial")
    (out / "frames" / f"frame_{s.frame_end - 1:05d}.npz.tmp31337").write_bytes(b"partial")
    (out / "stats.json.tmp31337").write_bytes(b"partial")
    r = _run_cli("bake", str(tmp_path / "s.clrscene"), "--out", str(out), "--resume")
    assert r.returncode == 0, r.stderr
    assert f"resuming after frame {s.frame_end - 2}" in r.stdout
    assert _tmp_leftovers(out) == []
    _assert_frames_equal(out, scene, range(s.frame_start, s.frame_end + 1))
