"""`reference_comparison` and `report` per mode, and the `mode_matrix_report` over all modes.

Reports are pure data (JSON) plus a Markdown rendering, written under the configured output
folder and attached to the materialisation (Markdown as `MetadataValue.md`, headline numbers as
floats so the UI plots them across materialisations).
"""

from collections.abc import Iterator, Mapping
from itertools import combinations
from pathlib import Path
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    Failure,
    MetadataValue,
    Output,
    asset,
)

from ..core.atomic import write_text_atomic
from ..core.config import EvalsConfig
from ..core.errors import InputFileError
from ..core.plan import fresh_recording_guards
from ..core.reports.assemble import assemble_mode_report, inputs_provenance
from ..core.reports.episodes import EPISODES_FILE, compare_tables, episodes_json
from ..core.reports.files import write_report_files
from ..core.reports.judging import judging_section
from ..core.reports.markdown import render_mode_matrix, render_mode_report
from ..core.reports.plot import CHART_FILE, plot_f1_by_mode
from ..core.reports.regression import baseline_file, check_regression, read_baseline
from ..core.reports.report import float_metrics, mode_matrix
from ..core.scoring.strict import AXES
from ..core.tables import same_graphs, table_episodes
from ..partitions import BY_MODE, fan_in, mode_partitions, partition_check, split_key
from ..resources import EvalsResource
from ..versions import COMPARISON_VALUE, comparison_version, report_version
from .corpus import CORPUS_DIGEST

FRESH_GUARD = "fresh_recordings_distinct"
NO_REGRESSION = "no_regression"
DISTINCT_OUTPUTS = "distinct_outputs"


def _by_backend(values: Mapping[str, Any]) -> dict[str, Any]:
    return {split_key(key)[0]: value for key, value in values.items()}


def _stored(value: Mapping[str, Any], keys: tuple[str, ...], asset: str, mode: str) -> None:
    """A stored upstream value of the shape this code stores: one stored by an older version
    (its code version marks it stale in the UI) is named, not a KeyError."""
    if not all(key in value for key in keys):
        raise Failure(
            description=f"{asset}[{mode}] was stored by an older version of evals_pipeline "
            f"(it lacks {', '.join(k for k in keys if k not in value)}): materialise it again"
        )


def regression_result(folder: Path, mode: str, run: Mapping[str, Any]) -> AssetCheckResult:
    """`no_regression` for one mode: this run's per-chunk counts against the baseline's."""
    path = baseline_file(folder, mode)
    if not path.is_file():
        return AssetCheckResult(
            check_name=NO_REGRESSION,
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=f"no baseline for {mode} at {path}: nothing gated in this mode",
        )
    try:
        baseline = read_baseline(path)
    except InputFileError as exc:  # edited since the run's input check: the reports stand
        return AssetCheckResult(
            check_name=NO_REGRESSION,
            passed=False,
            severity=AssetCheckSeverity.ERROR,
            description=str(exc),
        )
    found = check_regression(baseline, run, baseline_path=path)
    return AssetCheckResult(
        check_name=NO_REGRESSION,
        passed=found.passed,
        severity=AssetCheckSeverity.ERROR,
        description=found.describe(),
        metadata={
            "baseline": MetadataValue.path(str(path)),
            **{f"{name}/paired_chunks": n for name, n in found.compared.items()},
        },
    )


