"""File-lock and permission helpers for the lock tests (stale_runs', the instance's, and the
appenders' waits on a lock another process holds)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

NOBODY = 65534


def token_is_held(path: Path) -> bool:
    """Whether another open file holds an flock on `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


@contextlib.contextmanager
def without_write_access(folder: Path, *files: Path) -> Iterator[None]:
    """`folder` and `files` made unwritable for this process for real: as root (who passes
    permission bits), by running as `nobody` for the block (the effective uid only, so root's
    comes back); otherwise by taking the write bits off."""
    root = os.geteuid() == 0
    for file in files:
        file.chmod(0o644 if root else 0o444)
    folder.chmod(0o755 if root else 0o555)
    if root:
        os.seteuid(NOBODY)
    try:
        yield
    finally:
        if root:
            os.seteuid(0)
        folder.chmod(0o755)


_HOLD = (
    "import fcntl, sys, time; f = open(sys.argv[1], 'rb'); fcntl.flock(f, fcntl.LOCK_SH); "
    "print('held', flush=True); time.sleep(float(sys.argv[2]))"
)


@contextlib.contextmanager
def lock_held_elsewhere(path: Path, seconds: float) -> Iterator[None]:
    """A shared flock on `path` held by another process (as a locked load of it holds one) for
    `seconds`, from when the block starts; the process is gone when the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.wait()
