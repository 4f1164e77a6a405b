"""Gate states from the core (no Dagster, no CLI): INACTIVE, PASS, FAIL on drop/stale/missing,
and a baseline writer that only describes verified examples with current recordings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evals_pipeline.core.claims import prompt
from evals_pipeline.core.claims.gate import (
    MAX_F1_DROP,
    RERECORD_INSTRUCTIONS,
    BaselineRefused,
    BaselineScores,
    build_baseline,
    evaluate_gate,
    read_baseline,
    run_gate,
    write_baseline,
)
from evals_pipeline.core.claims.golden import load_golden_set
from evals_pipeline.core.claims.recordings import recording_path
from evals_pipeline.core.errors import InputFileError
from evals_pipeline_tests.core.claims.helpers import (
    PENDING,
    make_golden,
    record,
    write_current_baseline,
    write_example,
)


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    golden_dir = make_golden(tmp_path / "golden")
    record(golden_dir)
    return golden_dir


def gate(golden_dir: Path) -> tuple[str, str]:
    golden = load_golden_set(golden_dir)
    result = run_gate(golden, golden.baseline_path).result
    return result.state, result.render()


def test_no_baseline_is_inactive_and_passes(recorded: Path) -> None:
    state, text = gate(recorded)
    assert state == "INACTIVE"
    assert "no baseline" in text and "4 of 5 golden examples are VERIFIED" in text


def test_inactive_even_when_recordings_are_missing(tmp_path: Path) -> None:
    state, _ = gate(make_golden(tmp_path / "golden"))
    assert state == "INACTIVE"


def test_a_current_baseline_passes(recorded: Path) -> None:
    write_current_baseline(recorded)
    baseline = read_baseline(recorded / "baseline.json")
    assert baseline is not None and baseline.micro.f1 == 1.0
    assert baseline.examples == ("v-fair", "v-library", "v-negative", "v-vote")
    assert baseline.fingerprint == prompt.prompt_fingerprint()
    assert gate(recorded)[0] == "PASS"


def test_an_f1_drop_beyond_0_02_fails(recorded: Path) -> None:
    write_current_baseline(recorded)
    record(recorded, lossy=True)  # a worse "model", recorded live under the same prompt
    state, text = gate(recorded)
    assert state == "FAIL"
    assert "micro-F1 0.667 is 0.333 below the baseline 1.000" in text
    assert RERECORD_INSTRUCTIONS in text


def test_a_drop_of_exactly_0_02_passes_and_just_more_fails(recorded: Path) -> None:
    # A file's scores must be the ones its counts give (see the next test), and no integer
    # counts give F1 + 0.02 exactly: the comparison is tested on a baseline built in memory.
    write_current_baseline(recorded)
    record(recorded, lossy=True)
    golden = load_golden_set(recorded)
    report = run_gate(golden, golden.baseline_path)
    assert report.baseline is not None and report.result.state == "FAIL"
    current = report.summary.counted.f1
    for f1, state in ((current + MAX_F1_DROP, "PASS"), (current + MAX_F1_DROP + 0.001, "FAIL")):
        micro = BaselineScores.model_construct(**{**report.baseline.micro.__dict__, "f1": f1})
        baseline = report.baseline.model_copy(update={"micro": micro})
        result = evaluate_gate(golden, report.replay, report.summary, baseline, Path("b.json"))
        assert result.state == state, (f1, result.render())


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("f1", float("nan"), "finite number"),  # NaN had passed every gate: no drop is > NaN
        ("f1", -1.0, "greater than or equal to 0"),
        ("f1", 1.5, "less than or equal to 1"),
        ("f1", "0.99", "valid number"),  # had been read as 0.99
        ("precision", True, "valid number"),  # had been read as 1.0
        ("tp", 3.0, "valid integer"),
        ("f1", 0.5, "is not the f1 of tp/fp/fn (1)"),  # a hand edit that lowers the bar
        ("recall", 0.9, "is not the recall of tp/fp/fn (1)"),
    ],
)
def test_a_baseline_score_that_is_not_a_counted_score_is_named(
    recorded: Path, field: str, value: object, problem: str
) -> None:
    write_current_baseline(recorded)
    path = recorded / "baseline.json"
    data = json.loads(path.read_text())
    data["micro"][field] = value
    path.write_text(json.dumps(data))  # NaN as the token NaN, which Python's JSON reads
    with pytest.raises(InputFileError, match=re.escape(problem)) as err:
        read_baseline(path)
    assert (err.value.path, err.value.field) == (path, f"micro.{field}")


@pytest.mark.parametrize("value", [0, 1.5, float("nan"), "0.5"])
def test_a_baseline_iou_threshold_out_of_range_is_named(recorded: Path, value: object) -> None:
    write_current_baseline(recorded)
    path = recorded / "baseline.json"
    data = json.loads(path.read_text())
    data["iou_threshold"] = value
    path.write_text(json.dumps(data))
    with pytest.raises(InputFileError) as err:
        read_baseline(path)
    assert err.value.field == "iou_threshold"


def test_a_prompt_edit_without_re_recording_fails(
    recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_current_baseline(recorded)
    monkeypatch.setattr(
        prompt, "CLAIM_SYSTEM_PROMPT", prompt.CLAIM_SYSTEM_PROMPT + "\n- Prefer short claims."
    )
    state, text = gate(recorded)
    assert state == "FAIL"
    for example_id in ("v-fair", "v-library", "v-negative", "v-vote"):
        assert f"{example_id}: stale recording" in text
    assert "evals-pipeline gate --mode live --record" in text


def test_re_recording_after_a_prompt_edit_passes_again(
    recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_current_baseline(recorded)
    monkeypatch.setattr(prompt, "CLAIM_PROMPT_VERSION", "claims/2")
    assert gate(recorded)[0] == "FAIL"
    record(recorded)
    state, text = gate(recorded)
    assert state == "PASS"
    assert "baseline was written under prompt claims/1" in text  # a reminder, not a failure


def test_a_missing_verified_recording_fails(recorded: Path) -> None:
    write_current_baseline(recorded)
    recording_path(recorded / "recordings", "v-negative").unlink()
    state, text = gate(recorded)
    assert state == "FAIL" and "v-negative: missing recording" in text


def test_a_missing_pending_recording_is_only_reported(recorded: Path) -> None:
    write_current_baseline(recorded)
    recording_path(recorded / "recordings", "p-draft").unlink()
    state, text = gate(recorded)
    assert state == "PASS"
    assert "1 PENDING_HUMAN_REVIEW example(s) not scored" in text and "p-draft" in text


def test_pending_examples_never_move_the_counted_score(recorded: Path) -> None:
    write_current_baseline(recorded)
    text, _claims = PENDING["p-draft"]
    # The pending example's labels now disagree with its recording: pending F1 drops, not counted.
    write_example(
        recorded,
        "p-draft",
        text,
        [("Detours during the closure use Elm Avenue.", "Detours use Elm Avenue")],
        status="PENDING_HUMAN_REVIEW",
    )
    golden = load_golden_set(recorded)
    report = run_gate(golden, golden.baseline_path)
    assert report.summary.pending.f1 == 0.0
    assert report.summary.counted.f1 == 1.0 and report.result.state == "PASS"


def test_a_baseline_with_no_verified_example_left_fails(recorded: Path) -> None:
    write_current_baseline(recorded)
    for path in recorded.glob("v-*.json"):
        data = json.loads(path.read_text())
        data["review_status"] = "PENDING_HUMAN_REVIEW"
        path.write_text(json.dumps(data))
    state, text = gate(recorded)
    assert state == "FAIL" and "no golden example is VERIFIED" in text


def test_the_writer_refuses_without_verified_examples(tmp_path: Path) -> None:
    golden_dir = tmp_path / "golden"
    text, claims = PENDING["p-draft"]
    write_example(golden_dir, "p-draft", text, claims, status="PENDING_HUMAN_REVIEW")
    record(golden_dir)
    golden = load_golden_set(golden_dir)
    report = run_gate(golden, golden.baseline_path)
    with pytest.raises(BaselineRefused, match="no golden example is VERIFIED"):
        build_baseline(golden, report.replay, report.summary)


@pytest.mark.parametrize("damage", ["delete", "stale"])
def test_the_writer_refuses_incomplete_or_stale_recordings(
    recorded: Path, damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if damage == "delete":
        recording_path(recorded / "recordings", "v-vote").unlink()
    else:
        monkeypatch.setattr(prompt, "CLAIM_PROMPT_VERSION", "claims/next")
    golden = load_golden_set(recorded)
    report = run_gate(golden, golden.baseline_path)
    with pytest.raises(BaselineRefused, match="lack a complete, current recording") as caught:
        build_baseline(golden, report.replay, report.summary)
    assert "v-vote" in str(caught.value)
    assert not golden.baseline_path.exists()


def test_a_pending_example_without_recording_does_not_block_the_writer(recorded: Path) -> None:
    recording_path(recorded / "recordings", "p-draft").unlink()
    golden = load_golden_set(recorded)
    report = run_gate(golden, golden.baseline_path)
    baseline = build_baseline(golden, report.replay, report.summary)
    write_baseline(golden.baseline_path, baseline)
    assert "p-draft" not in baseline.examples


def test_an_unreadable_baseline_is_an_input_error(recorded: Path) -> None:
    (recorded / "baseline.json").write_text('{"micro": 1}')
    with pytest.raises(InputFileError):
        read_baseline(recorded / "baseline.json")


def test_dropping_a_verified_example_from_the_counted_set_fails(recorded: Path) -> None:
    """Moving a hard example back to PENDING must not lift the gate's score past it."""
    write_current_baseline(recorded)
    path = recorded / "v-vote.json"
    data = json.loads(path.read_text())
    data["review_status"] = "PENDING_HUMAN_REVIEW"
    path.write_text(json.dumps(data))
    state, text = gate(recorded)
    assert state == "FAIL" and "no longer VERIFIED or gone: ['v-vote']" in text


