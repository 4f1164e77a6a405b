"""Free the `llm` pool slots of runs whose process is gone, and wait for a slot in the open.

A step in a Dagster concurrency pool holds its slot in the instance's storage until its run
ends. A run killed outright (SIGKILL, an OOM kill, a power cut) never ends, so it holds the slot
for ever; with the pool full, every later run's step waits in Dagster's executor loop, busy and
deaf to Ctrl-C and SIGTERM, because Dagster defers interrupts until a step runs. Nothing in OSS
Dagster frees such a slot outside the daemon's run monitoring, which knows only the runs its
run launcher started. So the driver, before each run that needs the pool:

- fails and frees every run holding or queued for a slot whose process is known to be gone. A
  slot is taken back only on evidence, never on a guess: the driver's own runs carry a lease, a
  file in the instance's storage that the driver holds an flock on while it lives (the kernel
  lets go of it when the process dies, in any container, and after a reboot), so a free lease
  is a dead driver. A run of `dagster asset materialize` (untagged) on a local SQLite instance
  is judged by every pid its executor logged: gone when none of them is alive. Those pids are
  read in this pid namespace, so an instance whose storage is shared between containers must
  not have untagged runs going in another one (use the driver there, whose runs carry leases),
  or set EVALS_PIPELINE_RECLAIM_UNTAGGED=0 to leave every untagged run's slot alone;
- frees the slots of runs that ended but still hold one (the daemon does this only when it runs),
  and removes the lease files, an hour old or more, of gone drivers that no such run names;
- takes one of the pool's driver tokens (flock'd files, one per slot), so that two drivers do
  not both pass a check that saw one free slot and the loser wait, deaf, in Dagster's loop;
- if the pool is still full, waits here, saying which runs hold it, where Ctrl-C works.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, DagsterRun
from dagster._core.storage.dagster_run import FINISHED_STATUSES
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage

from .core.files import real_path

PROCESS_TAG = "evals_pipeline/process"  # "host/pid/start": who runs this run (for messages)
LEASE_TAG = "evals_pipeline/lease"  # the driver's lease: held while the driver lives
LOCKS_DIR = "evals_pipeline"  # under the instance's storage directory
RECLAIM_UNTAGGED_ENV = "EVALS_PIPELINE_RECLAIM_UNTAGGED"  # "0": untagged runs' slots are kept

# flock not available on this file system (some network mounts): leases and tokens are off,
# and the driver's runs are then never reclaimed (nothing would tell that they are gone).
LOCKS_UNSUPPORTED = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), "" where unknown: with the pid
    it names one process, so a pid reused by a later process is not taken for the run's."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22; the name before ")" may hold spaces


def locks_dir(instance: DagsterInstance) -> Path:
    """Where the driver's leases and pool tokens live: beside the instance's own storage, so
    every process that shares the storage (a container with it mounted, too) sees them."""
    return real_path(instance.storage_directory()) / LOCKS_DIR


def open_lock_file(path: Path, *, create: bool) -> int:
    """An fd on `path` to flock: opened for writing where it can be, since NFS (and CIFS) fake
    flock with a POSIX lock, which needs it; read-only where it cannot (a read-only mount,
    another user's file), which local file systems allow. Created 0666 less the umask, so a
    group that shares the storage under umask 002 shares the locks too."""
    flags = os.O_CREAT if create else 0
    try:
        return os.open(path, os.O_RDWR | flags, 0o666)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        return os.open(path, os.O_RDONLY | flags, 0o666)


def _try_flock(path: Path, *, create: bool) -> int | None:
    """An fd holding an exclusive flock on `path`, or None if another open file holds it.
    Raises FileNotFoundError when `path` is missing and not to be created."""
    fd = open_lock_file(path, create=create)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


class DriverLease:
    """This process's lease on one instance: a lock file it holds while it lives."""

    def __init__(self, instance: DagsterInstance) -> None:
        self.id = uuid.uuid4().hex
        folder = locks_dir(instance) / "leases"
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{self.id}.lock"
        try:
            fd = _try_flock(self.path, create=True)
        except BaseException:
            self.path.unlink(missing_ok=True)
            raise
        assert fd is not None  # a new file no one else has opened
        self._fd = fd  # never closed: the kernel drops the lock when the process ends
        self._owner = os.getpid()
        # A clean exit removes the file (its runs have ended by then); a killed driver's stays,
        # empty and free, which is what tells a later driver that it is gone (`prune_leases`
        # removes it once no run that holds a slot names it).
        atexit.register(self._remove)

    def _remove(self) -> None:
        if os.getpid() == self._owner:  # not a forked child's exit: the lease is its parent's
            self.path.unlink(missing_ok=True)


_leases: dict[Path, DriverLease] = {}


def driver_lease(instance: DagsterInstance) -> DriverLease | None:
    """This process's lease on `instance`'s storage, taken on first use, held until exit; None
    while the storage's file system gives no locks (the run it tags is then never reclaimed).
    Not remembered: on NFS, ENOLCK can pass (lockd restarting), and the next run asks again."""
    key = locks_dir(instance)
    if key not in _leases:
        try:
            _leases[key] = DriverLease(instance)
        except OSError as exc:
            if exc.errno not in LOCKS_UNSUPPORTED:
                raise
            return None
    return _leases[key]


def run_tags(instance: DagsterInstance) -> dict[str, str]:
    """Tags for a run this process executes, so a later driver can tell if it is still alive."""
    pid = os.getpid()
    tags = {PROCESS_TAG: f"{socket.gethostname()}/{pid}/{_start_time(pid)}"}
    if (lease := driver_lease(instance)) is not None:
        tags[LEASE_TAG] = lease.id
    return tags


def lease_state(instance: DagsterInstance, lease_id: str) -> str:
    """ "held" (its driver lives), "free" (its driver is gone) or "unknown" (no such lease file
    here: another machine's storage view, or a lease this code cannot check)."""
    if not lease_id.isalnum():
        return "unknown"
    path = locks_dir(instance) / "leases" / f"{lease_id}.lock"
    try:
        fd = _try_flock(path, create=False)
    except OSError:  # missing, or no locks on this file system (LOCKS_UNSUPPORTED)
        return "unknown"
    if fd is None:
        return "held"
    os.close(fd)
    return "free"


@dataclass(frozen=True)
class Owner:
    """A process an untagged run's executor logged, as far as its record says."""

    pid: int

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: alive
            return True
        if self.pid == os.getpid():
            # This process, a pid reused after a restart (a container's pids repeat): its own
            # runs are over between the driver's runs, and carry its lease besides.
            return False
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except FileNotFoundError:
            return False  # it ended between the two reads
        except OSError:
            return True  # no /proc: the pid is in use, assume the run's
        return state != "Z"


def logged_owners(instance: DagsterInstance, run: DagsterRun) -> list[Owner]:
    """Every pid the run's engine events logged (the in-process executor, a run worker, each
    step process), on local SQLite storage only, where a pid is this machine's; else []."""
    if not isinstance(instance.run_storage, SqliteRunStorage):
        return []
    pids: dict[int, None] = {}
    for record in instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        data = event.engine_event_data if event is not None else None
        logged = data.metadata.get("pid") if data is not None else None
        if logged is not None and str(logged.value).isdigit():
            pids[int(str(logged.value))] = None
    return [Owner(pid) for pid in pids]


def _pid_said(run: DagsterRun) -> str:
    host, _, rest = run.tags.get(PROCESS_TAG, "").partition("/")
    pid = rest.partition("/")[0]
    return f"{pid} on {host}" if pid else "unknown"


def why_gone(instance: DagsterInstance, run: DagsterRun) -> str | None:
    """Why the run's process is known to be gone; None when it lives or that cannot be told."""
    lease = run.tags.get(LEASE_TAG)
    if lease is not None:
        if lease_state(instance, lease) != "free":
            return None
        return f"its driver (pid {_pid_said(run)}) is gone: its lease is free"
    if PROCESS_TAG in run.tags:
        return None  # an earlier version's tag, or no locks here: nothing to tell it by
    if os.environ.get(RECLAIM_UNTAGGED_ENV, "1") == "0":
        return None
    owners = logged_owners(instance, run)
    if not owners or any(owner.alive() for owner in owners):
        return None
    if len(owners) == 1:
        return f"its process {owners[0].pid} is gone"
    return f"its processes {', '.join(str(owner.pid) for owner in owners)} are gone"


def reclaim_slots(instance: DagsterInstance) -> list[str]:
    """Free the pool slots (held and queued) of runs that are over or whose process is gone;
    a run still marked in progress is marked failed. Returns a line per run freed."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    freed = []
    for run_id in sorted(storage.get_concurrency_run_ids()):
        run = instance.get_run_by_id(run_id)
        if run is None:
            why = "its run record is gone"
        elif run.status in FINISHED_STATUSES:
            why = f"it ended ({run.status.value})"
        else:
            gone = why_gone(instance, run)
            if gone is None:
                continue
            run = instance.get_run_by_id(run_id)  # it may have ended while that was looked at
            if run is not None and run.status in FINISHED_STATUSES:
                why = f"it ended ({run.status.value})"
            else:
                why = gone
                if run is not None:
                    instance.report_run_failed(
                        run,
                        f"Marked failed by evals_pipeline: {why} (killed?), so it held its pool "
                        "slot.",
                    )
        storage.free_concurrency_slots_for_run(run_id)
        freed.append(f"freed the pool slots of run {run_id}: {why}")
    return freed


LEASE_KEEP_S = 3600.0  # a free lease younger than this is left (its driver may be starting)


def prune_leases(instance: DagsterInstance, *, older_than_s: float = LEASE_KEEP_S) -> int:
    """Remove the lease files of drivers that are gone, so they do not pile up: free, older than
    `older_than_s` (a starting driver creates its file before it locks it), and named by no run
    that holds or waits for a pool slot (that run's lease is what tells it is gone). Returns
    how many went."""
    folder = locks_dir(instance) / "leases"
    try:
        paths = list(folder.glob("*.lock"))
    except OSError:
        return 0
    named = _named_leases(instance)
    now = time.time()
    removed: list[Path] = []
    for path in paths:
        if path.stem in named:
            continue
        try:
            if now - path.stat().st_mtime < older_than_s:
                continue
            fd = _try_flock(path, create=False)
        except OSError:  # gone meanwhile, or no locks here
            continue
        if fd is None:  # held: its driver lives
            continue
        try:
            path.unlink(missing_ok=True)
            removed.append(path)
        finally:
            os.close(fd)
    # A driver killed just now whose run took a slot after `named` was read: its lease goes
    # back, free, so that run can still be freed.
    if removed and (late := _named_leases(instance)):
        for path in [path for path in removed if path.stem in late]:
            path.touch()
            removed.remove(path)
    return len(removed)


def _named_leases(instance: DagsterInstance) -> set[str]:
    """The leases of the runs that hold or wait for a pool slot."""
    storage = instance.event_log_storage
    named: set[str] = set()
    if storage.supports_global_concurrency_limits:
        for run_id in storage.get_concurrency_run_ids():
            run = instance.get_run_by_id(run_id)
            if run is not None and LEASE_TAG in run.tags:
                named.add(run.tags[LEASE_TAG])
    return named


def _holders(instance: DagsterInstance, run_ids: Iterable[str]) -> str:
    parts = []
    for run_id in sorted(set(run_ids)):
        run = instance.get_run_by_id(run_id)
        if run is None:
            parts.append(f"{run_id} (no record)")
            continue
        if PROCESS_TAG in run.tags:
            who = f", pid {_pid_said(run)}"
        else:
            pids = [str(owner.pid) for owner in logged_owners(instance, run)]
            who = f", pid {', '.join(pids)}" if pids else ""
        parts.append(f"{run_id} ({run.status.value}{who})")
    return ", ".join(parts)


def pool_limit(instance: DagsterInstance, pool: str) -> int | None:
    """The pool's limit as a step would find it now: a pool on the default limit follows the
    instance's current default (dagster.yaml), which the stored row lags until a step claims."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    if info.using_default_limit:
        return instance.global_op_concurrency_default_limit
    return info.limit


@dataclass(frozen=True)
class Token:
    """One of a pool's driver tokens, held (`fd` is None where the file system has no locks)."""

    slot: int
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def _take_token(instance: DagsterInstance, pool: str, limit: int) -> Token | None:
    """One of the pool's `limit` driver tokens, or None while other drivers hold all."""
    folder = locks_dir(instance) / "pools"
    folder.mkdir(parents=True, exist_ok=True)
    for slot in range(limit):
        try:
            fd = _try_flock(folder / f"{pool}.{slot}.lock", create=True)
        except OSError as exc:
            if exc.errno in LOCKS_UNSUPPORTED:  # storage's own check alone, then
                return Token(slot, None)
            raise
        if fd is not None:
            return Token(slot, fd)
    return None


@contextlib.contextmanager
def slot_held(
    instance: DagsterInstance,
    pool: str,
    *,
    poll_s: float = 1.0,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> Iterator[None]:
    """Hold one of `pool`'s driver tokens while a free slot shows, for as long as the block
    runs; reclaim dead runs' slots, and wait (saying so once) while others hold them all.

    A run that is not a driver's (the UI's, a CLI run) may still take the slot first; Dagster's
    step then waits until it is given back."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        yield
        return
    said = False
    token: Token | None = None
    pruned = False
    try:
        while True:
            for line in reclaim_slots(instance):
                say(line)
            if not pruned:  # after the reclaim, which reads the gone drivers' leases
                prune_leases(instance)
                pruned = True
            limit = pool_limit(instance, pool)
            if limit is None:
                break
            if token is not None and token.slot >= limit:  # the limit fell while waiting
                token.release()
                token = None
            if token is None:
                token = _take_token(instance, pool, limit)
            held = storage.get_concurrency_info(pool).claimed_slots
            if token is not None and len(held) < limit:  # slot rows come later
                break
            if not said:
                others = (
                    f"run {_holders(instance, (s.run_id for s in held))}"
                    if held
                    else "another driver about to start its run"
                )
                say(
                    f"waiting for a slot in Dagster pool {pool!r} (limit {limit}), held by "
                    f"{others}; Ctrl-C stops. A run whose process is gone is freed as soon as "
                    "that shows."
                )
                said = True
            time.sleep(poll_s)
        yield
    finally:
        if token is not None:
            token.release()


def wait_for_slot(
    instance: DagsterInstance,
    pool: str,
    *,
    poll_s: float = 1.0,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> None:
    """Return once `pool` shows a free slot (reclaiming dead runs' slots), holding no token."""
    with slot_held(instance, pool, poll_s=poll_s, say=say):
        pass
