"""Span-IoU matching (threshold 0.3, optimal one-to-one) and micro P/R/F1 over VERIFIED only."""

from __future__ import annotations

from pathlib import Path

import pytest

from evals_pipeline.core.claims.extractor import Claim
from evals_pipeline.core.claims.golden import GoldenExample, load_golden_set
from evals_pipeline.core.claims.scoring import (
    locate,
    match_claims,
    render_diffs_markdown,
    score_golden_set,
    span_iou,
)
from evals_pipeline_tests.core.claims.helpers import make_golden

TEXT = "0123456789" * 4  # 40 characters with known offsets


def at(start: int, end: int, claim: str = "") -> Claim:
    return Claim(claim=claim or f"claim on {start} to {end}", evidence_span=TEXT[start:end])


def test_iou_of_character_ranges() -> None:
    assert span_iou((0, 10), (0, 10)) == 1.0
    assert span_iou((0, 10), (5, 15)) == pytest.approx(5 / 15)
    assert span_iou((0, 10), (10, 20)) == 0.0
    assert span_iou(None, (0, 10)) == 0.0
    assert locate("", TEXT) is None and locate("zz", TEXT) is None


def test_the_threshold_is_inclusive_at_0_3() -> None:
    # Golden [0, 10); [7, 10) gives IoU 3/10 = 0.3 exactly, [8, 10) gives 0.2.
    # TEXT repeats every 10 characters, so spans are located at their first occurrence.
    golden = [Claim(claim="golden claim of ten chars", evidence_span="0123456789")]
    assert len(match_claims([Claim(claim="a", evidence_span="789")], golden, TEXT)) == 1
    assert match_claims([Claim(claim="a", evidence_span="89")], golden, TEXT) == ()


def test_matching_is_one_to_one() -> None:
    golden = [at(0, 10)]
    predicted = [at(0, 10, "first"), at(0, 9, "second")]
    matches = match_claims(predicted, golden, TEXT)
    assert len(matches) == 1 and matches[0].predicted == 0  # the better overlap wins


def test_matching_is_optimal_not_greedy() -> None:
    # Prediction A overlaps golden X best, but A is the only prediction that can match Y:
    # greedy best-first gives A-X and leaves Y and B unmatched; optimal pairs A-Y and B-X.
    text = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ"
    x = Claim(claim="golden x", evidence_span=text[0:10])
    y = Claim(claim="golden y", evidence_span=text[6:16])
    a = Claim(claim="pred a", evidence_span=text[1:12])
    b = Claim(claim="pred b", evidence_span=text[0:5])
    assert span_iou(locate(a.evidence_span, text), locate(x.evidence_span, text)) > span_iou(
        locate(b.evidence_span, text), locate(x.evidence_span, text)
    )
    pairs = {(m.predicted, m.golden) for m in match_claims([a, b], [x, y], text)}
    assert pairs == {(0, 1), (1, 0)}


def test_micro_scores_count_verified_only_and_diffs_list_every_fp_and_fn(tmp_path: Path) -> None:
    golden = load_golden_set(make_golden(tmp_path))
    by_id: dict[str, GoldenExample] = {e.id: e for e in golden}
    library = by_id["v-library"]
    predictions = {
        "v-vote": [
            Claim(
                claim="The council voted on the budget on Tuesday.",
                evidence_span="council voted 7 to 2 to approve",
            )
        ],
        "v-library": [
            Claim(claim=library.expected_claims[0].claim, evidence_span="lends 18,000 items")
        ],
        "v-negative": [
            Claim(
                claim="Residents were tired of waiting for the county.",
                evidence_span="tired of waiting",
            )
        ],
        "v-fair": [],
        "p-draft": [
            Claim(
                claim="A pending prediction that matches nothing.",
                evidence_span="Detours use Elm Avenue",
            )
        ],
    }
    summary = score_golden_set(golden, predictions)
    counted = summary.counted
    assert (counted.tp, counted.fp, counted.fn) == (2, 1, 4)
    assert counted.precision == pytest.approx(2 / 3) and counted.recall == pytest.approx(2 / 6)
    assert counted.f1 == pytest.approx(2 * (2 / 3) * (1 / 3) / (2 / 3 + 1 / 3))
    pending = summary.pending
    assert (pending.tp, pending.fp, pending.fn) == (0, 1, 1)  # report only, never in `counted`
    diffs = render_diffs_markdown(summary)
    assert "FP (predicted, unmatched): Residents were tired of waiting for the county." in diffs
    assert f"FN (golden, missed): {library.expected_claims[1].claim}" in diffs
    for claim in by_id["v-fair"].expected_claims:
        assert f"FN (golden, missed): {claim.claim}" in diffs
    assert "FP (predicted, unmatched): A pending prediction that matches nothing." in diffs


def test_an_example_without_predictions_is_unscored_not_zero(tmp_path: Path) -> None:
    golden = load_golden_set(make_golden(tmp_path))
    summary = score_golden_set(golden, {}, {"v-vote": "missing recording: none"})
    assert summary.counted.tp == summary.counted.fn == 0
    assert {u.id for u in summary.unscored} == {e.id for e in golden}
    assert "not scored (no current recording): v-fair" in render_diffs_markdown(summary)
