"""The golden-set loader: strict fields, verbatim spans (failing by file and claim), status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.claims.golden import GoldenSet, load_golden_set
from evals_pipeline.core.errors import InputFileError
from evals_pipeline_tests.core.claims.helpers import make_golden, write_example

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "corpus" / "golden"


def test_the_shipped_set_loads_with_enough_examples_and_negatives() -> None:
    golden = load_golden_set(SHIPPED)
    assert len(golden) >= 50
    assert (
        sum(1 for e in golden if not e.expected_claims) >= 10
    )  # negatives make precision mean something
    assert all(e.task == "claim_extraction" and e.input_provenance for e in golden)
    assert all(e.notes for e in golden)


def test_verified_and_pending_are_told_apart(tmp_path: Path) -> None:
    golden = load_golden_set(make_golden(tmp_path))
    assert {e.id for e in golden.verified} == {"v-vote", "v-library", "v-negative", "v-fair"}
    assert [e.id for e in golden.pending] == ["p-draft"]
    assert GoldenSet.from_dict(golden.to_dict()) == golden


def test_a_non_verbatim_span_fails_naming_file_and_claim(tmp_path: Path) -> None:
    path = write_example(
        tmp_path,
        "bad-span",
        "The council voted 7 to 2 to approve the budget.",
        [("The council voted seven to two on the budget.", "voted seven to two")],
    )
    with pytest.raises(InputFileError) as caught:
        load_golden_set(tmp_path)
    error = caught.value
    assert error.path == path
    assert error.field == "expected_claims[0].evidence_span"
    assert "The council voted seven to two on the budget." in str(error)
    assert "not a verbatim substring" in str(error)


def test_one_bad_file_fails_the_whole_set(tmp_path: Path) -> None:
    make_golden(tmp_path)
    write_example(tmp_path, "zz-bad", "Short text here.", [("A claim of five words.", "absent")])
    with pytest.raises(InputFileError, match=r"zz-bad\.json"):
        load_golden_set(tmp_path)


@pytest.mark.parametrize(
    ("overrides", "field", "problem"),
    [
        ({"review_status": "APPROVED"}, "review_status", "must be one of"),
        ({"task": "sentiment"}, "task", "task must be"),
        ({"reviewer": "me"}, "reviewer", "unknown field"),
        ({"id": "has space"}, "id", "must be letters"),
        # had listed an example's fields
        (
            {"expected_claims": [{"claim": "c", "evidence_span": "s", "extra": 1}]},
            "expected_claims[0].extra",
            r"unknown field \(a claim has exactly: claim, evidence_span\)",
        ),
    ],
)
def test_bad_fields_fail_naming_the_field(
    tmp_path: Path, overrides: dict[str, Any], field: str, problem: str
) -> None:
    write_example(tmp_path, "x", "The council voted 7 to 2.", [], **overrides)
    with pytest.raises(InputFileError, match=problem) as caught:
        load_golden_set(tmp_path)
    assert caught.value.field == field


def test_a_missing_field_and_bad_claim_shape_fail(tmp_path: Path) -> None:
    path = write_example(tmp_path, "x", "The council voted 7 to 2.", [("Too short.", "voted 7")])
    with pytest.raises(InputFileError, match="5-15 words"):
        load_golden_set(tmp_path)
    path.write_text('{"id": "x", "task": "claim_extraction"}')
    with pytest.raises(InputFileError, match="missing field"):
        load_golden_set(tmp_path)


def test_an_id_other_than_the_file_name_and_an_empty_folder_fail(tmp_path: Path) -> None:
    """An example's recording is `recordings/<id>.json`: an id other than its file's name had
    been accepted, so `claims-053.json` could load as `claims-001`'s example and recording."""
    with pytest.raises(InputFileError, match="no example"):
        load_golden_set(tmp_path)
    write_example(tmp_path, "same", "Text one has words.", [])
    (tmp_path / "copy.json").write_text((tmp_path / "same.json").read_text())
    with pytest.raises(InputFileError) as caught:
        load_golden_set(tmp_path)
    assert (caught.value.path, caught.value.field) == (tmp_path / "copy.json", "id")
    assert "id 'same' does not match its file name (copy.json)" in str(caught.value)


def test_a_folder_named_like_an_example_is_an_error_not_skipped(tmp_path: Path) -> None:
    make_golden(tmp_path)
    (tmp_path / "claims-004.json").mkdir()  # had been left out without a word
    with pytest.raises(InputFileError, match="is a folder, not a golden example file") as caught:
        load_golden_set(tmp_path)
    assert caught.value.path == tmp_path / "claims-004.json"
    (tmp_path / "claims-004.json").rmdir()
    (tmp_path / "claims-004.json").symlink_to(tmp_path / "gone.json")
    with pytest.raises(InputFileError, match="is not a file"):
        load_golden_set(tmp_path)


def test_an_example_named_in_upper_case_is_an_error_not_skipped(tmp_path: Path) -> None:
    make_golden(tmp_path)
    (tmp_path / "claims-053.JSON").write_text("{}")  # had been left out without a word
    with pytest.raises(InputFileError, match=r"ends in \.json, in lower case") as caught:
        load_golden_set(tmp_path)
    assert caught.value.path == tmp_path / "claims-053.JSON"


def test_the_baseline_and_recordings_are_not_read_as_examples(tmp_path: Path) -> None:
    make_golden(tmp_path)
    (tmp_path / "baseline.json").write_text("{}")
    (tmp_path / "recordings").mkdir()
    (tmp_path / "recordings" / "v-vote.json").write_text("{}")
    assert len(load_golden_set(tmp_path)) == 5
