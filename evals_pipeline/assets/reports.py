"""`reference_comparison` and `report` per mode, and the `mode_matrix_report` over all modes.

Reports are pure data (JSON) plus a Markdown rendering, written under the configured output
folder and attached to the materialisation (Markdown as `MetadataValue.md`, headline numbers as
floats so the UI plots them across materialisations).
"""

from collections.abc import Iterator, Mapping, Sequence
from itertools import combinations
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    MetadataValue,
    Output,
    asset,
)

from ..core.config import EvalsConfig
from ..core.judge.reference import judged_scores, verdicts_from_rows
from ..core.plan import fresh_recording_guards
from ..core.reports.assemble import assemble_mode_report
from ..core.reports.files import write_report_files
from ..core.reports.markdown import render_mode_matrix, render_mode_report
from ..core.reports.plot import CHART_FILE, plot_f1_by_mode
from ..core.reports.report import float_metrics, mode_matrix
from ..core.scoring.strict import AXES, score_keys, table_keys
from ..core.tables import same_graphs
from ..partitions import BY_MODE, mode_partitions, split_key
from ..resources import EvalsResource

FRESH_GUARD = "fresh_recordings_distinct"
DISTINCT_OUTPUTS = "distinct_outputs"


def fan_in(context: AssetExecutionContext, input_name: str, value: Any) -> dict[str, Any]:
    """Upstream partition key -> value, also when only one upstream partition exists.

    Dagster's UPathIOManager hands a fan-in input over as a dict, except when exactly one
    upstream partition maps in, when it hands over that value alone.
    """
    keys = [str(k) for k in context.asset_partition_keys_for_input(input_name)]
    if isinstance(value, dict) and set(value) == set(keys):
        return {str(k): v for k, v in value.items()}
    if len(keys) == 1:
        return {keys[0]: value}
    raise TypeError(f"cannot read fan-in input {input_name!r} for partitions {keys}")


def _by_backend(values: Mapping[str, Any]) -> dict[str, Any]:
    return {split_key(key)[0]: value for key, value in values.items()}


# The judge model of verdicts stored before they recorded one.
UNRECORDED_MODEL = "an unrecorded model"
# A verdict table's `attrs` key (kept in its Parquet file): "ran", or why it holds no verdicts.
JUDGE_STATUS = "judge_status"


def not_judged_note(asset: str, partitions: Sequence[str], status: str) -> str:
    """Upstream judging stored while judging was off: its emptiness is no verdict."""
    return (
        f"{asset}[{', '.join(partitions)}] was materialised when judging was {status!r}: "
        f"{'they hold' if len(partitions) > 1 else 'it holds'} no verdicts, and this report "
        f"shows none for {'them' if len(partitions) > 1 else 'it'}; re-materialise {asset}"
    )


def _judge_models(verdicts: pd.DataFrame) -> set[str]:
    """The judge models a verdict table's rows came from."""
    if verdicts.empty:
        return set()
    if "model" not in verdicts.columns:
        return {UNRECORDED_MODEL}
    return {m if isinstance(m, str) else UNRECORDED_MODEL for m in verdicts["model"]}


def stale_judge_note(made_by: list[str], configured: str) -> str:
    """Verdicts are stored assets: after the judge model changes, Dagster keeps the old ones
    until they are re-materialised, and the report must not name the new model beside them."""
    return (
        f"judge verdicts in this report were made by {', '.join(made_by)}, not by the "
        f"configured judge model {configured}: re-materialise judge_verdicts and "
        "pairwise_tallies for this mode to judge with it"
    )


