"""Claim extraction in the asset graph: golden_set -> claim_extractions -> claim_scores + gate.

The assets are thin: loading, replay, scoring and the gate decision all live in
`core/claims`. `claim_extractions` replays recordings only (no network, no key); refreshing them
is `evals-pipeline gate --mode live --record`. The regression gate is a blocking ERROR check on
`claim_scores`, so `dagster asset materialize` and the CI driver exit non-zero when it fails; with
no committed baseline it passes as INACTIVE and logs a loud warning.
"""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    MetadataValue,
    Output,
    asset,
)

from ..core.claims.gate import evaluate_gate, read_baseline
from ..core.claims.golden import GoldenSet, load_golden_set
from ..core.claims.runner import ReplayResult, replay_golden_set
from ..core.claims.scoring import render_diffs_markdown, score_golden_set
from ..core.config import EvalsConfig
from ..resources import EvalsResource
from ..versions import golden_version

CLAIMS_GROUP = "claims"
CLAIMS_GATE = "claims_regression_gate"
CLAIMS_ASSETS = ("golden_set", "claim_extractions", "claim_scores")
_BANNER = "!" * 78


def build_claims_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    """Unpartitioned: the golden set does not depend on the prose run's backends or modes.
    None with `claims_gate: false`, as the driver runs none: in the UI, "Materialize all" would
    otherwise run a gate the project switched off (and fail where there is no golden set)."""
    if not config.claims_gate:
        return []

    @asset(io_manager_key="json_io", group_name=CLAIMS_GROUP, code_version=golden_version(config))
    def golden_set(evals: EvalsResource) -> Output[dict[str, Any]]:
        """Every golden example, loaded strictly (a non-verbatim span fails the step)."""
        golden = load_golden_set(evals.config.golden_dir, evals.config.claims_baseline_path)
        negatives = sum(1 for e in golden if not e.expected_claims)
        return Output(
            golden.to_dict(),
            metadata={
                "directory": str(golden.directory),
                "examples": len(golden),
                "verified": len(golden.verified),
                "pending_human_review": len(golden.pending),
                "negatives": negatives,
            },
        )

    @asset(io_manager_key="json_io", group_name=CLAIMS_GROUP, code_version=golden_version(config))
    def claim_extractions(golden_set: dict[str, Any]) -> Output[dict[str, Any]]:
        """ClaimExtractor over each example's recording; stale or missing ones are not replayed."""
        replay = replay_golden_set(GoldenSet.from_dict(golden_set))
        statuses = [r.status for r in replay.runs]
        # Which recordings and why (the file, the line, the field), not only how many: a count
        # of "1 invalid" in the UI left the user to find it.
        problems = "\n".join(f"- `{i}`: {why}" for i, why in sorted(replay.notes().items()))
        return Output(
            replay.to_dict(),
            metadata={
                "prompt_version": replay.prompt_version,
                "prompt_fingerprint": replay.fingerprint,
                **{f"recordings_{s}": statuses.count(s) for s in ("current", "stale", "missing")},
                "recordings_invalid": statuses.count("invalid"),
                "recording_problems": MetadataValue.md(problems or "none"),
            },
        )

    @asset(
        io_manager_key="json_io",
        group_name=CLAIMS_GROUP,
        code_version=golden_version(config),
        check_specs=[
            AssetCheckSpec(
                CLAIMS_GATE,
                asset="claim_scores",
                blocking=True,
                description="Counted micro-F1 vs the committed baseline; current recordings.",
            )
        ],
    )
    def claim_scores(
        context: AssetExecutionContext,
        evals: EvalsResource,
        golden_set: dict[str, Any],
        claim_extractions: dict[str, Any],
    ) -> Iterator[Any]:
        """Micro P/R/F1 of VERIFIED examples (pending ones report-only), and the gate."""
        golden = GoldenSet.from_dict(golden_set)
        replay = ReplayResult.from_dict(claim_extractions)
        summary = score_golden_set(golden, replay.predictions(), replay.notes())
        path = evals.config.claims_baseline_path
        named = evals.config.claims_baseline is not None  # a typo must not switch the gate off
        baseline = read_baseline(path, required=named)
        result = evaluate_gate(golden, replay, summary, baseline, path)
        if result.state == "INACTIVE":
            context.log.warning(f"\n{_BANNER}\n{result.render()}\n{_BANNER}")
        elif result.state == "FAIL":
            context.log.error(result.render())
        counted, pending = summary.counted, summary.pending
        metadata: dict[str, Any] = {
            "gate_state": result.state,
            "counted_examples": summary.verified_count,
            "pending_examples": summary.pending_count,
            "diffs": MetadataValue.md(render_diffs_markdown(summary)),
        }
        # Scores only where something was scored: an empty set is not a perfect 1.0.
        if summary.verified_count:  # as the JSON gives them: an undefined P or R is left out
            scored = counted.to_dict()
            metadata |= {
                f"counted_{k}": scored[k]
                for k in ("precision", "recall", "f1")
                if scored[k] is not None
            }
        if summary.pending_count:
            metadata["pending_f1_report_only"] = pending.f1
        yield Output({"scores": summary.to_dict(), "gate": result.to_dict()}, metadata=metadata)
        yield AssetCheckResult(
            check_name=CLAIMS_GATE,
            passed=result.passed,
            severity=AssetCheckSeverity.ERROR,
            description=result.render(),
            metadata={"state": result.state},
        )

    return [golden_set, claim_extractions, claim_scores]
