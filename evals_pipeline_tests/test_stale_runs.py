"""Pool slots of runs whose process is gone are freed; a full pool is waited for in the open.

The instance is a real SQLite one with dagster.yaml's `llm` pool at limit 1; a slot is claimed
through Dagster's own storage call, as a step does, for a run record of a process that is gone.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRun, DagsterRunStatus

from evals_pipeline.assets.extraction import LLM_POOL
from evals_pipeline.graph import build_definitions
from evals_pipeline.materialize import materialize_all
from evals_pipeline.stale_runs import PROCESS_TAG, owner_of, reclaim_slots, run_tags, wait_for_slot
from evals_pipeline_tests.pipeline_fixtures import RULES, make_config


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[DagsterInstance]:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n"
    )
    with DagsterInstance.from_config(str(home)) as instance:
        yield instance


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid  # reaped: no process has it (a reuse this soon is vanishingly unlikely)


def _holding_run(instance: DagsterInstance, tag: str | None, status: DagsterRunStatus) -> str:
    """A run record in `status` that holds the pool's one slot, as a step claims it."""
    run_id = str(uuid.uuid4())
    tags = {PROCESS_TAG: tag} if tag is not None else {}
    instance.add_run(DagsterRun(job_name="__ASSET_JOB", run_id=run_id, status=status, tags=tags))
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default(LLM_POOL)
    claim = storage.claim_concurrency_slot(LLM_POOL, run_id, "extractions")
    assert claim.is_claimed
    return run_id


def _holders(instance: DagsterInstance) -> list[str]:
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    return [slot.run_id for slot in info.claimed_slots]


def test_a_killed_runs_slot_is_freed_and_the_run_marked_failed(instance: DagsterInstance) -> None:
    tag = f"{socket.gethostname()}/{_gone_pid()}/"
    run_id = _holding_run(instance, tag, DagsterRunStatus.STARTED)
    assert _holders(instance) == [run_id]
    lines = reclaim_slots(instance)
    assert len(lines) == 1 and run_id in lines[0] and "is gone" in lines[0]
    assert _holders(instance) == []
    run = instance.get_run_by_id(run_id)
    assert run is not None and run.status == DagsterRunStatus.FAILURE


def test_a_live_runs_slot_is_kept(instance: DagsterInstance) -> None:
    own = run_tags()[PROCESS_TAG]  # this very process, start time and all
    run_id = _holding_run(instance, own, DagsterRunStatus.STARTED)
    with subprocess.Popen(["sleep", "30"]) as other:
        other_id = str(uuid.uuid4())
        instance.add_run(
            DagsterRun(
                job_name="x",
                run_id=other_id,
                status=DagsterRunStatus.STARTED,
                tags={PROCESS_TAG: f"{socket.gethostname()}/{other.pid}/"},
            )
        )
        instance.event_log_storage.claim_concurrency_slot(LLM_POOL, other_id, "extractions")
        try:
            assert reclaim_slots(instance) == []
        finally:
            other.kill()
    assert _holders(instance) == [run_id]
    # another machine's run: its pid says nothing here, so it is left alone
    for done in (run_id, other_id):
        instance.event_log_storage.free_concurrency_slots_for_run(done)
    elsewhere = _holding_run(instance, "some-other-host/1/", DagsterRunStatus.STARTED)
    reclaim_slots(instance)
    assert elsewhere in _holders(instance)


def test_a_pid_reused_by_this_process_is_not_taken_for_the_run(instance: DagsterInstance) -> None:
    """In a container the driver's pid repeats from one start to the next: a run tagged with
    this pid but another start time is an earlier process's."""
    run_id = _holding_run(
        instance, f"{socket.gethostname()}/{os.getpid()}/1", DagsterRunStatus.STARTED
    )
    assert run_id in reclaim_slots(instance)[0]


def test_ended_and_unrecorded_runs_give_their_slots_back(instance: DagsterInstance) -> None:
    ended = _holding_run(instance, None, DagsterRunStatus.SUCCESS)
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
    assert PROCESS_TAG in run.tags  # the driver's own runs are tagged
    untagged = DagsterRun(job_name=run.job_name, run_id=run.run_id, status=run.status)
    owner = owner_of(instance, untagged)
    assert owner is not None and owner.pid == os.getpid()  # the executor ran in this process


def test_the_wait_is_visible_and_ends_when_the_holder_dies(instance: DagsterInstance) -> None:
    holder = subprocess.Popen(["sleep", "30"])
    tag = f"{socket.gethostname()}/{holder.pid}/"
    run_id = _holding_run(instance, tag, DagsterRunStatus.STARTED)
    said: list[str] = []
    killer = threading.Timer(0.5, lambda: (holder.kill(), holder.wait()))
    killer.start()
    started = time.monotonic()
    wait_for_slot(instance, LLM_POOL, poll_s=0.05, say=said.append)
    assert time.monotonic() - started < 20
    assert said[0].startswith(
        f"waiting for a slot in Dagster pool 'llm' (limit 1), held by run {run_id}"
    )
    assert f"pid {holder.pid}" in said[0]
    assert any("is gone" in line for line in said[1:])
    assert _holders(instance) == []


def test_the_driver_runs_past_a_killed_runs_slot(instance: DagsterInstance, tmp_path: Path) -> None:
    """Without the reclaim, the first extraction step waits in Dagster's loop for ever."""
    _holding_run(instance, f"{socket.gethostname()}/{_gone_pid()}/", DagsterRunStatus.STARTED)
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


def test_ctrl_c_stops_a_driver_waiting_for_a_slot(tmp_path: Path) -> None:
    """A live run holds the pool's one slot: the driver says who holds it and waits, and
    SIGINT ends it at once with 130 (Dagster's own wait had ignored SIGINT and SIGTERM)."""
    import signal
    import sys

    from evals_pipeline_tests.support.hermetic import hermetic_environ
    from evals_pipeline_tests.test_cli_e2e import good_config

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n"
    )
    with (
        DagsterInstance.from_config(str(home)) as instance,
        subprocess.Popen(["sleep", "120"]) as holder,
    ):
        run_id = _holding_run(
            instance, f"{socket.gethostname()}/{holder.pid}/", DagsterRunStatus.STARTED
        )
        env = {**hermetic_environ(), "DAGSTER_HOME": str(home)}
        driver = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evals_pipeline.materialize",
                "--config",
                str(good_config(tmp_path)),
            ],
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert driver.stderr is not None
            deadline = time.monotonic() + 120
            line = ""
            while time.monotonic() < deadline and "waiting for a slot" not in line:
                line = driver.stderr.readline()
                assert line or driver.poll() is None, "the driver ended without waiting"
            assert f"held by run {run_id}" in line and f"pid {holder.pid}" in line
            driver.send_signal(signal.SIGINT)
            assert driver.wait(timeout=10) == 130
            assert "interrupted" in driver.stderr.read()
        finally:
            driver.kill()
            holder.kill()
