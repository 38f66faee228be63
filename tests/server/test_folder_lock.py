"""Issue 20 item 11: the cache folder lock, portable (folder_lock.py: flock on POSIX, msvcrt on Windows).
The Linux path with real processes: a child holding the lock makes this process's attempt fail at once,
a SIGKILLed holder frees it, and no file is created in the folder."""
import os
import signal
import subprocess
import sys
import time

import pytest

from solver_server.runtime.cache import CacheBusy, JobCache
from solver_server.runtime.folder_lock import FolderBusy, folder_lock, portable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HOLD = """
import sys, time
from solver_server.runtime.folder_lock import folder_lock
with folder_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def _holder(folder):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX path; Windows takes msvcrt.locking")
def test_a_folder_locked_by_another_process_is_busy_until_it_dies(tmp_path):
    assert portable() == "flock"
    p = _holder(tmp_path)
    try:
        with pytest.raises(FolderBusy):
            with folder_lock(str(tmp_path)):
                pass
        with pytest.raises(CacheBusy) as e:           # what a bake reports: one line naming the folder
            JobCache(str(tmp_path)).check_unlocked()
        assert str(tmp_path) in str(e.value) and "\n" not in str(e.value)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    deadline = time.monotonic() + 10
    while True:       # the kernel releases a dead holder's lock
        try:
            with folder_lock(str(tmp_path)):
                break
        except FolderBusy:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert os.listdir(tmp_path) == []                # flock needs no lock file


def test_the_lock_file_of_windows_is_the_bakes_own_name(tmp_path):
    """Where the lock is a file (Windows), a folder holding only it is still an empty cache folder,
    and a re-bake's clean-up leaves it alone (it is held open)."""
    from protocol.cache_layout import LOCK_FILE, is_own_file
    assert is_own_file("", LOCK_FILE) and not is_own_file("frames", LOCK_FILE)
    (tmp_path / LOCK_FILE).write_bytes(b"")
    cache = JobCache(str(tmp_path))
    assert cache.check_owner() is False           # not refused as someone else's folder
    cache.clear()
    assert (tmp_path / LOCK_FILE).exists()
