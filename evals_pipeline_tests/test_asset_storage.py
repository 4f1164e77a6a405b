"""`asset_storage:` puts every asset value on an fsspec filesystem instead of the local disk.

What a distributed run needs (steps on other machines reading each other's outputs): the IO
managers are UPath-based, so an object-store URL is a config change. `memory://` stands in for
`s3://` here: the same fsspec code path, with no bucket and no network.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
from dagster import DagsterInstance

from evals_pipeline.materialize import materialize_all
from evals_pipeline_tests.pipeline_fixtures import RULES, make_config


def test_pipeline_stores_its_assets_on_an_fsspec_url(tmp_path: Path) -> None:
    root = f"memory://evals-assets-{uuid.uuid4().hex}"
    config = make_config(
        tmp_path,
        {"oracle": "oracle", "rules": f"cassette:path={RULES}"},
        modes=["freeform"],
        claims_gate=False,
        asset_storage=root,
    )
    outcome = materialize_all(config, DagsterInstance.ephemeral(), quiet=True)
    assert outcome.success, outcome.failed_steps
    memory = fsspec.filesystem("memory")
    stored = memory.find(root.removeprefix("memory://"))
    assert any(p.endswith(".parquet") and "extractions" in p for p in stored), stored
    assert any(p.endswith(".json") and "report" in p for p in stored), stored
    assert not (config.cache_dir / "assets").exists()  # nothing went to the local default
