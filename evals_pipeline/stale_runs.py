"""Free the `llm` pool slots of runs whose process is gone, and wait for a slot in the open.

A step in a Dagster concurrency pool holds its slot in the instance's storage until its run
ends. A run killed outright (SIGKILL, an OOM kill, a power cut) never ends, so it holds the slot
for ever; with the pool full, every later run's step waits in Dagster's executor loop, busy and
deaf to Ctrl-C and SIGTERM, because Dagster defers interrupts until a step runs. Nothing in OSS
Dagster frees such a slot outside the daemon's run monitoring, which knows only the runs its
run launcher started. So the driver, before each run that needs the pool:

- fails and frees every run holding or queued for a slot whose process is gone: its own earlier
  runs (tagged with host, pid and process start time), and on a local SQLite instance the runs
  whose in-process executor logged its pid (`dagster asset materialize`, scripts);
- frees the slots of runs that ended but still hold one (the daemon does this only when it runs);
- if the pool is still full, waits here, saying which runs hold it, where Ctrl-C works.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, DagsterRun
from dagster._core.storage.dagster_run import FINISHED_STATUSES
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage

PROCESS_TAG = "evals_pipeline/process"  # "host/pid/start": who runs this run


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), "" where unknown: with the pid
    it names one process, so a pid reused by a later process is not taken for the run's."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22; the name before ")" may hold spaces


def run_tags() -> dict[str, str]:
    """Tags for a run this process executes, so a later driver can tell if it is still alive."""
    pid = os.getpid()
    return {PROCESS_TAG: f"{socket.gethostname()}/{pid}/{_start_time(pid)}"}


@dataclass(frozen=True)
class Owner:
    """The process that executes a run, as far as the run's record says."""

    pid: int
    start: str = ""  # "" when not recorded: the pid alone decides

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: alive
            return True
        if self.pid == os.getpid():
            # This process, a pid reused after a restart (a container's pids repeat): its own
            # runs are over between the driver's runs, so a run on our pid that has not ended is
            # an earlier process's, unless the start time says it is this one's.
            return bool(self.start) and self.start == _start_time(self.pid)
        now = _start_time(self.pid)
        if not now:
            return True  # no /proc: the pid is in use, assume the run's
        if self.start and now != self.start:
            return False  # the pid now belongs to a later process
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            return False  # it ended between the two reads
        return state != "Z"


def owner_of(instance: DagsterInstance, run: DagsterRun) -> Owner | None:
    """Who executes the run: the driver's tag, else (local SQLite storage only, where the pid is
    this machine's) the pid the in-process or run-worker engine event logged; None if unknown."""
    tag = run.tags.get(PROCESS_TAG)
    if tag is not None:
        host, _, rest = tag.partition("/")
        pid, _, start = rest.partition("/")
        if host != socket.gethostname() or not pid.isdigit():
            return None  # another machine's: its pid means nothing here
        return Owner(int(pid), start)
    if not isinstance(instance.run_storage, SqliteRunStorage):
        return None
    for record in instance.all_logs(run.run_id, of_type=DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        data = event.engine_event_data if event is not None else None
        logged = data.metadata.get("pid") if data is not None else None
        if logged is not None and str(logged.value).isdigit():
            return Owner(int(str(logged.value)))
    return None


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
            owner = owner_of(instance, run)
            if owner is None or owner.alive():
                continue
            why = f"its process {owner.pid} is gone"
            instance.report_run_failed(
                run, f"Marked failed by evals_pipeline: {why} (killed?), so it held its pool slot."
            )
        storage.free_concurrency_slots_for_run(run_id)
        freed.append(f"freed the pool slots of run {run_id}: {why}")
    return freed


def _holders(instance: DagsterInstance, run_ids: Iterable[str]) -> str:
    parts = []
    for run_id in sorted(set(run_ids)):
        run = instance.get_run_by_id(run_id)
        owner = owner_of(instance, run) if run is not None else None
        status = run.status.value if run is not None else "no record"
        parts.append(f"{run_id} ({status}{f', pid {owner.pid}' if owner else ''})")
    return ", ".join(parts)


def wait_for_slot(
    instance: DagsterInstance,
    pool: str,
    *,
    poll_s: float = 1.0,
    say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> None:
    """Return once `pool` has a free slot, reclaiming dead runs' slots; wait while live runs hold
    them all, saying so once. Dagster may still wait briefly if another run takes the slot
    first; it then gets one when that run ends."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    said = False
    while True:
        for line in reclaim_slots(instance):
            say(line)
        info = storage.get_concurrency_info(pool)
        if info.limit is None or len(info.claimed_slots) < info.limit:  # slot rows come later
            return
        if not said:
            say(
                f"waiting for a slot in Dagster pool {pool!r} (limit {info.limit}), held by "
                f"run {_holders(instance, (s.run_id for s in info.claimed_slots))}; Ctrl-C stops. "
                "A run whose process is gone is freed as soon as that shows."
            )
            said = True
        time.sleep(poll_s)
