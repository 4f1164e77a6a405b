"""Micro precision / recall / F1 of predicted claims against the golden set, by span overlap.

A predicted claim matches a golden claim when their evidence spans, located in the example's
input text (the first occurrence when a span occurs several times), overlap with character IoU
≥ 0.3. Matching is one-to-one and optimal (`scipy.optimize.linear_sum_assignment`): it first
maximises the number of matched pairs, then their total IoU, so a greedy best-first choice can
never cost a match. Unmatched predictions are false positives (over-extracted or invented),
unmatched golden claims false negatives (missed).

Only VERIFIED examples count toward the totals. PENDING_HUMAN_REVIEW examples are scored the
same way into a separate, report-only total, never mixed into the counted one.

Known limitation: two different assertions citing the same span would count as a match. The
extractor's validation anchors claims 1:1 to spans, and the per-example diffs show every claim
text to a reviewer, but the metric itself cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..scoring.strict import PRF
from .golden import GoldenExample, GoldenSet

IOU_THRESHOLD = 0.3


class ClaimLike(Protocol):
    @property
    def claim(self) -> str: ...

    @property
    def evidence_span(self) -> str: ...


Span = tuple[int, int]  # [start, end) character offsets


def locate(span: str, text: str) -> Span | None:
    """The first occurrence of `span` in `text`, or None (absent, or empty)."""
    if not span:
        return None
    start = text.find(span)
    return None if start < 0 else (start, start + len(span))


def span_iou(a: Span | None, b: Span | None) -> float:
    """Intersection over union of two character ranges; 0.0 when either is missing."""
    if a is None or b is None:
        return 0.0
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union if union > 0 else 0.0


@dataclass(frozen=True)
class ClaimMatch:
    predicted: int  # index into the predicted claims
    golden: int  # index into the golden claims
    iou: float


def match_claims(
    predicted: Sequence[ClaimLike],
    golden: Sequence[ClaimLike],
    text: str,
    threshold: float = IOU_THRESHOLD,
) -> tuple[ClaimMatch, ...]:
    """The optimal one-to-one matching: most pairs with IoU ≥ threshold, then most total IoU."""
    if not predicted or not golden:
        return ()
    pred_spans = [locate(c.evidence_span, text) for c in predicted]
    gold_spans = [locate(c.evidence_span, text) for c in golden]
    iou = np.array([[span_iou(p, g) for g in gold_spans] for p in pred_spans], dtype=float)
    eligible = iou >= threshold
    # Each matched pair is worth more than any sum of IoUs (≤ min(P, G) ≤ bonus - 1), so the
    # assignment maximises the match count first and breaks ties by total IoU.
    bonus = float(min(len(predicted), len(golden)) + 1)
    weights = np.where(eligible, bonus + iou, 0.0)
    from scipy.optimize import linear_sum_assignment  # ~0.5 s to import; only scoring needs it

    rows, cols = linear_sum_assignment(weights, maximize=True)
    return tuple(
        ClaimMatch(int(r), int(c), float(iou[r, c]))
        for r, c in zip(rows, cols, strict=True)
        if eligible[r, c]
    )


@dataclass(frozen=True)
class ExampleScore:
    id: str
    verified: bool
    counts: PRF
    matches: tuple[tuple[str, str, float], ...]  # (predicted claim, golden claim, IoU)
    false_positives: tuple[str, ...]  # predicted claim texts that matched nothing
    false_negatives: tuple[str, ...]  # golden claim texts nothing matched
    note: str = ""  # e.g. why there is no prediction

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "review_status": "VERIFIED" if self.verified else "PENDING_HUMAN_REVIEW",
            **self.counts.to_dict(),
            "matches": [{"predicted": p, "golden": g, "iou": i} for p, g, i in self.matches],
            "false_positives": list(self.false_positives),
            "false_negatives": list(self.false_negatives),
            "note": self.note,
        }


def score_example(
    example: GoldenExample, predicted: Sequence[ClaimLike], note: str = ""
) -> ExampleScore:
    golden = example.expected_claims
    matches = match_claims(predicted, golden, example.input_text)
    matched_p = {m.predicted for m in matches}
    matched_g = {m.golden for m in matches}
    return ExampleScore(
        id=example.id,
        verified=example.verified,
        counts=PRF(
            tp=len(matches), fp=len(predicted) - len(matches), fn=len(golden) - len(matches)
        ),
        matches=tuple(
            (predicted[m.predicted].claim, golden[m.golden].claim, m.iou) for m in matches
        ),
        false_positives=tuple(c.claim for i, c in enumerate(predicted) if i not in matched_p),
        false_negatives=tuple(c.claim for i, c in enumerate(golden) if i not in matched_g),
        note=note,
    )


def _total(scores: Sequence[ExampleScore]) -> PRF:
    total = PRF()
    for score in scores:
        total = total + score.counts
    return total


@dataclass(frozen=True)
class Unscored:
    """An example with nothing to score (no current recording): never silently zero claims."""

    id: str
    verified: bool
    reason: str


def _pooled(counts: PRF, examples: int) -> dict[str, Any]:
    """Pooled scores over `examples` scored; with none, P/R/F1 are None: they measured nothing
    (the text output says n/a), where the empty pool's 1.0 had read as a perfect score."""
    scores: dict[str, Any] = {**counts.to_dict(), "examples": examples}
    if not examples:
        scores.update(precision=None, recall=None, f1=None)
    return scores