def build_report_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    modes = mode_partitions(config)

    @asset(
        partitions_def=modes,
        io_manager_key="json_io",
        group_name="reports",
        ins={"extractions": AssetIn(partition_mapping=BY_MODE)},
        check_specs=[
            AssetCheckSpec(
                FRESH_GUARD,
                asset="reference_comparison",
                blocking=True,
                description=(
                    "Backends recorded afresh in this run did not produce byte-identical "
                    "cassettes (two names for one backend would compare it with itself)."
                ),
            ),
            AssetCheckSpec(
                DISTINCT_OUTPUTS,
                asset="reference_comparison",
                description=(
                    "No two backends extracted exactly the same graphs on every chunk (WARN, "
                    "not blocking): that is one backend under two names, or a deterministic "
                    "model sampled twice, and comparing them shows only ties. Recordings are "
                    "never byte-identical (each record has its time), so fresh_recordings_"
                    "distinct cannot see it."
                ),
            ),
        ],
    )
    def reference_comparison(
        context: AssetExecutionContext,
        evals: EvalsResource,
        extractions: Any,
    ) -> Iterator[Any]:
        """Strict-string P/R/F1 of every candidate against the reference backend.

        This measures agreement with the reference's output, not correctness (with the oracle
        as reference: agreement with the hand-written labels).
        """
        tables = _by_backend(fan_in(context, "extractions", extractions))
        reference = evals.config.reference
        ref = table_keys(tables[reference])
        strict = {
            name: score_keys(table_keys(table), ref).to_dict()
            for name, table in sorted(tables.items())
            if name != reference
        }
        yield Output(
            strict,
            metadata={  # none where no chunk was compared
                f"{name}/{axis}_f1": float(scores[axis]["f1"])
                for name, scores in strict.items()
                for axis in AXES
                if scores[axis]["f1"] is not None
            },
        )
        same = [
            f"{a} and {b} extracted the same graphs on all {n} chunks they extracted"
            for (a, table_a), (b, table_b) in combinations(sorted(tables.items()), 2)
            if (n := same_graphs(table_a, table_b)) is not None
        ]
        yield AssetCheckResult(
            check_name=DISTINCT_OUTPUTS,
            passed=not same,
            severity=AssetCheckSeverity.WARN,
            description=(
                "; ".join(same) + ": one backend under two names, or a deterministic model "
                "sampled twice (their comparison shows only ties)"
            )
            if same
            else "ok",
        )
        # The half of the identity guard that can only run after capture, before any report.
        guards = fresh_recording_guards(evals.config.record_cassette)
        yield AssetCheckResult(
            check_name=FRESH_GUARD,
            passed=not guards,
            severity=AssetCheckSeverity.ERROR,
            description="; ".join(g.message for g in guards) or "ok",
        )

    @asset(
        partitions_def=modes,
        io_manager_key="json_io",
        group_name="reports",
        ins={
            "scores": AssetIn(partition_mapping=BY_MODE),
            "judge_verdicts": AssetIn(partition_mapping=BY_MODE),
            "run_plan": AssetIn(),
            "pairwise_tallies": AssetIn(),
        },
    )
    def report(
        context: AssetExecutionContext,
        evals: EvalsResource,
        scores: Any,
        judge_verdicts: Any,
        reference_comparison: dict[str, Any],
        run_plan: dict[str, Any],
        pairwise_tallies: dict[str, Any],
    ) -> Output[dict]:
        """The report for one ontology mode, as JSON and Markdown files."""
        mode = context.partition_key
        ontology = evals.ontology()
        judge = {k: v for k, v in run_plan["judge"].items() if k != "planned_calls"}
        judged: dict[str, Any] | None = None
        verdict_models: set[str] = set()
        notes = list(run_plan["notes"])  # run_plan[mode] plans this mode only
        if judge["status"] != "skipped" and judge["mode"] in ("reference", "both"):
            judge["status"] = "ran"
            tables = {
                name: table
                for name, table in _by_backend(
                    fan_in(context, "judge_verdicts", judge_verdicts)
                ).items()
                if name != evals.config.reference
            }
            unjudged = {  # stored while judging was off (a partial re-materialisation)
                name: str(table.attrs.get(JUDGE_STATUS))
                for name, table in tables.items()
                if table.attrs.get(JUDGE_STATUS, "ran") != "ran"
            }
            for status in sorted(set(unjudged.values())):
                names = [f"{n}|{mode}" for n, s in sorted(unjudged.items()) if s == status]
                notes.append(not_judged_note("judge_verdicts", names, status))
            judged = {
                name: judged_scores(verdicts_from_rows(table.to_dict(orient="records")))
                for name, table in tables.items()
                if name not in unjudged
            }
            verdict_models |= {m for t in tables.values() for m in _judge_models(t)}
        elif judge["status"] != "skipped":
            judge["status"] = "ran"
        pairwise = pairwise_tallies if judge["mode"] in ("pairwise", "both") else None
        if pairwise is not None and pairwise.get("status") == "ran":
            verdict_models.add(str(pairwise.get("model", UNRECORDED_MODEL)))
        elif pairwise is not None and judge["status"] == "ran":
            said = pairwise.get("reason") or pairwise.get("status")
            notes.append(not_judged_note("pairwise_tallies", [mode], str(said)))
        if others := sorted(verdict_models - {judge.get("model")}):
            judge["verdict_models"] = sorted(verdict_models)
            notes.append(stale_judge_note(others, str(judge.get("model"))))
        built = assemble_mode_report(
            mode=mode,
            reference=evals.config.reference,
            ontology=ontology.name if ontology is not None and mode != "freeform" else None,
            summaries=_by_backend(fan_in(context, "scores", scores)),
            strict=reference_comparison,
            corpus={
                "path": run_plan["corpus_path"],
                "digest": run_plan["corpus_digest"],
                "chunks": run_plan["scope"],
            },
            judge=judge,
            notes=notes,
            judged=judged,
            pairwise=pairwise,
        )
        markdown = render_mode_report(built)
        json_path, _md_path = write_report_files(
            built, markdown, evals.config.output_dir / mode, "report"
        )
        metadata: dict[str, Any] = dict(float_metrics(built))
        metadata["report_json"] = MetadataValue.path(str(json_path))
        metadata["report"] = MetadataValue.md(markdown)
        return Output(built, metadata=metadata)

    @asset(io_manager_key="json_io", group_name="reports", ins={"report": AssetIn()})
    def mode_matrix_report(
        context: AssetExecutionContext,
        evals: EvalsResource,
        report: Any,
    ) -> Output[dict]:
        """Every backend under every ontology mode side by side, with an F1-by-mode plot."""
        matrix = mode_matrix(fan_in(context, "report", report))
        out = evals.config.output_dir
        markdown = render_mode_matrix(matrix)
        json_path, _md = write_report_files(matrix, markdown, out, "mode_matrix")
        plot = plot_f1_by_mode(matrix, out / CHART_FILE)
        metadata: dict[str, Any] = {}
        for mode, mode_rep in matrix["reports"].items():
            metadata.update({f"{mode}/{k}": v for k, v in float_metrics(mode_rep).items()})
        metadata["report_json"] = MetadataValue.path(str(json_path))
        metadata["plot"] = MetadataValue.path(str(plot))
        metadata["report"] = MetadataValue.md(markdown)
        return Output(matrix, metadata=metadata)

    return [reference_comparison, report, mode_matrix_report]
