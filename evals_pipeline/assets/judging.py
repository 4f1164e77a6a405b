"""`judge_verdicts` (reference mode, per backend and mode) and `pairwise_tallies` (per mode).

Both read the extraction tables already materialised — judging makes zero extraction calls —
and every judge call goes through the mandatory judge cache. Without ANTHROPIC_API_KEY they
materialise an empty result marked skipped, and the report says so.
"""

import sys
from collections.abc import Iterator
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    MetadataValue,
    Output,
    asset,
)

from ..core.config import EvalsConfig
from ..core.judge.client import JudgeClient
from ..core.judge.pairwise import judge_all_pairs, pairwise_warnings
from ..core.judge.reference import judge_against_reference, judged_scores
from ..core.reports.judging import JUDGE_STATUS
from ..core.runner import run_sync
from ..core.tables import table_results
from ..io_managers import StoredTable
from ..partitions import (
    ALL_BACKENDS_SAME_MODE,
    BY_MODE,
    extraction_partitions,
    fan_in,
    mode_partitions,
    partition_check,
    split_key,
)
from ..resources import EvalsResource
from ..versions import judging_version
from .spend import spend_before_failure

VERDICT_COLUMNS = ["chunk", "axis", "tp", "fp", "fn", "error", "asked", "model"]

JUDGE_ERRORS_CHECK = "judge_errors"
_JUDGE_ERRORS_DESCRIPTION = (
    "Every judge call gave a verdict. A judge error (HTTP failure, malformed, cut-off or refused "
    "reply) leaves its chunk and axis out of the judged scores and is asked again on the next "
    "run (WARN, not blocking: it is counted in the report)."
)


def _judge_errors_check(asset_name: str, errors: int, first: str | None = None) -> AssetCheckResult:
    return AssetCheckResult(
        asset_key=asset_name,
        check_name=JUDGE_ERRORS_CHECK,
        passed=errors == 0,
        severity=AssetCheckSeverity.WARN,
        description=(
            f"{errors} judge call(s) gave no verdict: those chunks and axes are left "
            "out of the judged scores (see the report's judge errors); re-materialise to ask "
            "again (errors are never cached)" + (f". The first said: {first}" if first else "")
            if errors
            else "every judge call gave a verdict"
        ),
    )


# The judging assets take their tables through the deferred input manager: without judging to
# do they read none of them.
DEFERRED = "parquet_deferred"


def _judge_spent(client: JudgeClient) -> dict[str, int]:
    return {"judge_calls": client.calls, "judge_cache_hits": client.hits}


def _bodies(corpus: StoredTable) -> dict[str, str]:
    table = corpus.read()
    return dict(zip(table["name"], table["body"], strict=True))


def _results(
    context: AssetExecutionContext, extractions: Any, only: set[str] | None = None
) -> dict[str, Any]:
    """Backend -> its parsed extractions, reading only the tables of `only` if given."""
    stored = {
        split_key(key)[0]: table
        for key, table in fan_in(context, "extractions", extractions).items()
    }
    return {
        backend: table_results(table.read())
        for backend, table in stored.items()
        if only is None or backend in only
    }


