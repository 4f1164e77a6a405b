"""`executor: multiprocess` in the project file runs a run's independent steps in parallel.

The shipped default is the in-process executor (a step spawn costs ~3 s on a small machine).
Here the same definitions, built from a project file that selects the multiprocess executor,
run one partition's report layer on a persistent instance (multiprocess needs one): its two
independent mode-partitioned steps, `reference_comparison` and `pairwise_tallies`, each run in
a process of their own, and the event log shows the second step's process up and running before
the first step finished. The same run with `max_concurrent: 1` is the control: there the second
process is launched only after the first step finished, so the overlap is the executor's doing,
not an artefact of how it is measured.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from dagster import (
    DagsterEventType,
    DagsterInstance,
    Definitions,
    JobDefinition,
    define_asset_job,
    execute_job,
    reconstructable,
)

from evals_pipeline.core.config import CONFIG_ENV, load_config
from evals_pipeline.graph import build_definitions
from evals_pipeline.materialize import materialize_all
from evals_pipeline_tests.pipeline_fixtures import CORPUS, ONTOLOGY, RULES, SLOPPY

PARALLEL = ("pairwise_tallies", "reference_comparison")
MODE = "freeform"


def report_layer_job() -> JobDefinition:
    """The two steps, as a job of the project's own definitions (its assets, resources and
    executor). Module level, so each step's subprocess can rebuild it (from EVALS_CONFIG)."""
    config = load_config(Path(os.environ[CONFIG_ENV]))
    defs = build_definitions(config)
    job = define_asset_job("report_layer", selection=list(PARALLEL))  # partitions inferred
    return Definitions(
        assets=defs.assets, resources=defs.resources, executor=defs.executor, jobs=[job]
    ).resolve_job_def("report_layer")


def report_layer_job_control() -> JobDefinition:
    """The same job under a second pointer: Dagster caches a reconstructed job per pointer in
    the run worker's process, and the control's project file differs (max_concurrent: 1)."""
    return report_layer_job()


def _write_project(folder: Path, max_concurrent: int) -> Path:
    """A project file; both variants share one storage folder, so upstream is built once."""
    path = folder / f"evals-max{max_concurrent}.yaml"
    data = {
        "backends": {
            "oracle": "oracle",
            "rules": f"cassette:path={RULES}",
            "sloppy": f"cassette:path={SLOPPY}",
        },
        "reference": "oracle",
        "corpus": str(CORPUS),
        "ontology": str(ONTOLOGY),
        "scope": 4,
        "modes": [MODE],
        "output_dir": str(folder / "reports"),
        "cache_dir": str(folder / "cache"),
        "judge": {"cache": str(folder / "judge_cache.jsonl")},
        "claims_gate": False,
        "executor": "multiprocess",
        "max_concurrent": max_concurrent,
    }
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def _step_windows(instance: DagsterInstance, run_id: str) -> dict[str, dict[str, float]]:
    """Per step: when its process was launched and came up, when the step finished, its pid."""
    wanted = {
        DagsterEventType.STEP_WORKER_STARTING: "launched",  # the run worker spawns the process
        DagsterEventType.STEP_WORKER_STARTED: "running",  # the process reports it is up
        DagsterEventType.STEP_START: "started",
        DagsterEventType.STEP_SUCCESS: "finished",
    }
    windows: dict[str, dict[str, float]] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.event_type not in wanted or event.step_key is None:
            continue
        window = windows.setdefault(event.step_key, {})
        window[wanted[event.event_type]] = entry.timestamp
        if event.event_type == DagsterEventType.STEP_START:
            window["pid"] = float(event.pid or 0)
    return windows


def _run_layer(
    instance: DagsterInstance, project: Path, monkeypatch: pytest.MonkeyPatch, control: bool
) -> dict[str, dict[str, float]]:
    monkeypatch.setenv(CONFIG_ENV, str(project))  # inherited by the step subprocesses
    result = execute_job(
        reconstructable(report_layer_job_control if control else report_layer_job),
        instance=instance,
        tags={"dagster/partition": MODE},
    )
    assert result.success
    windows = _step_windows(instance, result.run_id)
    assert sorted(windows) == sorted(PARALLEL), windows
    keys = {"launched", "running", "started", "finished", "pid"}
    assert all(keys <= set(w) for w in windows.values()), windows
    return windows


def test_multiprocess_executor_overlaps_independent_partition_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parallel_project = _write_project(tmp_path, max_concurrent=2)
    serial_project = _write_project(tmp_path, max_concurrent=1)
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = DagsterInstance.local_temp(str(home))  # persistent: multiprocess needs one
    # Upstream layers through the driver (in-process runs, same instance and IO storage).
    assert materialize_all(load_config(parallel_project), instance, quiet=True).success

    parallel = _run_layer(instance, parallel_project, monkeypatch, control=False)
    first, second = sorted(parallel.values(), key=lambda w: w["launched"])
    # Each step in a process of its own, neither of them the test's.
    assert first["pid"] != second["pid"] and os.getpid() not in (first["pid"], second["pid"])
    # The second step's process was launched and running before the first step finished.
    assert second["launched"] < first["finished"]
    assert second["running"] < first["finished"]

    serial = _run_layer(instance, serial_project, monkeypatch, control=True)
    first, second = sorted(serial.values(), key=lambda w: w["launched"])
    assert second["launched"] >= first["finished"]  # the control: one at a time
