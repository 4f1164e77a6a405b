"""The repository's own dagster.yaml, which `dagster dev` and the driver run on from the root."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dagster import DagsterInstance

REPO = Path(__file__).resolve().parents[1]


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
