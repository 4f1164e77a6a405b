"""`evals-pipeline compare` through its CLI: what it refuses and how it names the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals_pipeline.cli import main


def test_json_onto_a_compared_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json onto run a had replaced it with the comparison (exit 0)."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}")
    b.write_text("{}")
    for target, which in ((a, "run a"), (tmp_path / "." / "b.json", "run b")):
        assert main(["compare", str(a), str(b), "--json", str(target)]) == 2
        assert f"error: --json {target}: that is {which}" in capsys.readouterr().err
    assert a.read_text() == b.read_text() == "{}"


def test_a_report_of_the_wrong_shape_is_named_by_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"rows": {}}))
    b.write_text("{}")
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "evals-pipeline compare: error: run a: 'rows' must be a non-empty object" in err
    assert f"(run a is {a}, run b is {b})" in err