def test_a_baseline_scored_at_another_iou_threshold_fails(recorded: Path) -> None:
    write_current_baseline(recorded)
    path = recorded / "baseline.json"
    data = json.loads(path.read_text())
    data["iou_threshold"] = 0.5
    path.write_text(json.dumps(data))
    state, text = gate(recorded)
    assert state == "FAIL" and "span IoU >= 0.5" in text


def test_a_named_baseline_that_is_missing_is_an_error_not_inactive(recorded: Path) -> None:
    golden = load_golden_set(recorded)
    typo = recorded / "baselin.json"
    assert run_gate(golden, typo).result.state == "INACTIVE"  # the default path: by design
    with pytest.raises(InputFileError, match="no baseline file here, though one was named"):
        run_gate(golden, typo, baseline_required=True)
    with pytest.raises(InputFileError, match="is a folder"):
        read_baseline(recorded)


def test_with_no_verified_example_scored_the_headline_claims_no_f1(recorded: Path) -> None:
    write_current_baseline(recorded)
    for example_id in ("v-fair", "v-library", "v-negative", "v-vote"):
        recording_path(recorded / "recordings", example_id).unlink()
    state, text = gate(recorded)
    # The empty pool's F1 is 1.0 by convention; the headline had printed it as the score.
    assert state == "FAIL" and "claim gate FAIL: no VERIFIED example scored vs baseline" in text
    assert "counted micro-F1 1.000" not in text
    # Nor does the stored result (the asset's and --output's JSON) say 1.0.
    golden = load_golden_set(recorded)
    stored = run_gate(golden, golden.baseline_path).result.to_dict()
    assert (stored["micro_f1"], stored["scored"]) == (None, 0)


