"""Reading and appending JSONL cassettes.

Appends never rewrite a record. Each record is one `write` of a whole line, made under an
exclusive `flock` on the file itself (two processes recording into one cassette never
interleave) and handed to the kernel before `append` returns, so a crash mid-run keeps every
record already written. A torn last line (a write cut off) is moved to `<name>.torn` by the
next append, not left to become a corrupt line in the middle. Loading names the first bad
line by number.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from pydantic import BaseModel, ValidationError

from ..digests import file_sha256, stat_state
from ..errors import (
    CassetteCorrupt,
    CassetteDuplicateKey,
    CassetteMiss,
    CassetteNotAFile,
    CassetteWriteError,
    EvalsError,
)
from ..files import line_problem, not_found, real_path
from ..gc_tuning import gc_paused
from ..memo import on_forget
from .format import CassetteRecord, ReplayRecord, ServedRecord

R = TypeVar("R", CassetteRecord, ReplayRecord)
T = TypeVar("T")


# How long an append waits for a lock another process holds: an append or a locked load takes
# seconds at most, so a lock held past this is a run stopped (SIGSTOP) or hung while holding it.
LOCK_WAIT_S = 600.0


def _lock_for_append(fd: int, path: Path) -> None:
    """The exclusive lock on `fd`, waited for at most LOCK_WAIT_S (polled, backing off to
    50 ms): a held lock had blocked the recorder for ever with no word."""
    pause, deadline = 0.001, time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise CassetteWriteError(
                    path,
                    f"locked by another process for over {LOCK_WAIT_S:g} s (a run stopped or "
                    "stuck while it held the file?); nothing was written",
                ) from None
            if _ABANDON.is_set():
                _ABANDONED.append(path)
                raise CassetteWriteError(
                    path, "interrupted while another process held its lock; nothing was written"
                ) from None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


_WRITERS: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): made again in a fork
_WRITING: set[Future[Any]] = set()  # writes begun and not yet done
_ABANDON = threading.Event()  # set by a second interrupt: writes waiting on a lock give up
_ABANDONED: list[Path] = []  # the files those writes were for
_log = logging.getLogger(__name__)


async def off_loop(write: Callable[[], T]) -> T:
    """`write()` (an append under a file's lock) in a thread, so the calls in flight on the
    event loop go on while it waits for a lock another process holds. The threads are a pool
    of the writes' own, not the loop's default executor: aiohttp resolves host names there,
    and writes waiting on a lock would hold up new connections. A cancel of the caller does
    not stop the write, begun or queued: the record is written whole, and `writes_settled`
    waits for it."""
    global _WRITERS
    if _WRITERS is None or _WRITERS[0] != os.getpid():
        _WRITERS = (os.getpid(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="writes"))
        _WRITING.clear()
    future = _WRITERS[1].submit(write)
    _WRITING.add(future)
    future.add_done_callback(_WRITING.discard)
    # Shielded: a cancel must not drop a write still queued behind others (a paid answer).
    return await asyncio.shield(asyncio.wrap_future(future))


def writes_settled(notice_after_s: float = 2.0) -> None:
    """Wait for every write `off_loop` began, as `asyncio.run` waits for its default executor's
    threads: a run that ended (or was cancelled) has written what it was writing. A wait past
    `notice_after_s` (a lock another process holds) is said, and an interrupt during the wait
    abandons the writes still waiting for a lock, naming their files: a Ctrl-C had waited up to
    LOCK_WAIT_S with no word, and the interpreter's exit joined the writer threads again."""
    pending = set(_WRITING)
    try:
        _, pending = wait(pending, timeout=notice_after_s)
        if not pending:
            return
        _log.warning(
            "waiting for %d cassette write(s) to finish (a lock another process holds?); "
            "interrupt again to abandon them",
            len(pending),
        )
        wait(pending)
    except KeyboardInterrupt:
        _abandon(pending)
        raise


def _abandon(pending: AbstractSet[Future[Any]]) -> None:
    """Have the writes still waiting for a lock give up (each within one poll, 50 ms), through
    any further interrupt, and say which files lost a record."""
    _ABANDON.set()
    try:
        while True:
            try:
                wait(pending)
                break
            except KeyboardInterrupt:  # a third Ctrl-C: the writes are already giving up
                continue
    finally:
        _ABANDON.clear()
        count, files = len(_ABANDONED), sorted({str(path) for path in _ABANDONED})
        _ABANDONED.clear()
    if count:
        _log.warning(
            "abandoned %d write(s) waiting for a lock, their answers not recorded, to %s",
            count,
            ", ".join(files),
        )


class JsonlAppender:
    """Appends whole lines to a JSONL file, one locked write and flush per record."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        try:  # a full disk (no space or no inode left) here too is a write error, typed
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch(exist_ok=True)
        except OSError as exc:
            raise CassetteWriteError(self.path, exc.strerror or str(exc)) from exc
        # Reentrant: a CassetteWriter holds it around its own bookkeeping and the append.
        self._thread_lock = threading.RLock()

    def append_line(self, line: str) -> None:
        self._append((line.rstrip("\n") + "\n").encode("utf-8"))

    def _append(
        self,
        data: bytes,
        rotate: Callable[[int, int], bool] | None = None,
        skip: Callable[[int], bool] | None = None,
    ) -> bool:
        """Write `data` at the end under the lock; False if `skip(fd)`, asked under the lock,
        says the file already holds it. `rotate(fd, size)`, called under the lock,
        may move the locked file aside (returning True): the write then goes to a fresh file at
        `path`. Whoever locked the moved file meanwhile sees it is no longer `path` and opens
        `path` again, so two processes never rotate one file twice or write into a moved one."""
        with self._thread_lock:
            while True:
                try:
                    # O_APPEND: every write lands at the current end, whoever appended meanwhile.
                    fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
                except OSError as exc:
                    raise CassetteWriteError(self.path, exc.strerror or str(exc)) from exc
                try:
                    _lock_for_append(fd, self.path)
                    if rotate is not None and (not self._is_path(fd) or rotate(fd, len(data))):
                        continue  # closes fd, unlocking it; the next open finds the new file
                    self._set_torn_tail_aside(fd)
                    if skip is not None and skip(fd):
                        return False
                    self._write_locked(fd, data)
                    return True
                except OSError as exc:
                    # A partial line may be left; the next append starts on a fresh line, and
                    # loading names the torn line. Every earlier record stays readable.
                    raise CassetteWriteError(self.path, exc.strerror or str(exc)) from exc
                finally:
                    os.close(fd)  # closing releases the flock

    def _is_path(self, fd: int) -> bool:
        """Whether the open file is still the one at `path` (not rotated away meanwhile)."""
        try:
            at_path = os.stat(self.path)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)

    def _write_locked(self, fd: int, data: bytes) -> None:
        if self._ends_mid_line(fd):
            # A whole last line short of its newline only (a write cut just before it).
            data = b"\n" + data
        _write_all(fd, data)

    def _ends_mid_line(self, fd: int) -> bool:
        size = os.fstat(fd).st_size
        if size == 0:
            return False
        return os.pread(fd, 1, size - 1) != b"\n"

    @property
    def torn_path(self) -> Path:
        """Where a torn last line goes: `<name>.torn` beside the file."""
        return self.path.with_name(self.path.name + ".torn")

    def _set_torn_tail_aside(self, fd: int) -> None:
        """A last line cut off mid-write (a full disk, a crash) is not a record and would become
        a corrupt line in the middle once this append follows it: its bytes move to
        `torn_path` (nothing is thrown away) and the file is cut back to its last whole line.
        A last line that is whole JSON, short of its newline only, stays a record."""
        if not self._ends_mid_line(fd):
            return
        size = os.fstat(fd).st_size
        start = _after_last_newline(fd, size)
        tail = os.pread(fd, size - start, start)
        try:
            json.loads(tail)
            return
        except ValueError:
            pass
        aside = os.open(self.torn_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            kept = os.fstat(aside).st_size
            try:
                # A torn tail is a line of its own there too, even after an aside cut short.
                lead = b"\n" if kept and os.pread(aside, 1, kept - 1) != b"\n" else b""
                _write_all(aside, lead + tail + b"\n")
                os.fsync(aside)  # the torn bytes are safe elsewhere before they leave this file
            except OSError:
                # A full disk again: the tail stays in this file, so the partial copy goes
                # (the next append moves the tail aside whole, not glued to a fragment).
                with contextlib.suppress(OSError):
                    os.ftruncate(aside, kept)
                raise
        finally:
            os.close(aside)
        os.ftruncate(fd, start)

    def append_model(self, model: BaseModel) -> None:
        self.append_line(model.model_dump_json())


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data`: a write may take fewer bytes than given."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _after_last_newline(fd: int, size: int, block: int = 1 << 16) -> int:
    """The offset just past the file's last newline (0 if it has none)."""
    end = size
    while end > 0:
        start = max(0, end - block)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


class CassetteWriter(JsonlAppender):
    """Appends cassette records. `unique`: a key the file already holds is not appended again
    (a graph cassette is replayed with unique keys), whoever wrote it: another process recording
    into the same file at the same time, whose appends are read under the lock as they come."""

    def __init__(self, path: Path | str, *, unique: bool = False) -> None:
        super().__init__(path)
        self.unique = unique
        self._keys: set[str] = set()  # keys of the file's lines up to _read_to
        self._read_to = 0
        self._file_id: tuple[int, int] | None = None

    def append(self, record: CassetteRecord) -> bool:
        """Append `record`; False if `unique` and the file already held its key."""
        data = (record.model_dump_json() + "\n").encode("utf-8")
        if not self.unique:
            return self._append(data)
        with self._thread_lock:  # writes run in worker threads: no other one sees the key
            try:
                return self._append(data, skip=lambda fd: self._holds(fd, record.key))
            except CassetteWriteError:
                self._keys.discard(record.key)  # not written: a retry of it must be appended
                raise

    def _holds(self, fd: int, key: str) -> bool:
        """Whether the locked file holds `key`, reading only the lines added since last asked
        (a new file, or one cut shorter, is read afresh); on False the caller writes it."""
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != self._file_id or stat.st_size < self._read_to:
            self._keys, self._read_to, self._file_id = set(), 0, (stat.st_dev, stat.st_ino)
        for raw in _whole_lines(fd, self._read_to, stat.st_size):
            self._read_to += len(raw)
            found = _line_key(raw)
            if found is not None:
                self._keys.add(found)
        if key in self._keys:
            return True
        self._keys.add(key)  # its line is read again next time: reading stays O(file)
        return False


_READ_BLOCK = 1 << 20


def _whole_lines(fd: int, start: int, end: int) -> Iterator[bytes]:
    """The lines (each with its newline) of bytes `start`..`end` of `fd`, read a block at a
    time: a big cassette is not read into memory at once (nor cut short by one `pread`'s 2 GiB
    limit). A last line without its newline is yielded too: a torn tail was set aside before
    this is asked, so it is a whole record short of its newline only (a write cut just
    before it), which loading serves; a unique writer had missed its key and written it
    again, and the file then failed to load."""
    pending: list[bytes] = []  # the start of a line that runs past the blocks read so far
    at = start
    while at < end:
        data = os.pread(fd, min(_READ_BLOCK, end - at), at)
        if not data:
            return  # the file is shorter than it was said to be
        at += len(data)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            pending.append(data)
            continue
        if pending:
            cut += sum(map(len, pending))
            data = b"".join([*pending, data])
            pending = []
        yield from data[:cut].splitlines(keepends=True)
        if cut < len(data):
            pending.append(data[cut:])
    if pending:
        yield b"".join(pending)


def _line_key(raw: bytes) -> str | None:
    """The key of a cassette line: the one it starts with, as the recorder writes it, else the
    "key" string of whatever JSON object it is; None for a blank line or one with no key."""
    if not raw.strip():
        return None
    found = _leading_key(raw)
    if found is not None:
        return found
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    key = value.get("key") if isinstance(value, dict) else None
    return key if isinstance(key, str) else None


def holds_calls_of(path: Path | str, mode: str, missed: Mapping[str, AbstractSet[str]]) -> bool:
    """Whether the cassette at `path` holds a call recorded for a missed episode (`missed`:
    name -> the keys asked of it) in ontology `mode` (by each record's request) under another
    key: recorded for that call under other prompts (a prompt, ontology or text edit: it is
    stale). A miss on a key it holds is a shortfall of answers (a recast recorded once); one
    it holds no call of was recorded for other calls (a mode, a corpus it never saw). Read on
    that path only: it parses every line."""
    try:
        for _number, record in iter_records(path, ReplayRecord, skip_torn_tail=True):
            request = record.request
            asked = missed.get(request.get("episode_name"))  # type: ignore[arg-type]
            if (
                asked is not None
                and request.get("ontology_mode") == mode
                and record.key not in asked
            ):
                return True
    except (OSError, EvalsError):
        return False  # unreadable or corrupt: its own guards say so
    return False


def iter_records(
    path: Path | str,
    model: type[R] = CassetteRecord,  # type: ignore[assignment]
    *,
    skip_torn_tail: bool = False,
) -> Iterator[tuple[int, R]]:
    """(1-based line number, record) for every non-blank line; the first bad line raises.

    `model=ReplayRecord` reads only what replay uses (see there), as `load_cassette` does.
    `skip_torn_tail`: see `load_cassette`.
    """
    path = Path(path)
    with path.open("rb") as handle:
        for number, _offset, _raw, record in _iter_lines(
            handle, path, model, skip_torn_tail=skip_torn_tail
        ):
            yield number, record


def _iter_lines(
    handle: BinaryIO,
    path: Path,
    model: type[R],
    skip: Callable[[bytes], bool] | None = None,
    *,
    skip_torn_tail: bool = False,
) -> Iterator[tuple[int, int, bytes, R]]:
    """(line number, byte offset, line, record) for every non-blank line not skipped."""
    offset = 0
    for number, raw in enumerate(handle, start=1):
        at, offset = offset, offset + len(raw)
        if not raw.strip() or (skip is not None and skip(raw)):
            continue
        try:
            record = _parse_line(model, raw, path, number)
        except CassetteCorrupt as exc:
            # Only JSON cut short: a whole JSON line that is not a record stays an error.
            if skip_torn_tail and not raw.endswith(b"\n") and "torn last line" in exc.problem:
                return  # only the last line can lack its newline: a write cut off mid-line
            raise
        yield number, at, raw, record


def _parse_line(model: type[R], raw: bytes, path: Path, number: int) -> R:
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        problem = line_problem(first, raw)
        if first["type"] == "json_invalid" and not raw.endswith(b"\n"):
            aside = path.with_name(path.name + ".torn")
            problem = (
                f"torn last line (no newline, not valid JSON: a write cut off by a full disk or "
                f"a crash): {problem}. Recording into this file again moves it to {aside}; or "
                "delete the line"
            )
        raise CassetteCorrupt(path, number, problem) from None


# Where a record is: (file index in `paths`, line number, byte offset, length), flat per key.
_LOCATION = 4


@dataclass
class Cassette:
    """Recorded answers by key. `unique` (eval backends) forbids two answers for one call;
    otherwise identical keys are served FIFO in recorded order. `consume=False` serves the first
    answer every time (eval backends and the extraction cache, where a re-run asks again).

    A loaded cassette holds where each record is, not the record: its file stays open, and a
    served record is read back (`pread`, from the page cache) and parsed again. A few ints per
    record instead of its ~10 KB line keeps a big cassette cheap to hold and to share between
    steps, and gives the cyclic collector nothing to scan. The open file is the one loading
    checked: a file replaced meanwhile (a rename, the recorder's way) is not seen. One
    rewritten in place is not supported: where the served line no longer parses or holds its
    key, that is a CassetteCorrupt naming the line; a same-length rewrite of one answer would
    be served. A deleted file's space comes back when the cassette is dropped: the shared-load
    memo drops a load whose file was deleted or renamed over at the next shared load, and
    `memo.forget_all()` drops them all. FIFO serving is safe across threads.
    """

    paths: tuple[Path, ...]
    unique: bool
    consume: bool
    _by_key: dict[str, tuple[int, ...]] = field(default_factory=dict)
    _files: tuple[BinaryIO | None, ...] = ()  # aligned with paths; None: a missing file
    _served: dict[str, int] = field(default_factory=dict)  # consume=True: answers served
    _serving: threading.Lock = field(  # guards `_served`
        default_factory=threading.Lock, repr=False, compare=False
    )
    record_count: int = 0
    # Every line that starts like the recorder's lines, `{"key":"<64 chars>",`, starts with its
    # own key (a hand-made line could repeat "key"; JSON's last value wins).
    keys_lead: bool = True

    def __post_init__(self) -> None:
        weakref.finalize(self, _close_all, self._files)

    def _next(self, key: str) -> tuple[tuple[int, ...] | None, int]:
        where = self._by_key.get(key)
        return where, (self._served.get(key, 0) if self.consume else 0)

    def take(self, key: str, call_type: str) -> ServedRecord:
        if self.consume:
            with self._serving:  # two threads taking one key get two answers, never one twice
                where, served = self._next(key)
                if where is not None and served * _LOCATION < len(where):
                    self._served[key] = served + 1
        else:
            where, served = self._next(key)
        if where is None or served * _LOCATION >= len(where):
            detail = ""
            if where is not None:
                detail = "every recorded answer for this key was already served"
            raise CassetteMiss(
                key, call_type, self.paths[0] if len(self.paths) == 1 else None, detail
            )
        at = served * _LOCATION
        file_index, number, offset, length = where[at : at + _LOCATION]
        path = self.paths[file_index]
        handle = self._files[file_index]
        assert handle is not None  # a missing file has no records
        try:
            raw = os.pread(handle.fileno(), length, offset)
        except OSError as exc:  # e.g. ESTALE: the file was replaced on a network filesystem
            raise CassetteCorrupt(path, number, f"cannot read the loaded file: {exc}") from exc
        record: ServedRecord | None = None
        if len(raw) == length:
            with contextlib.suppress(ValidationError):  # a torn or shifted line
                record = ServedRecord.model_validate_json(raw)
        if record is None or record.key != key:
            raise CassetteCorrupt(
                path,
                number,
                "the file changed since it was loaded: this line no longer holds the record "
                f"of key {key}",
            )
        return record

    def __contains__(self, key: str) -> bool:
        where, served = self._next(key)
        return where is not None and served * _LOCATION < len(where)

    def keys(self) -> Iterable[str]:
        return self._by_key.keys()

    def answers(self, key: str) -> int:
        """How many answers are recorded for `key` (FIFO serves each once)."""
        return len(self._by_key.get(key, ())) // _LOCATION

    def __len__(self) -> int:
        return self.record_count


def _close_all(files: tuple[BinaryIO | None, ...]) -> None:
    for handle in files:
        if handle is not None:
            with contextlib.suppress(OSError):  # one bad descriptor must not keep the rest open
                handle.close()


# Read-only loads (consume=False) of unchanged files are shared: one materialisation checks a
# cassette's integrity in the plan, again in each mode's extraction step, then replays it, each
# in the same process under the in-process executor. Keyed by each file's SHA-256 (remembered
# while the file's stat is unchanged), so an appended or rewritten file is loaded afresh.
# A loaded cassette holds a few hundred bytes a record (where its line is, not the line), so
# files of up to 2 GiB in all are shared (~100 MB held for 10 KB records); a bigger one is
# loaded per use. At most 32 loads are kept, each holding its files open.
MEMO_MAX_BYTES = 2 * 1024**3
MEMO_MAX_ENTRIES = 32
_memo: OrderedDict[tuple[object, ...], tuple[Cassette, int]] = OrderedDict()
_memo_bytes = 0
_memo_lock = threading.Lock()


def _file_state(path: Path) -> tuple[object, ...]:
    try:
        st = path.stat()
    except OSError:  # missing, under a file, a loop of links: not there (the load says why)
        return (str(path), None)
    return (str(real_path(path)), *stat_state(st))


def _file_digest(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # e.g. no permission to read it
        raise CassetteNotAFile(path, f"cannot be read: {exc.strerror or exc}") from exc


def _memo_get(key: tuple[object, ...]) -> Cassette | None:
    with _memo_lock:
        entry = _memo.get(key)
        if entry is None:
            return None
        _memo.move_to_end(key)
        return entry[0]


def _unlinked(cassette: Cassette) -> bool:
    """Whether a file the cassette holds open was deleted, or replaced by a rename, since."""
    for handle in cassette._files:
        if handle is None:
            continue
        try:
            if os.fstat(handle.fileno()).st_nlink == 0:
                return True
        except (OSError, ValueError):  # closed or unreadable: nothing worth keeping
            return True
    return False


def _drop_unlinked() -> None:
    """Forget shared loads whose files are gone, so their disk space comes back now rather than
    when the memo evicts them (a few `fstat` calls: at most 32 loads are kept)."""
    global _memo_bytes
    with _memo_lock:
        for key, (cassette, size) in list(_memo.items()):
            if _unlinked(cassette):
                del _memo[key]
                _memo_bytes -= size


def _memo_put(key: tuple[object, ...], cassette: Cassette, size: int) -> None:
    global _memo_bytes
    if size > MEMO_MAX_BYTES:
        return
    with _memo_lock:
        if key in _memo:
            return
        _memo[key] = (cassette, size)
        _memo_bytes += size
        while _memo_bytes > MEMO_MAX_BYTES or len(_memo) > MEMO_MAX_ENTRIES:
            _old_key, (_evicted, evicted_size) = _memo.popitem(last=False)
            _memo_bytes -= evicted_size


@on_forget
def clear_load_memo() -> None:
    """Forget every shared read-only load and every kept index (tests, benchmarks; a process
    that wants the memory back)."""
    global _memo_bytes
    with _memo_lock:
        _memo.clear()
        _indexes.clear()
        _memo_bytes = 0


def load_cassette(
    paths: Path | str | Iterable[Path | str],
    *,
    unique: bool = False,
    consume: bool | None = None,
    missing_ok: bool = False,
    keys: AbstractSet[str] | None = None,
    locked: bool = False,
    skip_torn_tail: bool = False,
) -> Cassette:
    """Load one or more cassette files as one flat set of records (order does not matter).

    `skip_torn_tail`: for a file this run appends to (a recording target, an extraction
    cache), a last line cut off mid-write is not a record (its call is made again, and the
    next append sets the torn bytes aside); anywhere else it is named, as any bad line is.

    `locked`: read each file under a shared `flock`, so an append another process is making
    (under its exclusive lock) is read whole or not at all; for a cassette being recorded
    into meanwhile, never shared (it changes).

    `consume` defaults to FIFO consumption for pipeline replay and none for `unique` loads.
    A read-only load of files unchanged since an earlier one returns that same Cassette.
    `keys`, for a unique load of which only those keys will be asked: a file too big to share
    keeps only their records (an extraction step replays one mode of a cassette that holds
    three). Every line is still checked, through `index_cassette`.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    path_list = tuple(Path(p) for p in paths)
    for path in path_list:
        if path.is_dir():
            raise CassetteNotAFile(path, "is a folder, not a cassette file")
    consume = (not unique) if consume is None else consume
    if consume or locked:
        return _load(
            path_list,
            unique=unique,
            consume=consume,
            missing_ok=missing_ok,
            locked=locked,
            skip_torn_tail=skip_torn_tail,
        )
    before = tuple(_file_state(p) for p in path_list)
    size = sum(p.stat().st_size for p in path_list if p.exists())
    if size > MEMO_MAX_BYTES:
        one = len(path_list) == 1 and path_list[0].exists()
        if keys is not None and unique and one and not skip_torn_tail:
            subset = _load_checked_subset(path_list[0], keys, before[0])
            if subset is not None:
                return subset
        return _load(
            path_list,
            unique=unique,
            consume=consume,
            missing_ok=missing_ok,
            skip_torn_tail=skip_torn_tail,
        )
    _drop_unlinked()
    memo_key = (
        unique,
        missing_ok,
        skip_torn_tail,
        *((str(p.absolute()), _file_digest(p)) for p in path_list),
    )
    hit = _memo_get(memo_key)
    if hit is not None:
        return hit
    cassette = _load(
        path_list,
        unique=unique,
        consume=consume,
        missing_ok=missing_ok,
        skip_torn_tail=skip_torn_tail,
    )
    # A file appended to while it was hashed or read must not be remembered as read.
    if before == tuple(_file_state(p) for p in path_list):
        _memo_put(memo_key, cassette, size)
    return cassette


def _load(
    path_list: tuple[Path, ...],
    *,
    unique: bool,
    consume: bool,
    missing_ok: bool,
    wanted: AbstractSet[str] | None = None,
    locked: bool = False,
    skip_torn_tail: bool = False,
) -> Cassette:
    """Every record of the files, or with `wanted` only those keys' records: a line the
    recorder wrote is then skipped unread by its leading key (see `_load_checked_subset`)."""

    def unwanted(raw: bytes) -> bool:
        key = _leading_key(raw)
        return key is not None and wanted is not None and key not in wanted

    by_key: dict[str, list[int]] = {}  # key -> its records' locations, flat (_LOCATION)
    repeated: set[str] = set()  # keys with more than one record (served FIFO)
    count = 0
    keys_lead = True
    files: list[BinaryIO | None] = []
    try:
        with gc_paused():  # the records are acyclic, and dropped as soon as they are checked
            for path in path_list:
                if not path.exists():
                    if missing_ok:
                        files.append(None)  # indexes stay aligned with paths
                        continue
                    raise CassetteNotAFile(path, not_found(path))
                try:
                    handle = path.open("rb")
                except OSError as exc:  # e.g. no permission to read it
                    raise CassetteNotAFile(path, f"cannot be read: {exc.strerror or exc}") from exc
                files.append(handle)
                index = len(files) - 1
                skip = unwanted if wanted is not None else None
                if locked:  # released at the end of the read (or when the file is closed)
                    fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
                for number, offset, raw, record in _iter_lines(
                    handle, path, ReplayRecord, skip, skip_torn_tail=skip_torn_tail
                ):
                    if wanted is not None and record.key not in wanted:
                        continue
                    where = by_key.setdefault(record.key, [])
                    if unique and where:
                        first_index, first_number = where[0], where[1]  # the first location
                        raise CassetteDuplicateKey(
                            path, record.key, (first_number, number), path_list[first_index]
                        )
                    if where:
                        repeated.add(record.key)
                    where.extend((index, number, offset, len(raw)))
                    count += 1
                    if keys_lead and _leading_key(raw) not in (None, record.key):
                        keys_lead = False
                if locked:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            for key in repeated:
                by_key[key] = _in_recorded_order(by_key[key], files)
            held = {key: tuple(where) for key, where in by_key.items()}
    except BaseException:
        _close_all(tuple(files))
        raise
    return Cassette(
        paths=path_list,
        unique=unique,
        consume=consume,
        _by_key=held,
        _files=tuple(files),
        record_count=count,
        keys_lead=keys_lead,
    )


def _in_recorded_order(where: list[int], files: Sequence[BinaryIO | None]) -> list[int]:
    """One key's record locations in the order they were recorded, by their timestamps (ties,
    or a stamp that does not read, keep file order): files assembled from several recording
    runs, newest first, had served the newest answer first. Read back for repeated keys only."""
    locations = [tuple(where[i : i + _LOCATION]) for i in range(0, len(where), _LOCATION)]
    try:
        stamps = []
        for index, _number, offset, length in locations:
            handle = files[index]
            assert handle is not None
            stamps.append(datetime.fromisoformat(_timestamp(handle, offset, length)))
        order = sorted(range(len(locations)), key=stamps.__getitem__)  # stable
    except (ValueError, TypeError):  # not RFC 3339, or naive against aware
        return where
    return [value for i in order for value in locations[i]]


# A record's timestamp as the recorder writes it, in the line's head before its request: a
# quote in the request's text is escaped, so this matches the record's own field only.
_TIMESTAMP = re.compile(rb'"timestamp":"([^"\\]*)"')
_HEAD = 1024


def _timestamp(handle: BinaryIO, offset: int, length: int) -> str:
    """A loaded record's timestamp: from its head where the recorder put it, else (a line
    written otherwise) from the whole line parsed. Parsing each repeated record whole had
    doubled the load of a cassette whose keys repeat."""
    head = os.pread(handle.fileno(), min(length, _HEAD), offset)
    if (found := _TIMESTAMP.search(head)) is not None and b'"request"' not in head[: found.start()]:
        return found[1].decode("ascii", "replace")
    return str(json.loads(os.pread(handle.fileno(), length, offset))["timestamp"])


_KEY_PREFIX = b'{"key":"'


def _leading_key(raw: bytes) -> str | None:
    """The key a line starts with, as the recorder writes it, or None."""
    if raw.startswith(_KEY_PREFIX) and raw[72:74] == b'",':
        return raw[8:72].decode("ascii", "replace")
    return None


def _load_checked_subset(
    path: Path, keys: AbstractSet[str], before: tuple[object, ...]
) -> Cassette | None:
    """A unique load of `path` holding only the records of `keys`, or None if the file changed
    meanwhile. `index_cassette` checks every line (or knows, by the file's digest, that it
    did), so the other lines need no second look: a line the recorder wrote starts with its
    key, and one that does not is validated to find its key."""
    if not index_cassette(path).keys_lead:
        return None  # some line's leading "key" is not its key (hand-made): load it whole
    subset = _load((path,), unique=True, consume=False, missing_ok=False, wanted=keys)
    return subset if _file_state(path) == before else None


@dataclass(frozen=True)
class CassetteIndex:
    """What a plan needs of a cassette: that it loads, its keys and its size, not its records."""

    path: Path
    keys: frozenset[str]
    record_count: int
    keys_lead: bool = True  # see Cassette.keys_lead

    def __contains__(self, key: str) -> bool:
        return key in self.keys

    def __len__(self) -> int:
        return self.record_count


# Indexes by file digest: every mode's plan and every extraction step re-check the guards of the
# same unchanged cassettes; after the first, a re-check costs one hash of the file. Keys only, so
# kept whatever the cassette's size (64-character keys, ~0.1 KB per record).
_indexes: OrderedDict[tuple[str, str | None], CassetteIndex] = OrderedDict()
_INDEXES_KEPT = 64


def index_cassette(path: Path | str) -> CassetteIndex:
    """Load `path` with unique keys (raising CassetteCorrupt / CassetteDuplicateKey as that load
    does) and keep only its index; an unchanged file is not loaded again."""
    path = Path(path)
    if path.is_dir():
        raise CassetteNotAFile(path, "is a folder, not a cassette file")
    before = _file_state(path)
    memo_key = (str(path.absolute()), _file_digest(path))
    with _memo_lock:
        hit = _indexes.get(memo_key)
    if hit is not None:
        return hit
    cassette = load_cassette(path, unique=True)
    index = CassetteIndex(path, frozenset(cassette.keys()), len(cassette), cassette.keys_lead)
    if before == _file_state(path):
        with _memo_lock:
            _indexes[memo_key] = index
            while len(_indexes) > _INDEXES_KEPT:
                _indexes.popitem(last=False)
    return index
