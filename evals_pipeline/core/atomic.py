"""Writing a file atomically: readers see the old file or the new one, never a partial write.

Reports, gate results, bench runs, charts and Dagster's stored asset values all go through it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .errors import OutputPathError
from .files import real_path


def write_atomic(path: Path, fill: Callable[[BinaryIO], object]) -> Path:
    """Have `fill` write a temp file in `path`'s directory, then rename it over `path`.

    Readers see the old file or the new one, never a partial write. A symlink is written
    through (its target is replaced, the link kept); a path that is no regular file (a pipe,
    `/dev/stdout`) is written to directly, since there is nothing to rename over.
    """
    if path.is_dir():
        raise OutputPathError(path, "is a folder; name a file to write")
    if path.is_symlink():
        path = real_path(path)
    if path.exists() and not path.is_file():
        try:
            with path.open("wb") as handle:
                fill(handle)
        except OSError as exc:
            raise OutputPathError(path, f"cannot write here: {exc.strerror or exc}") from exc
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:  # a file where a folder goes, a read-only folder
        raise OutputPathError(path, f"cannot write here: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a report is meant to be read
        os.replace(tmp, path)
    except OSError as exc:  # a full disk: the old file, if any, is left as it was
        Path(tmp).unlink(missing_ok=True)
        raise OutputPathError(path, f"cannot write here: {exc.strerror or exc}") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """`write_atomic` of `data`."""
    return write_atomic(path, lambda handle: handle.write(data))


def write_text_atomic(path: Path, text: str) -> Path:
    """`write_bytes_atomic` for UTF-8 text."""
    return write_bytes_atomic(path, text.encode("utf-8"))