def build_report_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    modes = mode_partitions(config)

    @asset(
        partitions_def=modes,
        io_manager_key="json_io",
        group_name="reports",
        code_version=comparison_version(config),
        ins={
            "extractions": AssetIn(partition_mapping=BY_MODE),
            "corpus": AssetIn(),
        },
        check_specs=[
            partition_check(
                FRESH_GUARD,
                "reference_comparison",
                modes,
                blocking=True,
                description=(
                    "Backends recorded afresh in this run did not produce byte-identical "
                    "cassettes (two names for one backend would compare it with itself)."
                ),
            ),
            partition_check(
                DISTINCT_OUTPUTS,
                "reference_comparison",
                modes,
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
        corpus: pd.DataFrame,
    ) -> Iterator[Any]:
        """Strict-string P/R/F1 of every candidate against the reference backend, and the
        same counts chunk by chunk, which the report writes as `<mode>/episodes.json` for
        `evals-pipeline compare` to pair with another run's and say whether a change made a
        backend worse.

        This measures agreement with the reference's output, not correctness (with the oracle
        as reference: agreement with the hand-written labels). Each chunk's digest, and the
        corpus digest, are of the chunks as they were extracted (the upstream `corpus`), not
        of the corpus file now.
        """
        tables = _by_backend(fan_in(context, "extractions", extractions))
        _stored(corpus.attrs, (CORPUS_DIGEST,), "corpus", context.partition_key)
        strict, run = compare_tables(
            tables,
            evals.config.reference,
            mode=context.partition_key,
            corpus_digest=corpus.attrs[CORPUS_DIGEST],
            episodes={episode.name: episode for episode in table_episodes(corpus)},
        )
        metadata: dict[str, Any] = {  # none where no chunk was compared
            f"{name}/{axis}_f1": float(scores[axis]["f1"])
            for name, scores in strict.items()
            for axis in AXES
            if scores[axis]["f1"] is not None
        }
        yield Output({"strict": strict, "episodes": run}, metadata=metadata)
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
        code_version=report_version(config),
        ins={
            "scores": AssetIn(partition_mapping=BY_MODE),
            "judge_verdicts": AssetIn(partition_mapping=BY_MODE),
            "run_plan": AssetIn(),
            "pairwise_tallies": AssetIn(),
        },
        check_specs=[
            partition_check(
                NO_REGRESSION,
                "report",
                modes,
                blocking=True,
                description=(
                    "No candidate backend is worse than in the prose_baseline run: each is "
                    "compared with itself there, chunk by chunk (evals-pipeline compare "
                    "--fail-if-worse, except that tokens and requests a chunk are said, not "
                    "gated). ERROR where a rate's interval says worse, counts the baseline has "
                    "are gone, or nothing pairs: blocking, so `dagster asset materialize` exits "
                    "1 and a run skips the mode matrix (the report is written; the driver goes "
                    "on to the other modes, the matrix and the bench, then exits 1). WARN where "
                    "the baseline has no file for the mode."
                ),
            )
        ]
        if config.prose_baseline is not None
        else [],
    )
    def report(
        context: AssetExecutionContext,
        evals: EvalsResource,
        scores: Any,
        judge_verdicts: Any,
        reference_comparison: dict[str, Any],
        run_plan: dict[str, Any],
        pairwise_tallies: dict[str, Any],
    ) -> Iterator[Any]:
        """The report for one ontology mode, as JSON and Markdown files, and its chunks' counts
        one by one (`episodes.json`) beside them; with a `prose_baseline`, those counts
        against the baseline's (`no_regression`)."""
        mode = context.partition_key
        _stored(reference_comparison, COMPARISON_VALUE, "reference_comparison", mode)
        ontology = evals.ontology()
        judging = judging_section(
            mode=mode,
            plan_judge=run_plan["judge"],
            reference=evals.config.reference,
            verdicts=_by_backend(fan_in(context, "judge_verdicts", judge_verdicts)),
            pairwise_tallies=pairwise_tallies,
        )
        built = assemble_mode_report(
            mode=mode,
            reference=evals.config.reference,
            ontology=ontology.name if ontology is not None and mode != "freeform" else None,
            summaries=_by_backend(fan_in(context, "scores", scores)),
            strict=reference_comparison["strict"],
            corpus={
                "path": run_plan["corpus_path"],
                "digest": run_plan["corpus_digest"],
                "chunks": run_plan["scope"],
            },
            judge=judging.judge,
            notes=[*run_plan["notes"], *judging.notes],  # run_plan[mode] plans this mode only
            judged=judging.judged,
            pairwise=judging.pairwise,
            provenance=inputs_provenance(evals.config),
        )
        markdown = render_mode_report(built)
        folder = evals.config.output_dir / mode
        json_path, _md_path = write_report_files(built, markdown, folder, "report")
        # Written with the report, not before it: a blocking check upstream or a failed report
        # leaves the last run's pair of files, never a new episodes.json beside an old
        # report.json (this report's own no_regression check runs after both are written).
        episodes = reference_comparison["episodes"]
        episodes_path = write_text_atomic(folder / EPISODES_FILE, episodes_json(episodes))
        metadata: dict[str, Any] = dict(float_metrics(built))
        metadata["report_json"] = MetadataValue.path(str(json_path))
        metadata["episodes_json"] = MetadataValue.path(str(episodes_path))
        metadata["report"] = MetadataValue.md(markdown)
        yield Output(built, metadata=metadata)
        if evals.config.prose_baseline is not None:
            yield regression_result(evals.config.prose_baseline, mode, episodes)

    @asset(
        io_manager_key="json_io",
        group_name="reports",
        code_version=report_version(config),
        ins={"report": AssetIn()},
    )
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
