"""The claim-extraction regression gate and its committed baseline.

States:

- INACTIVE: no baseline is committed. The gate warns loudly and passes. This is the honest state
  while the golden labels await human review: a baseline of unverified drafts would present
  synthetic labels as ground truth.
- FAIL: a baseline is committed and a VERIFIED example has a missing, invalid or stale
  recording (a prompt or input edit without re-recording), or counted micro-F1 is more than
  `MAX_F1_DROP` below the baseline's, or no example is VERIFIED any more, or an example the
  baseline counts is no longer VERIFIED (or gone), or the baseline was scored at another span
  IoU threshold than the metric's.
- PASS: a baseline is committed and none of the above.

The baseline writer refuses unless every counted (VERIFIED) example has a complete recording of
the live prompt, so a baseline can only ever describe outputs of the code as it stands.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationInfo, field_validator

from ..atomic import write_text_atomic
from ..errors import EvalsError, InputFileError
from ..files import load_json, validate_file_model
from ..scoring.strict import PRF
from .golden import GoldenSet
from .recordings import now_iso
from .runner import ReplayResult, replay_golden_set
from .scoring import IOU_THRESHOLD, ScoreSummary, score_golden_set

MAX_F1_DROP = 0.02
# Float noise: a drop of exactly MAX_F1_DROP (0.80 -> 0.78) is allowed, not a failure.
_EPSILON = 1e-9
GateState = Literal["INACTIVE", "PASS", "FAIL"]

RERECORD_INSTRUCTIONS = """To re-record after a prompt, schema or golden-text change:
  1. evals-pipeline gate --mode live --record --backend NAME=SPEC
     (e.g. --backend main=anthropic with ANTHROPIC_API_KEY set, or
      --backend local=oai-http:url=http://127.0.0.1:8080/v1/chat/completions)
  2. read the per-example diffs it prints (every false positive and false negative);
  3. if the scores hold: evals-pipeline gate --write-baseline
  4. commit the prompt change, the recordings and the baseline together."""


class BaselineRefused(EvalsError):
    """The baseline writer will not describe anything but verified, current recordings."""


# Strict, finite, in [0, 1]: a NaN f1 had passed every gate (no drop is > NaN), and "0.99" or
# true had been read as numbers.
_Score = Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)]
_Count = Annotated[int, Field(strict=True, ge=0)]


class BaselineScores(BaseModel):
    """Counted micro scores. The counts come first so that each score is checked against them:
    a score the counts do not give is a hand edit (the writer derives every score from them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: _Count
    fp: _Count
    fn: _Count
    precision: _Score
    recall: _Score
    f1: _Score

    @field_validator("precision", "recall", "f1")
    @classmethod
    def _given_by_the_counts(cls, value: float, info: ValidationInfo) -> float:
        if all(name in info.data for name in ("tp", "fp", "fn")):
            counts = PRF(tp=info.data["tp"], fp=info.data["fp"], fn=info.data["fn"])
            derived = getattr(counts, str(info.field_name))
            if abs(value - derived) > _EPSILON:
                raise ValueError(
                    f"{value} is not the {info.field_name} of tp/fp/fn ({derived:.6g}): the "
                    "file was edited by hand; write it with `evals-pipeline gate "
                    "--write-baseline`"
                )
        return value


class Baseline(BaseModel):
    """The committed reference point: counted micro scores and what they were measured on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: Literal["claim_extraction"] = "claim_extraction"
    written_at: StrictStr
    prompt_version: StrictStr
    fingerprint: StrictStr
    iou_threshold: float = Field(strict=True, gt=0, le=1, allow_inf_nan=False)
    micro: BaselineScores
    examples: tuple[StrictStr, ...]  # the VERIFIED example ids the scores count


def read_baseline(path: Path, *, required: bool = False) -> Baseline | None:
    """The committed baseline, or None when there is none (the gate is then INACTIVE).

    `required`: the path was named explicitly (a flag, `claims_baseline`), so a missing file is
    a typo that would silently switch the gate off, and an error. A folder is never a baseline.
    """
    if path.is_dir():
        raise InputFileError(path, "is a folder, not a baseline file")
    if not path.is_file():
        if required:
            raise InputFileError(
                path,
                "no baseline file here, though one was named (drop the setting for the INACTIVE "
                "gate, or write one with `evals-pipeline gate --write-baseline`)",
            )
        return None
    return validate_file_model(Baseline, load_json(path), path, kind="a baseline")


def build_baseline(
    golden: GoldenSet,
    replay: ReplayResult,
    summary: ScoreSummary,
    *,
    committed: Baseline | None = None,
    allow_lower: bool = False,
) -> Baseline:
    """Raises BaselineRefused unless every counted example has a current recording, and, with
    a `committed` baseline, unless the scores hold: a micro-F1 more than MAX_F1_DROP below it
    is the regression the gate exists to stop, and writing it would make the next gate pass.
    `allow_lower` writes it anyway (a deliberate trade, said in the commit)."""
    verified = golden.verified
    if not verified:
        raise BaselineRefused(
            "refusing to write a baseline: no golden example is VERIFIED (drafts are "
            "PENDING_HUMAN_REVIEW until a person checks them; see corpus/golden/README.md)"
        )
    bad = replay.unusable(verified=True)
    if bad:
        listed = "; ".join(f"{r.id}: {r.status} ({r.detail})" for r in bad)
        raise BaselineRefused(
            f"refusing to write a baseline: {len(bad)} VERIFIED example(s) lack a complete, "
            f"current recording: {listed}\n{RERECORD_INSTRUCTIONS}"
        )
    counted = summary.counted
    # A baseline scored at another span IoU is not comparable (the gate says re-write it).
    comparable = committed is not None and _same_iou(committed)
    if committed is not None and comparable and not allow_lower:
        drop = committed.micro.f1 - counted.f1
        if drop > MAX_F1_DROP + _EPSILON:
            raise BaselineRefused(
                f"refusing to lower the baseline: counted micro-F1 {counted.f1:.3f} is "
                f"{drop:.3f} below the committed {committed.micro.f1:.3f} (allowed drop "
                f"{MAX_F1_DROP}), the regression the gate fails on. Fix it, or lower the "
                "baseline on purpose with --allow-lower and say why in the commit"
            )
    return Baseline(
        written_at=now_iso(),
        prompt_version=replay.prompt_version,
        fingerprint=replay.fingerprint,
        iou_threshold=IOU_THRESHOLD,
        micro=BaselineScores(
            precision=counted.precision,
            recall=counted.recall,
            f1=counted.f1,
            tp=counted.tp,
            fp=counted.fp,
            fn=counted.fn,
        ),
        examples=tuple(sorted(e.id for e in verified)),
    )


def _same_iou(baseline: Baseline) -> bool:
    """Whether `baseline` was scored at today's span IoU threshold (one test for every use)."""
    return abs(baseline.iou_threshold - IOU_THRESHOLD) <= _EPSILON


def write_baseline(path: Path, baseline: Baseline) -> Path:
    text = json.dumps(baseline.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    return write_text_atomic(path, text)


@dataclass(frozen=True)
class GateResult:
    state: GateState
    micro_f1: float
    baseline_f1: float | None
    baseline_path: str
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    scored: int | None = None  # VERIFIED examples scored; 0 leaves micro_f1 meaningless

    @property
    def passed(self) -> bool:
        return self.state != "FAIL"

    def headline(self) -> str:
        if self.state == "INACTIVE":
            return (
                f"claim gate INACTIVE: no baseline at {self.baseline_path}; nothing is gated "
                "until VERIFIED examples and a baseline are committed"
            )
        assert self.baseline_f1 is not None
        verdict = "PASS" if self.state == "PASS" else "FAIL"
        measured = (
            "no VERIFIED example scored"
            if self.scored == 0
            else f"counted micro-F1 {self.micro_f1:.3f}"
        )
        return (
            f"claim gate {verdict}: {measured} vs baseline "
            f"{self.baseline_f1:.3f} (allowed drop {MAX_F1_DROP})"
        )

    def render(self) -> str:
        """What the CLI prints and the asset check describes; instructions whenever it fails."""
        lines = [self.headline()]
        lines += [f"  FAIL: {f}" for f in self.failures]
        lines += [f"  warning: {w}" for w in self.warnings]
        if self.state == "FAIL":
            lines.append(RERECORD_INSTRUCTIONS)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            # With no VERIFIED example scored, micro-F1 measured nothing: None, not 1.0.
            "micro_f1": None if self.scored == 0 else self.micro_f1,
            "scored": self.scored,
            "baseline_f1": self.baseline_f1,
            "baseline_path": self.baseline_path,
            "max_f1_drop": MAX_F1_DROP,
            "failures": list(self.failures),
            "warnings": list(self.warnings),
        }


def evaluate_gate(
    golden: GoldenSet,
    replay: ReplayResult,
    summary: ScoreSummary,
    baseline: Baseline | None,
    baseline_path: Path,
) -> GateResult:
    f1 = summary.counted.f1
    warnings: list[str] = []
    pending_bad = replay.unusable(verified=False)
    if pending_bad:
        kinds = Counter(r.status for r in pending_bad)
        ids = [r.id for r in pending_bad]
        shown = ", ".join(ids[:8]) + (f", … ({len(ids) - 8} more)" if len(ids) > 8 else "")
        warnings.append(
            f"{len(pending_bad)} PENDING_HUMAN_REVIEW example(s) not scored for want of a current "
            f"recording ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}; report "
            f"only): {shown}"
        )
    if baseline is None:
        warnings.insert(
            0,
            f"{len(golden.verified)} of {len(golden)} golden examples are VERIFIED and "
            f"{len(golden.pending)} await human review; every score is report-only",
        )
        return GateResult(
            "INACTIVE",
            f1,
            None,
            str(baseline_path),
            warnings=tuple(warnings),
            scored=summary.verified_count,
        )
    failures: list[str] = []
    verified = golden.verified
    if not verified:
        failures.append("a baseline is committed but no golden example is VERIFIED")
    for run in replay.unusable(verified=True):
        failures.append(f"{run.id}: {run.status} recording ({run.detail})")
    drop = baseline.micro.f1 - f1
    if verified and drop > MAX_F1_DROP + _EPSILON:
        failures.append(
            f"counted micro-F1 {f1:.3f} is {drop:.3f} below the baseline {baseline.micro.f1:.3f} "
            f"(allowed {MAX_F1_DROP}); the per-example diffs show each false positive/negative"
        )
    now = {e.id for e in verified}
    then = set(baseline.examples)
    added, removed = sorted(now - then), sorted(then - now)
    if removed:
        # Dropping hard examples from the counted set could lift micro-F1 past the gate.
        failures.append(
            f"baseline example(s) no longer VERIFIED or gone: {removed}; a person re-verifies "
            "them, or re-writes the baseline with --write-baseline and says why in the commit"
        )
    elif verified and added:
        warnings.append(
            f"VERIFIED example(s) not in the baseline yet: {added}; re-write the baseline with "
            "--write-baseline to count them"
        )
    if not _same_iou(baseline):
        failures.append(
            f"the baseline was scored at span IoU >= {baseline.iou_threshold}, the metric now "
            f"uses {IOU_THRESHOLD}; the scores are not comparable: re-write the baseline"
        )
    if baseline.fingerprint != replay.fingerprint:
        warnings.append(
            f"the baseline was written under prompt {baseline.prompt_version} "
            f"({baseline.fingerprint[:12]}…), the live prompt is {replay.prompt_version} "
            f"({replay.fingerprint[:12]}…); re-write it with --write-baseline once scores hold"
        )
    state: GateState = "FAIL" if failures else "PASS"
    return GateResult(
        state,
        f1,
        baseline.micro.f1,
        str(baseline_path),
        tuple(failures),
        tuple(warnings),
        scored=summary.verified_count,
    )


@dataclass(frozen=True)
class GateReport:
    """Everything one gate evaluation looked at, for the CLI."""

    replay: ReplayResult
    summary: ScoreSummary
    result: GateResult
    baseline: Baseline | None = None  # the committed one, if any


def run_gate(
    golden: GoldenSet,
    baseline_path: Path,
    recordings_dir: Path | None = None,
    *,
    baseline_required: bool = False,
) -> GateReport:
    """Replay, score and evaluate: the whole gate in one call (the CLI's replay mode)."""
    replay = replay_golden_set(golden, recordings_dir)
    summary = score_golden_set(golden, replay.predictions(), replay.notes())
    baseline = read_baseline(baseline_path, required=baseline_required)
    result = evaluate_gate(golden, replay, summary, baseline, baseline_path)
    return GateReport(replay, summary, result, baseline)
