"""Reading and appending JSONL cassettes.

Appends never truncate, write each record as one `write` of a whole line under a cross-process
file lock, and flush it before returning, so a crash mid-run keeps every record already written
and two processes recording into one file never interleave. Loading reports the first bad line
by number.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ValidationError

from ..errors import CassetteCorrupt, CassetteDuplicateKey, CassetteMiss
from ..files import field_path
from .format import CassetteRecord


def _lock_for(path: Path) -> FileLock:
    return FileLock(str(path) + ".lock")


class JsonlAppender:
    """Appends whole lines to a JSONL file, one locked write and flush per record."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_for(self.path)
        with self._lock:
            self.path.touch(exist_ok=True)

    def append_line(self, line: str) -> None:
        data = (line.rstrip("\n") + "\n").encode("utf-8")
        with self._lock:
            self._write(data)

    def _write(self, data: bytes) -> None:
        # O_APPEND: every write lands at the current end, whoever else appended meanwhile.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if self._ends_mid_line(fd):
                # A torn last line (crash mid-write elsewhere) must not swallow this record.
                data = b"\n" + data
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)

    def _ends_mid_line(self, fd: int) -> bool:
        size = os.fstat(fd).st_size
        if size == 0:
            return False
        return os.pread(fd, 1, size - 1) != b"\n"

    def append_model(self, model: BaseModel) -> None:
        self.append_line(model.model_dump_json())


class CassetteWriter(JsonlAppender):
    def append(self, record: CassetteRecord) -> None:
        self.append_model(record)


def iter_records(path: Path | str) -> Iterator[tuple[int, CassetteRecord]]:
    """(1-based line number, record) for every non-blank line; the first bad line raises."""
    path = Path(path)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = CassetteRecord.model_validate_json(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                problem = first["msg"]
                if first["type"] != "json_invalid":
                    problem = f"{field_path(tuple(first['loc']))}: {problem}"
                elif not raw.endswith(b"\n"):
                    problem = f"torn last line (no newline, not valid JSON): {problem}"
                raise CassetteCorrupt(path, number, problem) from None
            yield number, record


@dataclass
class Cassette:
    """Recorded answers by key. `unique` (eval backends) forbids two answers for one call;
    otherwise identical keys are served FIFO in recorded order."""

    paths: tuple[Path, ...]
    unique: bool
    _by_key: dict[str, deque[CassetteRecord]] = field(default_factory=dict)
    record_count: int = 0

    def take(self, key: str, call_type: str) -> CassetteRecord:
        queue = self._by_key.get(key)
        if not queue:
            where = self.paths[0] if len(self.paths) == 1 else None
            detail = ""
            if queue is not None:
                detail = "every recorded answer for this key was already served"
            raise CassetteMiss(key, call_type, where, detail)
        if self.unique:
            return queue[0]
        return queue.popleft()

    def keys(self) -> Iterable[str]:
        return self._by_key.keys()

    def __len__(self) -> int:
        return self.record_count


def load_cassette(paths: Path | str | Iterable[Path | str], *, unique: bool = False) -> Cassette:
    """Load one or more cassette files as one flat set of records (order does not matter)."""
    if isinstance(paths, str | Path):
        paths = [paths]
    path_list = tuple(Path(p) for p in paths)
    cassette = Cassette(paths=path_list, unique=unique)
    first_line: dict[str, tuple[Path, int]] = {}
    for path in path_list:
        if not path.exists():
            raise CassetteCorrupt(path, 0, "cassette file not found")
        for number, record in iter_records(path):
            queue = cassette._by_key.setdefault(record.key, deque())
            if unique and queue:
                _seen_path, seen_line = first_line[record.key]
                raise CassetteDuplicateKey(path, record.key, (seen_line, number))
            first_line.setdefault(record.key, (path, number))
            queue.append(record)
            cassette.record_count += 1
    return cassette
