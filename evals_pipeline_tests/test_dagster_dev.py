"""Acceptance: `dagster dev` serves the asset graph built from a project file.

Starts the real webserver and daemon (`dagster dev -w workspace.yaml`, the shipped workspace
file) on a free loopback port against a hermetic config in tmp_path, waits for `/server_info`,
and asks GraphQL for the asset nodes, their partition keys and their asset checks.

The server runs in its own session (process group) with SIGINT's handler reset before exec, so
SIGTERM to the group stops it; every wait is bounded, and the group is SIGKILLed if it lingers.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from evals_pipeline_tests.support.deterministic_backend import openai_responder
from evals_pipeline_tests.support.hermetic import hermetic_environ
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer

REPO = Path(__file__).resolve().parents[1]
# The `dagster` script of the interpreter running the tests (the project's venv).
DAGSTER = str(Path(sys.executable).parent / "dagster")
CORPUS = REPO / "corpus" / "prose" / "chunks.jsonl"
ONTOLOGY = REPO / "ontologies" / "prose.yaml"
CASSETTES = REPO / "corpus" / "cassettes"

STARTUP_TIMEOUT_S = 60.0  # answered after 10-14 s on a 2-core machine
REQUEST_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0

BACKENDS = ("oracle", "rules", "sloppy")
MODES = ("freeform", "open", "strict")
ASSETS = {
    "corpus",
    "run_plan",
    "extractions",
    "scores",
    "reference_comparison",
    "report",
    "mode_matrix_report",
}
PLAN_CHECKS = {
    "cassette_integrity",
    "distinct_cassettes",
    "no_record_on_replay",
    "recording_targets",
    "live_credentials",
    "run_inputs",
}

QUERY = """
{
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError {
          __typename
          ... on PythonError { message }
        }
      }
    }
  }
  assetNodes {
    assetKey { path }
    isPartitioned
    partitionKeys
    partitionDefinition { dimensionTypes { name } }
    assetChecksOrError {
      __typename
      ... on AssetChecks { checks { name blocking } }
    }
  }
}
"""


LOAD_STATUS_QUERY = "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_project(
    tmp_path: Path,
    extra: str = "",
    instance: str = "",
    rules: Path = CASSETTES / "rules.jsonl",
    backends: str = "",
) -> tuple[Path, Path]:
    """A config over the repo's inputs writing only under tmp_path, and a DAGSTER_HOME.
    `extra` is appended to the project file, `instance` to the instance's dagster.yaml;
    `rules` is the rules backend's cassette, and `backends` more backends' lines."""
    config = tmp_path / "evals.yaml"
    config.write_text(
        "backends:\n"
        "  oracle: oracle\n"
        f"  rules: cassette:path={rules}\n"
        f"  sloppy: cassette:path={CASSETTES / 'sloppy.jsonl'}\n" + backends + "reference: oracle\n"
        f"corpus: {CORPUS}\n"
        "scope: 4\n"
        f"ontology: {ONTOLOGY}\n"
        "modes: [freeform, open, strict]\n"
        f"output_dir: {tmp_path / 'reports'}\n"
        f"cache_dir: {tmp_path / 'cache'}\n"
        "judge:\n"
        f"  cache: {tmp_path / 'judge_cache.jsonl'}\n"
        "claims_gate: false\n" + extra
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n" + instance)
    return config, home


def _env(config: Path, home: Path) -> dict[str, str]:
    env = hermetic_environ()
    env["EVALS_CONFIG"] = str(config)
    env["DAGSTER_HOME"] = str(home.resolve())
    return env


def _reset_sigint() -> None:
    # `dagster dev` started in the background ignores SIGTERM unless SIGINT's handler is reset.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a reused id owned by someone else
        return False
    return True


def _wait_group_gone(pgid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _stop(proc: subprocess.Popen[bytes]) -> str:
    """SIGTERM the server's process group, then SIGKILL whatever is left of it.

    Returns how it went, for assertion messages.
    """
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_TIMEOUT_S)
    if _wait_group_gone(pgid, 5.0):
        return f"stopped by SIGTERM in {time.monotonic() - started:.1f} s"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
    _wait_group_gone(pgid, 5.0)
    return f"SIGKILLed after SIGTERM was ignored for {time.monotonic() - started:.1f} s"


def _tail(log: Path, n: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


@contextlib.contextmanager
def _dagster_dev(
    tmp_path: Path, extra: str = "", instance: str = "", **project: Any
) -> Iterator[tuple[str, Path, subprocess.Popen[bytes], list[str]]]:
    config, home = _write_project(tmp_path, extra, instance, **project)
    shutil.copyfile(REPO / "workspace.yaml", tmp_path / "workspace.yaml")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "dagster_dev.log"
    stopped: list[str] = []
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=tmp_path,
            env=_env(config, home),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_reset_sigint,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"dagster dev exited with {proc.returncode}:\n{_tail(log)}")
            try:
                if httpx.get(f"{base}/server_info", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"dagster dev did not answer in {STARTUP_TIMEOUT_S} s:\n{_tail(log)}")
            time.sleep(0.5)
        # The webserver can answer before the code location has finished loading.
        while not _locations_loaded(base):
            if time.monotonic() > deadline:
                pytest.fail(f"code location not loaded in {STARTUP_TIMEOUT_S} s:\n{_tail(log)}")
            time.sleep(0.5)
        yield base, log, proc, stopped
    finally:
        stopped.append(_stop(proc))


def _locations_loaded(base: str) -> bool:
    try:
        data = _graphql(base, LOAD_STATUS_QUERY)
    except (httpx.HTTPError, AssertionError, ValueError):
        return False
    workspace = data["workspaceOrError"]
    entries = workspace.get("locationEntries") or []
    return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)


def _graphql(base: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = {"query": query, "variables": variables or {}}
    response = httpx.post(f"{base}/graphql", json=payload, timeout=REQUEST_TIMEOUT_S)
    response.raise_for_status()
    body = response.json()
    assert "errors" not in body, body["errors"]
    return body["data"]


def test_dagster_dev_serves_the_partitioned_asset_graph(tmp_path: Path) -> None:
    started = time.monotonic()
    with _dagster_dev(tmp_path) as (base, log, proc, stopped):
        ready = time.monotonic() - started
        info = httpx.get(f"{base}/server_info", timeout=REQUEST_TIMEOUT_S).json()
        data = _graphql(base, QUERY)
    how = f"ready after {ready:.1f} s; {stopped[0]}"
    assert proc.returncode is not None, how
    assert not _group_alive(proc.pid), f"dagster dev's process group survived the stop ({how})"

    assert "dagster_version" in info
    workspace = data["workspaceOrError"]
    assert workspace["__typename"] == "Workspace", workspace
    locations = workspace["locationEntries"]
    assert locations, "no code location loaded"
    for entry in locations:
        loaded = entry["locationOrLoadError"]
        assert loaded["__typename"] == "RepositoryLocation", (entry, _tail(log))

    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    # The graph may grow (e.g. judging assets); these are the ones this test is about.
    assert set(nodes) >= ASSETS, sorted(nodes)

    per_backend = {f"{b}|{m}" for b in BACKENDS for m in MODES}
    for name in ("extractions", "scores"):
        node = nodes[name]
        assert node["isPartitioned"]
        assert "rules|strict" in node["partitionKeys"]
        assert len(node["partitionKeys"]) == len(BACKENDS) * len(MODES) == 9
        assert set(node["partitionKeys"]) == per_backend
        dims = [d["name"] for d in node["partitionDefinition"]["dimensionTypes"]]
        assert sorted(dims) == ["backend", "ontology_mode"]

    for name in ("corpus", "run_plan", "reference_comparison", "report"):
        node = nodes[name]
        assert node["isPartitioned"], name
        assert sorted(node["partitionKeys"]) == list(MODES), name

    matrix = nodes["mode_matrix_report"]
    assert matrix["isPartitioned"] is False
    assert matrix["partitionKeys"] == []
    assert matrix["partitionDefinition"] is None

    plan_checks = nodes["run_plan"]["assetChecksOrError"]
    assert plan_checks["__typename"] == "AssetChecks", plan_checks
    checks = {c["name"]: c["blocking"] for c in plan_checks["checks"]}
    assert set(checks) >= PLAN_CHECKS, checks
    assert all(checks[name] for name in PLAN_CHECKS), checks  # blocking: they gate extraction

    comparison_checks = nodes["reference_comparison"]["assetChecksOrError"]["checks"]
    assert {"fresh_recordings_distinct", "distinct_outputs"} <= {
        c["name"] for c in comparison_checks
    }


LAUNCH_BACKFILL = """
mutation ($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}
"""

BACKFILL_RUNS = """
query ($id: String!) {
  runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
    __typename
    ... on Runs {
      results {
        runId
        status
        startTime
        endTime
        tags { key value }
        eventConnection { events { __typename ... on MessageEvent { stepKey } } }
      }
    }
  }
}
"""

BACKFILL_TIMEOUT_S = 240.0


def _launch_backfill(base: str, params: dict[str, Any]) -> str:
    """A backfill launched as the UI launches one; its id."""
    launched = _graphql(base, LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return str(launched["backfillId"])


DONE = {"SUCCESS", "FAILURE", "CANCELED"}


def test_a_backfill_runs_the_mode_partitions_in_parallel_on_the_multiprocess_executor(
    tmp_path: Path,
) -> None:
    """A backfill across the ontology-mode partitions, launched as from the UI, is one run per
    partition; the daemon's run queue launches them together (each in a process of its own,
    each step in a process of its own under `executor: multiprocess`), and they overlap."""
    extra = "executor: multiprocess\nmax_concurrent: 1\n"
    instance = "concurrency:\n  runs:\n    max_concurrent_runs: 3\n"
    with _dagster_dev(tmp_path, extra, instance) as (base, log, _proc, _stopped):
        params = {"assetSelection": [{"path": ["corpus"]}], "partitionNames": list(MODES)}
        backfill = _launch_backfill(base, params)
        deadline = time.monotonic() + BACKFILL_TIMEOUT_S
        while True:
            runs = _graphql(base, BACKFILL_RUNS, {"id": backfill})["runsOrError"]["results"]
            if len(runs) == len(MODES) and all(r["status"] in DONE for r in runs):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"backfill not done in {BACKFILL_TIMEOUT_S} s: {runs}\n{_tail(log)}")
            time.sleep(1.0)
    partitions = {t["value"] for r in runs for t in r["tags"] if t["key"] == "dagster/partition"}
    assert partitions == set(MODES)  # one run per partition
    assert all(r["status"] == "SUCCESS" for r in runs), runs
    for run in runs:
        kinds = [e["__typename"] for e in run["eventConnection"]["events"]]
        assert "StepWorkerStartedEvent" in kinds, kinds  # the step ran in a process of its own
    # Each run started before the one launched before it finished: the partitions ran at the
    # same time. (The queue launches them a few seconds apart, so the first may end before the
    # third starts; run one at a time, no two would overlap.)
    windows = sorted((r["startTime"], r["endTime"]) for r in runs)
    assert all(later[0] < earlier[1] for earlier, later in itertools.pairwise(windows)), windows


BACKFILL_STATUS = """
query ($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status }
    ... on PythonError { message }
  }
}
"""


def test_a_backfill_stops_at_a_failed_guard_before_any_paid_call(tmp_path: Path) -> None:
    """A backfill of corpus, run_plan and extractions over every partition, with one backend's
    cassette corrupt (a key recorded twice): run_plan fails its blocking check in every mode,
    and no extraction runs, not even the live backend's, whose calls had all gone out (the
    daemon launches each extraction partition in a run of its own once run_plan's partition
    is materialised, and a blocking check had left it materialised)."""
    lines = (CASSETTES / "rules.jsonl").read_text().splitlines(keepends=True)
    corrupt = tmp_path / "rules.jsonl"
    corrupt.write_text("".join([*lines, lines[0]]))
    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        live = f"  local: oai-http:url={server.base_url},model=rules\n"
        with _dagster_dev(tmp_path, rules=corrupt, backends=live) as (base, log, _proc, _s):
            assets = [{"path": [name]} for name in ("corpus", "run_plan", "extractions")]
            backfill = _launch_backfill(base, {"assetSelection": assets, "allPartitions": True})
            deadline = time.monotonic() + BACKFILL_TIMEOUT_S
            while True:
                status = _graphql(base, BACKFILL_STATUS, {"id": backfill})
                status = status["partitionBackfillOrError"]["status"]
                if status not in ("REQUESTED", "CANCELING"):
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"backfill not done in {BACKFILL_TIMEOUT_S} s\n{_tail(log)}")
                time.sleep(1.0)
            runs = _graphql(base, BACKFILL_RUNS, {"id": backfill})["runsOrError"]["results"]
        assert server.requests == [], f"{len(server.requests)} LLM requests"
    steps = {e.get("stepKey") for r in runs for e in r["eventConnection"]["events"]}
    assert "run_plan" in steps and "extractions" not in steps, steps
    assert runs and all(r["status"] == "FAILURE" for r in runs), runs
