"""`asset_storage:` puts every asset value on an fsspec filesystem instead of the local disk.

What a distributed run needs (steps on other machines reading each other's outputs): the IO
managers are UPath-based, so an object-store URL is a config change. `memory://` stands in for
`s3://` here: the same fsspec code path, with no bucket and no network.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import fsspec
import pytest
from dagster import DagsterInstance

from evals_pipeline.cli import main as cli_main
from evals_pipeline.materialize import materialize_all
from evals_pipeline_tests.pipeline_fixtures import CORPUS, RULES, make_config


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


@pytest.mark.parametrize(
    ("storage", "why", "dry_run_too"),
    [  # each had failed the run's first step; the unknown scheme without a reason shown
        ("foo://bucket/evals", "unknown storage scheme 'foo': give a folder or an fsspec", True),
        ("{afile}/sub", "cannot be made: {afile} is a file, not a folder", True),
        ("file://{afile}/sub", "cannot be made: {afile} is a file, not a folder", True),
        # A real run's, not the definitions' (a webserver without s3fs still loads them).
        ("s3://bucket/evals", "Install s3fs", False),
    ],
)
def test_a_storage_no_step_could_use_is_refused_by_its_field(
    storage: str,
    why: str,
    dry_run_too: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if storage.startswith("s3://") and importlib.util.find_spec("s3fs") is not None:
        pytest.skip("s3fs is installed here")  # pragma: no cover - not a dependency
    afile = tmp_path / "afile"
    afile.write_text("")
    storage, why = storage.format(afile=afile), why.format(afile=afile)
    config = tmp_path / "evals.yaml"
    config.write_text(
        f"backends: {{oracle: oracle}}\nreference: oracle\nmodes: [freeform]\n"
        f"corpus: {CORPUS}\nclaims_gate: false\nasset_storage: '{storage}'\n"
        f"output_dir: {tmp_path / 'reports'}\ncache_dir: {tmp_path / 'cache'}\n"
    )
    argv = ["--config", str(config), "--limit", "1"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert f"evals.yaml [asset_storage]: {storage}: {why}" in err, err
    assert cli_main([*argv, "--dry-run"]) == (2 if dry_run_too else 0)
    if dry_run_too:
        assert "[asset_storage]" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists() and not (tmp_path / "cache").exists()
