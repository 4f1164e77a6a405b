"""The instance the driver opens (instance.py), and the repository's own dagster.yaml, which
`dagster dev` and the driver run on from the root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import DagsterInstance

from evals_pipeline.instance import INSTANCE_LOCK, _creating
from evals_pipeline_tests.support.locks import token_is_held, without_write_access

REPO = Path(__file__).resolve().parents[1]
POOL_LIMIT_1 = "concurrency:\n  pools:\n    default_limit: 1\ntelemetry:\n  enabled: false\n"


def test_the_repositorys_dagster_yaml_sets_the_llm_pool_slot_freeing_and_local_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # relative paths resolve against the folder it is run from
    with DagsterInstance.get() as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 2
        # The daemon frees slots of runs that ended holding one (stale_runs.py frees the rest).
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 30
        assert not instance.telemetry_enabled
    assert (tmp_path / ".dagster" / "storage" / "history" / "runs.db").is_file()


def test_the_instance_folders_are_ignored_by_git() -> None:
    ignored = (REPO / ".gitignore").read_text().split()
    assert ".dagster/" in ignored or ".dagster" in ignored


def test_two_drivers_opening_a_new_instance_at_once_both_start(tmp_path: Path) -> None:
    """The first process to open a new SQLite instance creates its tables; two at once both
    did, and one died on a raw "table runs already exists". Three start together, three times
    (each waits, its imports done, until all nine are ready)."""
    ready = tmp_path / "ready"
    ready.mkdir()
    script = (
        "import sys, time, pathlib\n"
        "from evals_pipeline.instance import default_instance\n"
        "ready = pathlib.Path(sys.argv[1])\n"
        "(ready / sys.argv[2]).touch()\n"
        "deadline = time.monotonic() + 120\n"
        "while len(list(ready.iterdir())) < 9 and time.monotonic() < deadline:\n"
        "    time.sleep(0.005)\n"
        "instance = default_instance()\n"
        "instance.event_log_storage.get_concurrency_info('llm')\n"
    )
    procs = []
    for pair in range(3):
        home = tmp_path / f"home{pair}"
        home.mkdir()
        (home / "dagster.yaml").write_text(POOL_LIMIT_1)
        env = {**os.environ, "DAGSTER_HOME": str(home)}
        for one in range(3):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", script, str(ready), f"{pair}.{one}"],
                    env=env,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
    failures = [
        err for proc in procs for err in [proc.communicate(timeout=180)[1]] if proc.returncode
    ]
    assert failures == []


def test_an_instance_home_this_user_cannot_write_opens_without_the_creation_lock(
    shared_folder: Path,
) -> None:
    """A read-only DAGSTER_HOME (an instance another user set up): no lock file can be made
    there, and none is needed, since no one creates an instance in it."""
    with without_write_access(shared_folder), _creating(shared_folder):
        pass
    assert not (shared_folder / INSTANCE_LOCK).exists()
    with _creating(shared_folder):  # writable again: the lock file is made and released
        assert token_is_held(shared_folder / INSTANCE_LOCK)
    assert not token_is_held(shared_folder / INSTANCE_LOCK)
