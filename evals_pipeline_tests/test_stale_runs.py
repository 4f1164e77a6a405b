"""Pool slots of runs whose process is gone are freed; a full pool is waited for in the open.

The instance is a real SQLite one with the `llm` pool at limit 1; a slot is claimed through
Dagster's own storage call, as a step does, for a run record whose driver's lease is free (a
killed driver's), held by another process (a live one's), or missing (another machine's).
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterEvent, DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus
from dagster._core.events import EngineEventData

from evals_pipeline import stale_runs
from evals_pipeline.assets.extraction import LLM_POOL
from evals_pipeline.graph import build_definitions
from evals_pipeline.instance import default_instance
from evals_pipeline.materialize import materialize_all
from evals_pipeline.stale_runs import (
    LEASE_TAG,
    PROCESS_TAG,
    driver_lease,
    locks_dir,
    logged_owners,
    reclaim_slots,
    run_tags,
    slot_held,
    wait_for_slot,
)
from evals_pipeline_tests.pipeline_fixtures import RULES, make_config
from evals_pipeline_tests.support.locks import token_is_held, without_write_access

POOL_LIMIT_1 = "concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n"


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(POOL_LIMIT_1)
    with DagsterInstance.from_config(str(home)) as instance:
        yield instance


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid  # reaped: no process has it (a reuse this soon is vanishingly unlikely)


def _lease_file(instance: DagsterInstance) -> tuple[str, Path]:
    """A lease as a killed driver leaves it: the file, held by no one."""
    lease = uuid.uuid4().hex
    path = locks_dir(instance) / "leases" / f"{lease}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return lease, path


def _driver_tags(lease: str | None, pid: int | None = None) -> dict[str, str]:
    tags = {PROCESS_TAG: f"{socket.gethostname()}/{pid or _gone_pid()}/"}
    if lease is not None:
        tags[LEASE_TAG] = lease
    return tags


def _holding(path: Path) -> subprocess.Popen[str]:
    """Another process that holds an flock on `path` (a live driver's lease) until killed."""
    script = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def _holding_run(instance: DagsterInstance, tags: dict[str, str], status: DagsterRunStatus) -> str:
    """A run record in `status` that holds the pool's one slot, as a step claims it."""
    run_id = str(uuid.uuid4())
    instance.add_run(DagsterRun(job_name="__ASSET_JOB", run_id=run_id, status=status, tags=tags))
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default(LLM_POOL)
    claim = storage.claim_concurrency_slot(LLM_POOL, run_id, "extractions")
    assert claim.is_claimed
    return run_id


def _holders(instance: DagsterInstance) -> list[str]:
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    return [slot.run_id for slot in info.claimed_slots]


def test_a_killed_drivers_slot_is_freed_and_the_run_marked_failed(
    instance: DagsterInstance,
) -> None:
    lease, _ = _lease_file(instance)
    run_id = _holding_run(instance, _driver_tags(lease), DagsterRunStatus.STARTED)
    assert _holders(instance) == [run_id]
    lines = reclaim_slots(instance)
    assert len(lines) == 1 and run_id in lines[0] and "its lease is free" in lines[0]
    assert _holders(instance) == []
    run = instance.get_run_by_id(run_id)
    assert run is not None and run.status == DagsterRunStatus.FAILURE


def test_a_live_drivers_slot_is_kept_though_its_pid_is_not_seen_here(
    instance: DagsterInstance,
) -> None:
    """Positive evidence only: a driver in another container on this host (another pid
    namespace, the storage mounted in both) has a pid that is gone here. Its lease is held, so
    its slot is kept; the pid had been taken for a dead process's."""
    lease, path = _lease_file(instance)
    with _holding(path) as holder:
        try:
            run_id = _holding_run(instance, _driver_tags(lease), DagsterRunStatus.STARTED)
            assert reclaim_slots(instance) == []
            assert _holders(instance) == [run_id]
        finally:
            holder.kill()
    assert run_id in reclaim_slots(instance)[0]  # its holder gone, the lease is free


def test_this_drivers_own_run_is_kept(instance: DagsterInstance) -> None:
    run_id = _holding_run(instance, run_tags(instance), DagsterRunStatus.STARTED)
    lease = driver_lease(instance)
    assert lease is not None and run_tags(instance)[LEASE_TAG] == lease.id  # one a process
    assert reclaim_slots(instance) == []
    assert _holders(instance) == [run_id]


@pytest.mark.parametrize("why", ["another machine's lease", "a tag without a lease"])
def test_a_run_that_cannot_be_placed_is_left_alone(instance: DagsterInstance, why: str) -> None:
    """A lease with no file here (another machine's storage view) or an earlier version's tag
    with no lease: nothing tells whether its process lives, so its slot stays."""
    tags = _driver_tags(uuid.uuid4().hex if why.startswith("another") else None)
    run_id = _holding_run(instance, tags, DagsterRunStatus.STARTED)
    assert reclaim_slots(instance) == []
    assert _holders(instance) == [run_id]


def test_ended_and_unrecorded_runs_give_their_slots_back(instance: DagsterInstance) -> None:
    ended = _holding_run(instance, {}, DagsterRunStatus.SUCCESS)
    assert "ended (SUCCESS)" in reclaim_slots(instance)[0]
    storage = instance.event_log_storage
    storage.claim_concurrency_slot(LLM_POOL, "no-such-run", "extractions")
    assert "record is gone" in reclaim_slots(instance)[0]
    assert _holders(instance) == [] and ended not in storage.get_concurrency_run_ids()


def test_an_untagged_run_is_judged_by_the_pid_its_executor_logged(
    instance: DagsterInstance, tmp_path: Path
) -> None:
    """`dagster asset materialize` runs carry no driver tag; their in-process executor logs its
    pid, which on a local SQLite instance is this machine's."""
    config = make_config(tmp_path, {"rules": f"cassette:path={RULES}"})
    defs = build_definitions(config)
    outcome = materialize_all(config, instance, defs, quiet=True)
    assert outcome.success, outcome.failed_steps
    run = instance.get_runs(limit=1)[0]
    assert LEASE_TAG in run.tags  # the driver's own runs are tagged
    untagged = DagsterRun(job_name=run.job_name, run_id=run.run_id, status=run.status)
    assert [owner.pid for owner in logged_owners(instance, untagged)] == [os.getpid()]


def test_an_untagged_run_lives_while_any_process_it_logged_lives(
    instance: DagsterInstance,
) -> None:
    """A run worker and its step processes each log a pid: the run is gone only when every one
    of them is (the first logged had been taken for the whole run)."""
    run_id = _holding_run(instance, {}, DagsterRunStatus.STARTED)
    run = instance.get_run_by_id(run_id)
    assert run is not None
    with subprocess.Popen(["sleep", "120"]) as step:
        try:
            for pid in (_gone_pid(), step.pid):
                instance.report_engine_event("started", run, EngineEventData.in_process(pid))
            assert reclaim_slots(instance) == []
        finally:
            step.kill()
    lines = reclaim_slots(instance)
    assert len(lines) == 1 and f", {step.pid} are gone" in lines[0]


def test_untagged_runs_can_be_left_alone_where_pids_are_not_this_namespaces(
    instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Containers sharing one instance's storage see each other's untagged runs, whose pids
    mean nothing here: EVALS_PIPELINE_RECLAIM_UNTAGGED=0 keeps their slots."""
    run_id = _holding_run(instance, {}, DagsterRunStatus.STARTED)
    run = instance.get_run_by_id(run_id)
    assert run is not None
    instance.report_engine_event("started", run, EngineEventData.in_process(_gone_pid()))
    monkeypatch.setenv(stale_runs.RECLAIM_UNTAGGED_ENV, "0")
    assert reclaim_slots(instance) == []
    assert _holders(instance) == [run_id]
    monkeypatch.delenv(stale_runs.RECLAIM_UNTAGGED_ENV)
    assert "is gone" in reclaim_slots(instance)[0]


def test_the_wait_is_visible_and_ends_when_the_holder_dies(instance: DagsterInstance) -> None:
    lease, path = _lease_file(instance)
    holder = _holding(path)
    run_id = _holding_run(instance, _driver_tags(lease, holder.pid), DagsterRunStatus.STARTED)
    said: list[str] = []

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("waiting"):  # the holder dies only once the wait is shown
            holder.kill()
            holder.wait()

    started = time.monotonic()
    wait_for_slot(instance, LLM_POOL, poll_s=0.05, say=say)
    assert time.monotonic() - started < 20
    assert said[0].startswith(
        f"waiting for a slot in Dagster pool 'llm' (limit 1), held by run {run_id}"
    )
    assert f"pid {holder.pid}" in said[0]
    assert any("is gone" in line for line in said[1:])
    assert _holders(instance) == []


def test_a_raised_default_limit_counts_at_once(tmp_path: Path) -> None:
    """The pool's stored limit follows dagster.yaml's default only once a step claims again;
    the wait reads the instance's current default, so raising it to 2 lets the driver on."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(POOL_LIMIT_1)
    lease, path = _lease_file_in(home)
    with _holding(path) as holder:
        try:
            with DagsterInstance.from_config(str(home)) as instance:
                _holding_run(instance, _driver_tags(lease), DagsterRunStatus.STARTED)
            (home / "dagster.yaml").write_text(POOL_LIMIT_1.replace("limit: 1", "limit: 2"))
            with DagsterInstance.from_config(str(home)) as instance:
                stored = instance.event_log_storage.get_concurrency_info(LLM_POOL)
                assert stored.limit == 1 and stored.using_default_limit  # the lag itself
                done = threading.Event()

                def wait() -> None:
                    wait_for_slot(instance, LLM_POOL, poll_s=0.05)
                    done.set()

                waiter = threading.Thread(target=wait, daemon=True)
                waiter.start()
                assert done.wait(timeout=10), "waited on the stored limit of 1"
        finally:
            holder.kill()


def _lease_file_in(home: Path) -> tuple[str, Path]:
    with DagsterInstance.from_config(str(home)) as instance:
        return _lease_file(instance)


def test_two_drivers_do_not_both_pass_a_check_that_saw_one_free_slot(
    instance: DagsterInstance,
) -> None:
    """Each holds one of the pool's driver tokens while its run goes: with limit 1, the
    second waits here (where Ctrl-C works) until the first is done, instead of both seeing
    the free slot and the second waiting, deaf, in Dagster's loop."""
    barrier = threading.Barrier(2)
    spans: list[tuple[float, float]] = []
    said: list[str] = []

    def driver() -> None:
        barrier.wait()
        with slot_held(instance, LLM_POOL, poll_s=0.02, say=said.append):
            began = time.monotonic()
            deadline = began + 10  # the run, which would claim the slot in storage, lasts
            while not said and time.monotonic() < deadline:  # until the other says it waits
                time.sleep(0.01)
            time.sleep(0.1)
            spans.append((began, time.monotonic()))

    threads = [threading.Thread(target=driver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(spans) == 2
    first, second = sorted(spans)
    assert second[0] >= first[1], f"both held the pool's one slot at once: {spans}"
    assert said and "another driver about to start its run" in said[0]


def test_the_driver_runs_past_a_killed_runs_slot(instance: DagsterInstance, tmp_path: Path) -> None:
    """Without the reclaim, the first extraction step waits in Dagster's loop for ever."""
    lease, _ = _lease_file(instance)
    _holding_run(instance, _driver_tags(lease), DagsterRunStatus.STARTED)
    config = make_config(tmp_path, {"rules": f"cassette:path={RULES}"})
    defs = build_definitions(config)
    done: list[bool] = []
    worker = threading.Thread(
        target=lambda: done.append(materialize_all(config, instance, defs, quiet=True).success),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=300)
    assert done == [True]


@pytest.mark.parametrize(
    ("stop", "sigint_ignored"),
    [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)],
    ids=["sigint", "sigterm", "sigterm-background-job"],
)
def test_ctrl_c_or_sigterm_stops_a_driver_waiting_for_a_slot(
    tmp_path: Path, stop: signal.Signals, sigint_ignored: bool
) -> None:
    """A live run holds the pool's one slot: the driver says who holds it and waits, and
    SIGINT or SIGTERM ends it at once, in a line (Dagster's own wait had ignored both). A
    driver started with SIGINT ignored stops on SIGTERM too (Dagster had copied the SIG_IGN)."""
    from evals_pipeline_tests.support.hermetic import hermetic_environ
    from evals_pipeline_tests.test_cli_e2e import good_config

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(POOL_LIMIT_1)
    lease, path = _lease_file_in(home)
    with DagsterInstance.from_config(str(home)) as instance, _holding(path) as holder:
        run_id = _holding_run(instance, _driver_tags(lease, holder.pid), DagsterRunStatus.STARTED)
        env = {**hermetic_environ(), "DAGSTER_HOME": str(home)}
        command = [
            sys.executable,
            "-m",
            "evals_pipeline.materialize",
            "--config",
            str(good_config(tmp_path)),
        ]
        if sigint_ignored:  # as a script's background job starts (the shell execs the driver)
            command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
        driver = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        try:
            assert driver.stderr is not None
            deadline = time.monotonic() + 120
            line = ""
            while time.monotonic() < deadline and "waiting for a slot" not in line:
                line = driver.stderr.readline()
                assert line or driver.poll() is None, "the driver ended without waiting"
            assert f"held by run {run_id}" in line and f"pid {holder.pid}" in line
            driver.send_signal(stop)
            rest = driver.communicate(timeout=10)[1]  # read while it ends: a full pipe blocks it
            assert driver.returncode == 130
            assert "interrupted" in rest
        finally:
            driver.kill()
            holder.kill()


def test_lock_files_are_open_to_a_group_under_umask_002(instance: DagsterInstance) -> None:
    """A lock needs no write access; another user's driver on the same storage must be able to
    open the lease and token files (they had been 0644, opened read-write)."""
    umask = os.umask(0o002)  # a group-shared umask: the files' modes then tell
    try:
        lease = driver_lease(instance)
        with slot_held(instance, LLM_POOL, poll_s=0.02):
            pass
    finally:
        os.umask(umask)
    assert lease is not None
    token = locks_dir(instance) / "pools" / f"{LLM_POOL}.0.lock"
    for path in (lease.path, token):
        assert stat.S_IMODE(path.stat().st_mode) == 0o664, path


def test_a_forked_child_leaves_its_parents_lease(tmp_path: Path) -> None:
    """The lease file goes at a clean exit of the driver that took it, not of a child forked
    from it (whose atexit handlers are a copy of its parent's)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(POOL_LIMIT_1)
    script = (
        "import os, sys\n"
        "from dagster import DagsterInstance\n"
        "from evals_pipeline.stale_runs import driver_lease\n"
        "instance = DagsterInstance.from_config(sys.argv[1])\n"
        "lease = driver_lease(instance)\n"
        "print(lease.path, flush=True)\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    sys.exit(0)\n"  # a normal exit: atexit runs
        "os.waitpid(child, 0)\n"
        "print('kept' if lease.path.exists() else 'gone', flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(home)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    path, after_child = done.stdout.split()
    assert after_child == "kept"
    assert not Path(path).exists()  # the driver's own exit removed it


def test_without_file_locks_the_driver_runs_and_its_runs_are_never_reclaimed(
    instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a file system without flock (ENOLCK on some network mounts) the lease had raised out
    of the driver: now its runs go without a lease tag, which no later driver frees, and the
    pool's check in storage alone decides."""

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(stale_runs.fcntl, "flock", no_locks)
    tags = run_tags(instance)
    assert PROCESS_TAG in tags and LEASE_TAG not in tags
    assert list((locks_dir(instance) / "leases").iterdir()) == []  # the failed one is not left
    with slot_held(instance, LLM_POOL, poll_s=0.02):
        pass
    run_id = _holding_run(instance, tags, DagsterRunStatus.STARTED)
    assert reclaim_slots(instance) == []
    assert _holders(instance) == [run_id]
    monkeypatch.undo()  # ENOLCK can pass on NFS (lockd back): the next run has a lease
    assert LEASE_TAG in run_tags(instance)


def test_locks_work_where_flock_needs_a_file_open_for_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Linux NFS client (and CIFS) fakes flock with a POSIX lock, so an exclusive lock on a
    file opened read-only fails with EBADF: the instance lock, the lease and the tokens had all
    raised it. The shim is that rule over the local flock."""
    real_flock = fcntl.flock

    def nfs_flock(fd: int, operation: int) -> None:
        if operation & fcntl.LOCK_EX and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == 0:
            raise OSError(errno.EBADF, "Bad file descriptor")
        real_flock(fd, operation)

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(POOL_LIMIT_1)
    monkeypatch.setattr(fcntl, "flock", nfs_flock)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with default_instance() as instance:
        assert LEASE_TAG in run_tags(instance)
        lease, _ = _lease_file(instance)
        with slot_held(instance, LLM_POOL, poll_s=0.02):
            pass
        assert stale_runs.lease_state(instance, lease) == "free"


def test_a_run_that_ends_while_it_is_looked_at_is_not_marked_failed(
    instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its driver's lease went free because the run had just ended: the status is read again
    before the run is marked failed."""
    lease, _ = _lease_file(instance)
    run_id = _holding_run(instance, _driver_tags(lease), DagsterRunStatus.STARTED)
    looked = stale_runs.why_gone

    def ends_meanwhile(instance: DagsterInstance, run: DagsterRun) -> str | None:
        why = looked(instance, run)
        instance.report_dagster_event(
            DagsterEvent(DagsterEventType.RUN_SUCCESS.value, job_name=run.job_name), run.run_id
        )
        return why

    monkeypatch.setattr(stale_runs, "why_gone", ends_meanwhile)
    lines = reclaim_slots(instance)
    assert len(lines) == 1 and "ended (SUCCESS)" in lines[0], lines
    run = instance.get_run_by_id(run_id)
    assert run is not None and run.status == DagsterRunStatus.SUCCESS
    assert _holders(instance) == []


def test_a_token_past_a_lowered_limit_is_given_back(tmp_path: Path) -> None:
    """A driver waiting with token 1 of a pool whose limit drops to 1 gives it back and takes
    one under the new limit: it had kept token 1, so a third driver could pass on token 0 and
    the two both run on one slot."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(POOL_LIMIT_1.replace("limit: 1", "limit: 2"))
    lease, path = _lease_file_in(home)
    with DagsterInstance.from_config(str(home)) as instance:
        for _ in range(2):
            _holding_run(instance, _driver_tags(lease), DagsterRunStatus.STARTED)
        tokens = locks_dir(instance) / "pools"
        tokens.mkdir(parents=True, exist_ok=True)
        (tokens / f"{LLM_POOL}.0.lock").touch()
        holder, other = _holding(path), _holding(tokens / f"{LLM_POOL}.0.lock")
        said: list[str] = []
        waiter = threading.Thread(
            target=lambda: wait_for_slot(instance, LLM_POOL, poll_s=0.02, say=said.append),
            daemon=True,
        )
        try:
            waiter.start()
            deadline = time.monotonic() + 20
            while not said and time.monotonic() < deadline:
                time.sleep(0.01)
            assert said and "limit 2" in said[0]
            assert token_is_held(tokens / f"{LLM_POOL}.1.lock")
            instance.event_log_storage.set_concurrency_slots(LLM_POOL, 1)
            deadline = time.monotonic() + 20
            while token_is_held(tokens / f"{LLM_POOL}.1.lock") and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not token_is_held(tokens / f"{LLM_POOL}.1.lock"), "kept token 1 at limit 1"
        finally:
            holder.kill()
            other.kill()
            holder.wait()
            other.wait()
        waiter.join(timeout=20)
        assert not waiter.is_alive()


def test_gone_drivers_lease_files_are_pruned_once_old_and_unnamed(
    instance: DagsterInstance,
) -> None:
    """Every killed driver leaves an empty lease file; they had piled up for ever. One goes
    when it is free, an hour old, and named by no run holding or waiting for a slot."""
    hour_ago = time.time() - 2 * 3600
    _, old_path = _lease_file(instance)
    named, named_path = _lease_file(instance)
    _, held_path = _lease_file(instance)
    _, new_path = _lease_file(instance)
    for path in (old_path, named_path, held_path):
        os.utime(path, (hour_ago, hour_ago))
    _holding_run(instance, _driver_tags(named), DagsterRunStatus.STARTED)
    with _holding(held_path) as holder:
        try:
            assert stale_runs.prune_leases(instance) == 1
        finally:
            holder.kill()
    assert not old_path.exists()
    assert named_path.exists() and held_path.exists() and new_path.exists()
    assert stale_runs.lease_state(instance, named) == "free"  # its run can still be freed


def test_a_lease_named_by_a_run_that_took_a_slot_meanwhile_is_put_back(
    instance: DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver killed while its leases were looked at, whose run took a slot after the runs
    were read: its lease file comes back, free, so that run's slot can still be freed."""
    lease, path = _lease_file(instance)
    hour_ago = time.time() - 2 * 3600
    os.utime(path, (hour_ago, hour_ago))
    reads = iter([set(), {lease}])
    monkeypatch.setattr(stale_runs, "_named_leases", lambda instance: next(reads))
    assert stale_runs.prune_leases(instance) == 0
    assert path.exists() and stale_runs.lease_state(instance, lease) == "free"


def test_a_lock_file_this_user_cannot_write_is_locked_through_a_read_only_descriptor(
    shared_folder: Path,
) -> None:
    """Another user's lock file (or one on a read-only mount): opening it for writing is
    refused, and the lock is taken on a read-only descriptor, which local file systems allow."""
    path = shared_folder / "token.lock"
    path.touch()
    with without_write_access(shared_folder, path):
        fd = stale_runs.open_lock_file(path, create=False)
        try:
            assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert token_is_held(path)  # a second open file cannot take it meanwhile
        finally:
            os.close(fd)
    assert not token_is_held(path)