@dataclass(frozen=True)
class ScoreSummary:
    examples: tuple[ExampleScore, ...] = ()
    counted: PRF = field(default_factory=PRF)  # VERIFIED examples only
    pending: PRF = field(default_factory=PRF)  # PENDING_HUMAN_REVIEW: report only
    unscored: tuple[Unscored, ...] = ()

    @property
    def verified_count(self) -> int:
        return sum(1 for e in self.examples if e.verified)

    @property
    def pending_count(self) -> int:
        return sum(1 for e in self.examples if not e.verified)

    def to_dict(self) -> dict[str, Any]:
        return {
            "counted": _pooled(self.counted, self.verified_count),
            "pending_report_only": _pooled(self.pending, self.pending_count),
            "examples": [e.to_dict() for e in self.examples],
            "unscored": [
                {"id": u.id, "verified": u.verified, "reason": u.reason} for u in self.unscored
            ],
        }


def score_golden_set(
    golden: GoldenSet,
    predictions: Mapping[str, Sequence[ClaimLike]],
    notes: Mapping[str, str] | None = None,
) -> ScoreSummary:
    """Examples with predictions are scored; the rest are listed as unscored, with the reason.

    An example replayed to zero claims is in `predictions` with an empty list and is scored (a
    negative scored clean, or every golden claim a false negative). One with no usable
    recording is not in `predictions` at all: counting it as "predicted nothing" would turn a
    missing recording into a score drop, while the gate reports it as what it is.
    """
    notes = notes or {}
    scores = tuple(
        score_example(e, predictions[e.id], notes.get(e.id, ""))
        for e in golden
        if e.id in predictions
    )
    unscored = tuple(
        Unscored(e.id, e.verified, notes.get(e.id, "no prediction"))
        for e in golden
        if e.id not in predictions
    )
    return ScoreSummary(
        examples=scores,
        counted=_total([s for s in scores if s.verified]),
        pending=_total([s for s in scores if not s.verified]),
        unscored=unscored,
    )


def _prf_line(label: str, prf: PRF, examples: int) -> str:
    if examples == 0:  # an empty PRF reads 1.0 everywhere; printing that would flatter nothing
        return f"{label}: n/a (0 examples scored)"
    scores = prf.to_dict()  # a precision of nothing produced is — there, as in the JSON
    shown = [
        "—" if scores[k] is None else f"{scores[k]:.3f}" for k in ("precision", "recall", "f1")
    ]
    return (
        f"{label}: P {shown[0]} R {shown[1]} F1 {shown[2]} "
        f"(tp {prf.tp}, fp {prf.fp}, fn {prf.fn}; {examples} examples)"
    )


def render_score_lines(summary: ScoreSummary) -> list[str]:
    verified = sum(1 for u in summary.unscored if u.verified)
    return [
        _prf_line("counted (VERIFIED)", summary.counted, summary.verified_count),
        _prf_line("pending (report only)", summary.pending, summary.pending_count),
        f"not scored (no current recording): {verified} VERIFIED, "
        f"{len(summary.unscored) - verified} pending",
    ]


def render_diffs_markdown(summary: ScoreSummary) -> str:
    """Every false positive and false negative as claim text, per example, counted ones first."""
    lines: list[str] = []
    for title, verified in (("Counted (VERIFIED)", True), ("Pending review (report only)", False)):
        scores = [s for s in summary.examples if s.verified == verified]
        lines.append(f"### {title}: {len(scores)} examples scored")
        lines.append("")
        clean = [s.id for s in scores if not (s.false_positives or s.false_negatives or s.note)]
        for score in scores:
            if not (score.false_positives or score.false_negatives or score.note):
                continue
            c = score.counts
            lines.append(f"- **{score.id}** (tp {c.tp}, fp {c.fp}, fn {c.fn})")
            if score.note:
                lines.append(f"  - note: {score.note}")
            lines += [f"  - FP (predicted, unmatched): {text}" for text in score.false_positives]
            lines += [f"  - FN (golden, missed): {text}" for text in score.false_negatives]
        if clean:
            lines.append(f"- no differences: {', '.join(clean)}")
        unscored = [u.id for u in summary.unscored if u.verified == verified]
        if unscored:
            lines.append(f"- not scored (no current recording): {', '.join(unscored)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
