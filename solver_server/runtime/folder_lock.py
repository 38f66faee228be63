"""One bake per cache folder across processes: an exclusive, non-blocking lock on the folder.

POSIX: ``flock`` on the folder itself (no file is created; the kernel releases it when the
holder exits or dies). Windows has no ``fcntl`` and cannot lock a folder, so the lock is a byte of
the folder's ``clearance.lock`` file (``msvcrt.locking``; protocol.cache_layout lists the name as the
bake's, so cleaning the folder never counts it as a user's file); Windows releases it when the
holder's handle closes, which process exit does too. The Windows path is not exercised by the
test suite (it runs on Linux); its calls are the documented ``msvcrt`` API.
"""
from __future__ import annotations

import contextlib
import errno
import os
from typing import Iterator

from protocol.cache_layout import LOCK_FILE

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
try:
    import msvcrt
except ImportError:  # POSIX
    msvcrt = None

BUSY_ERRNOS = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, getattr(errno, "EDEADLOCK", errno.EDEADLK))


class FolderBusy(Exception):
    """Another process (or another open of the folder in this one) holds the lock."""


def portable() -> str:
    """Which lock this platform takes: 'flock', 'msvcrt' or 'none'."""
    return "flock" if fcntl is not None else "msvcrt" if msvcrt is not None else "none"


@contextlib.contextmanager
def folder_lock(folder: str) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` for the ``with`` block. Raises FolderBusy at once when
    another holder has it, OSError when the folder (or its lock file) cannot be opened."""
    if fcntl is not None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in BUSY_ERRNOS:
                    raise FolderBusy(folder) from None
                raise
            yield
        finally:
            os.close(fd)   # releases the flock
    elif msvcrt is not None:
        path = os.path.join(folder, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        try:
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            except OSError as e:
                if e.errno in BUSY_ERRNOS:
                    raise FolderBusy(folder) from None
                raise
            try:
                yield
            finally:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        finally:
            os.close(fd)
    else:
        yield
