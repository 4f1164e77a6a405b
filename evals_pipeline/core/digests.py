"""SHA-256 of files, remembered while a file is unchanged on disk.

One materialisation asks for the digest of each cassette many times (the plan's guards, every
extraction step's guards and cache fingerprint, the shared-load memo), and hashing a 300 MB
cassette costs about a second. A digest is reused while the file's device, inode, size, mtime
and ctime are all as they were, and only for a file last modified well before it was hashed: a
write within the filesystem's timestamp granularity of the hash could leave the same stat
behind (git's "racy clean" problem), so such a file is hashed again on every ask.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from .memo import on_forget

# A file modified less than this before it was hashed is never trusted from the memo.
RACY_WINDOW_S = 2.0
_KEPT = 4096

_memo: dict[str, tuple[tuple[int, ...], str]] = {}
_lock = threading.Lock()


def stat_state(st: os.stat_result) -> tuple[int, ...]:
    """What changes when a file is rewritten, appended to, replaced or touched."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def contents_key(path: Path | str) -> tuple[str, ...] | None:
    """The SHA-256 of a file, or of every file under a folder with its name, for a memo of
    what was read from it (each digest is `file_sha256`'s, itself remembered while the file is
    unchanged); None when missing or unreadable (the loader then names why)."""
    try:
        if not os.path.isdir(path):
            return (file_sha256(path),)
        return tuple(
            item
            for root, _dirs, files in sorted(os.walk(path))
            for name in sorted(files)
            for item in (
                os.path.relpath(os.path.join(root, name), path),
                file_sha256(os.path.join(root, name)),
            )
        )
    except OSError:
        return None


def file_sha256(path: Path | str) -> str:
    """The hex SHA-256 of the file's bytes; FileNotFoundError if there is no file."""
    name = os.path.abspath(path)
    before = os.stat(name)
    state = stat_state(before)
    with _lock:
        hit = _memo.get(name)
    if hit is not None and hit[0] == state:
        return hit[1]
    hashed_at = time.time()
    digest = hashlib.sha256()
    with open(name, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    hexdigest = digest.hexdigest()
    settled = hashed_at - max(before.st_mtime, before.st_ctime) > RACY_WINDOW_S
    if settled and stat_state(os.stat(name)) == state:
        with _lock:
            if len(_memo) >= _KEPT:
                _memo.clear()
            _memo[name] = (state, hexdigest)
    return hexdigest


@on_forget
def forget_digests() -> None:
    """Drop every remembered digest (tests, benchmarks)."""
    with _lock:
        _memo.clear()