def build_judging_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    @asset(
        partitions_def=extraction_partitions(config),
        io_manager_key="parquet_io",
        group_name="judging",
        code_version=judging_version(config),
        ins={
            "extractions": AssetIn(
                partition_mapping=ALL_BACKENDS_SAME_MODE, input_manager_key=DEFERRED
            ),
            "corpus": AssetIn(partition_mapping=BY_MODE, input_manager_key=DEFERRED),
        },
        check_specs=[
            partition_check(
                JUDGE_ERRORS_CHECK,
                "judge_verdicts",
                extraction_partitions(config),
                description=_JUDGE_ERRORS_DESCRIPTION,
            )
        ],
    )
    def judge_verdicts(
        context: AssetExecutionContext, evals: EvalsResource, extractions: Any, corpus: Any
    ) -> Iterator[Any]:
        """LLM-as-judge matches of this backend's items to the reference's, per chunk and axis."""
        backend, _mode = split_key(context.partition_key)
        cfg = evals.config
        empty = pd.DataFrame(columns=VERDICT_COLUMNS)
        # The judge cache is loaded only where there is judging to do.
        client = None
        if cfg.judge.mode == "pairwise":
            status = "not requested (judge mode pairwise)"
        elif backend == cfg.reference:
            status = "reference backend"
        else:
            client = evals.judge_client()
            status = "skipped: ANTHROPIC_API_KEY is not set"
        if client is None:
            empty.attrs[JUDGE_STATUS] = status  # stored with the table: the report reads it
            yield Output(empty, metadata={"status": status})
            yield _judge_errors_check("judge_verdicts", 0)
            return
        results = _results(context, extractions, only={backend, cfg.reference})

        async def run() -> list[Any]:
            try:
                return await judge_against_reference(
                    client, _bodies(corpus), results[backend], results[cfg.reference]
                )
            finally:
                await client.aclose()

        try:
            verdicts = run_sync(run)
        except BaseException:  # a failure, SIGTERM: count what was spent
            yield spend_before_failure(context, _judge_spent(client))
            raise
        table = pd.DataFrame(
            [{**v.__dict__, "model": client.model} for v in verdicts], columns=VERDICT_COLUMNS
        )
        table.attrs[JUDGE_STATUS] = "ran"
        scores = judged_scores(verdicts)
        errors = sum(int(s["judge_errors"] or 0) for s in scores.values())
        metadata: dict[str, Any] = {
            "status": "ran",
            "judge_model": client.model,
            **_judge_spent(client),
            "judge_errors": errors,
        }
        metadata.update(
            {
                f"judged_{axis}_f1": float(s["f1"])
                for axis, s in scores.items()
                if s["f1"] is not None
            }
        )
        yield Output(table, metadata=metadata)
        first = next((v.error for v in verdicts if v.error), None)
        yield _judge_errors_check("judge_verdicts", errors, first)

    @asset(
        partitions_def=mode_partitions(config),
        io_manager_key="json_io",
        group_name="judging",
        code_version=judging_version(config),
        ins={
            "extractions": AssetIn(partition_mapping=BY_MODE, input_manager_key=DEFERRED),
            "corpus": AssetIn(input_manager_key=DEFERRED),
        },
        check_specs=[
            partition_check(
                JUDGE_ERRORS_CHECK,
                "pairwise_tallies",
                mode_partitions(config),
                description=_JUDGE_ERRORS_DESCRIPTION,
            )
        ],
    )
    def pairwise_tallies(
        context: AssetExecutionContext, evals: EvalsResource, extractions: Any, corpus: Any
    ) -> Iterator[Any]:
        """Blind pairwise wins/losses/ties per backend pair and axis, both slot orders."""
        cfg = evals.config
        mode = context.partition_key
        client = None if cfg.judge.mode == "reference" else evals.judge_client()
        if client is None:
            if cfg.judge.mode == "reference":
                yield Output({"status": "not_requested"}, metadata={"status": "not requested"})
            else:
                reason = "ANTHROPIC_API_KEY is not set"
                yield Output({"status": "skipped", "reason": reason}, metadata={"status": reason})
            yield _judge_errors_check("pairwise_tallies", 0)
            return
        results = _results(context, extractions)

        async def run() -> dict[str, Any]:
            try:
                return await judge_all_pairs(client, _bodies(corpus), results)
            finally:
                await client.aclose()

        try:
            pairs = run_sync(run)
        except BaseException:  # a failure, SIGTERM: count what was spent
            yield spend_before_failure(context, _judge_spent(client))
            raise
        for line in pairwise_warnings(pairs, mode):  # stderr only: the report stays pure data
            print(line, file=sys.stderr)
            context.log.info(line)
        tallies = [t for pair in pairs.values() for t in pair["axes"].values()]
        errors = sum(t["judge_errors"] for t in tallies)
        first = next((t["first_error"] for t in tallies if t["first_error"]), None)
        yield Output(
            {"status": "ran", "model": client.model, "pairs": pairs},
            metadata={
                "judge_model": client.model,
                **_judge_spent(client),
                "judge_errors": errors,
                "pairs": MetadataValue.json(pairs),
            },
        )
        yield _judge_errors_check("pairwise_tallies", errors, first)

    return [judge_verdicts, pairwise_tallies]