def test_a_baseline_under_another_name_in_the_golden_folder_is_no_example(recorded: Path) -> None:
    """`claims_baseline` may name a file beside the examples: it is the baseline, not an example
    with unknown fields."""
    write_current_baseline(recorded)
    named = recorded / "gate-baseline.json"
    (recorded / "baseline.json").rename(named)
    with pytest.raises(InputFileError):
        load_golden_set(recorded)  # read as an example, it is not one
    golden = load_golden_set(recorded, named)
    assert run_gate(golden, named).result.state == "PASS"


def test_an_inactive_gate_with_nothing_scored_stores_no_f1(recorded: Path) -> None:
    """The shipped state (no baseline, nothing recorded): the text said n/a, but the JSON of
    `gate --output` and the asset had stored micro_f1 1.0 and a counted pool of 0 examples at
    F1 1.0, a perfect score for nothing measured."""
    for example_id in ("v-fair", "v-library", "v-negative", "v-vote"):
        recording_path(recorded / "recordings", example_id).unlink()
    golden = load_golden_set(recorded)
    report = run_gate(golden, recorded / "no-baseline.json")
    assert report.result.state == "INACTIVE"
    assert (report.result.to_dict()["micro_f1"], report.result.to_dict()["scored"]) == (None, 0)
    counted = report.summary.to_dict()["counted"]
    assert counted["examples"] == 0
    assert (counted["precision"], counted["recall"], counted["f1"]) == (None, None, None)
