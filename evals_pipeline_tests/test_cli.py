"""The operator CLI in-process: flag rules, exit codes and --output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evals_pipeline.cli import main
from evals_pipeline_tests.pipeline_fixtures import CORPUS, ONTOLOGY, RULES


def write_config(tmp_path: Path, modes: list[str]) -> Path:
    path = tmp_path / "evals.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "backends": {"oracle": "oracle", "rules": f"cassette:path={RULES}"},
                "reference": "oracle",
                "corpus": str(CORPUS),
                "ontology": str(ONTOLOGY),
                "scope": 2,
                "modes": modes,
                "output_dir": str(tmp_path / "reports"),
                "cache_dir": str(tmp_path / "cache"),
            }
        )
    )
    return path


def test_output_with_several_modes_is_the_mode_matrix_json(tmp_path: Path) -> None:
    config = write_config(tmp_path, ["open", "strict"])
    assert main(["--config", str(config), "--output", str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["modes"] == ["open", "strict"]


def test_output_with_one_mode_is_that_report(tmp_path: Path) -> None:
    config = write_config(tmp_path, ["open", "strict"])
    args = ["--config", str(config), "--ontology-mode", "open", "--output", str(tmp_path / "o")]
    assert main(args) == 0  # the flag narrows the file's modes to one
    assert json.loads((tmp_path / "o").read_text())["ontology_mode"] == "open"


def test_ontology_mode_without_any_ontology_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as err:
        main(["--backend", "a=oracle", "--reference", "a", "--ontology-mode", "strict"])
    assert err.value.code == 2


def test_input_errors_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "evals.yaml"
    bad.write_text("backends: {a: oracle}\nreference: nobody\n")
    assert main(["--config", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "[reference]" in err


def test_dry_run_exits_0_with_a_guard_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "--backend", "a=oracle",
        "--backend", f"b=cassette:path={RULES}",
        "--backend", f"c=cassette:path={RULES}",
        "--reference", "a", "--corpus", str(CORPUS), "--ontology", str(ONTOLOGY),
        "--record-cassette", f"b={tmp_path / 'rec.jsonl'}",
        "--output-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c"), "--dry-run",
    ]  # fmt: skip
    before = sorted(tmp_path.rglob("*"))
    assert main(args) == 0
    assert sorted(tmp_path.rglob("*")) == before
    out = capsys.readouterr().out
    assert "[distinct_cassettes]" in out and "[no_record_on_replay]" in out
    assert "ontology modes: strict" in out  # an ontology and no mode: strict
