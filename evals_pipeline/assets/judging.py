"""`judge_verdicts` (reference mode, per backend and mode) and `pairwise_tallies` (per mode).

Both read the extraction tables already materialised — judging makes zero extraction calls —
and every judge call goes through the mandatory judge cache. Without ANTHROPIC_API_KEY they
materialise an empty result marked skipped, and the report says so.
"""

import sys
from typing import Any

import pandas as pd
from dagster import AssetExecutionContext, AssetIn, AssetsDefinition, MetadataValue, Output, asset

from ..core.config import EvalsConfig
from ..core.judge.pairwise import judge_all_pairs, pairwise_warnings
from ..core.judge.reference import judge_against_reference, judged_scores
from ..core.runner import run_sync
from ..core.tables import table_results
from ..io_managers import StoredTable
from ..partitions import (
    ALL_BACKENDS_SAME_MODE,
    BY_MODE,
    extraction_partitions,
    mode_partitions,
    split_key,
)
from ..resources import EvalsResource
from .reports import fan_in

VERDICT_COLUMNS = ["chunk", "axis", "tp", "fp", "fn", "error"]


# The judging assets take their tables through the deferred input manager: without judging to
# do they read none of them.
DEFERRED = "parquet_deferred"


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
        ins={
            "extractions": AssetIn(
                partition_mapping=ALL_BACKENDS_SAME_MODE, input_manager_key=DEFERRED
            ),
            "corpus": AssetIn(partition_mapping=BY_MODE, input_manager_key=DEFERRED),
        },
    )
    def judge_verdicts(
        context: AssetExecutionContext, evals: EvalsResource, extractions: Any, corpus: Any
    ) -> Output[pd.DataFrame]:
        """LLM-as-judge matches of this backend's items to the reference's, per chunk and axis."""
        backend, _mode = split_key(context.partition_key)
        cfg = evals.config
        empty = pd.DataFrame(columns=VERDICT_COLUMNS)
        client = evals.judge_client()
        if cfg.judge.mode == "pairwise":
            return Output(empty, metadata={"status": "not requested (judge mode pairwise)"})
        if backend == cfg.reference:
            return Output(empty, metadata={"status": "reference backend"})
        if client is None:
            return Output(empty, metadata={"status": "skipped: ANTHROPIC_API_KEY is not set"})
        results = _results(context, extractions, only={backend, cfg.reference})

        async def run() -> list[Any]:
            try:
                return await judge_against_reference(
                    client, _bodies(corpus), results[backend], results[cfg.reference]
                )
            finally:
                await client.aclose()

        verdicts = run_sync(run)
        table = pd.DataFrame([v.__dict__ for v in verdicts], columns=VERDICT_COLUMNS)
        scores = judged_scores(verdicts)
        metadata: dict[str, Any] = {
            "status": "ran",
            "judge_calls": client.calls,
            "judge_cache_hits": client.hits,
        }
        metadata.update({f"judged_{axis}_f1": float(s["f1"]) for axis, s in scores.items()})
        return Output(table, metadata=metadata)

    @asset(
        partitions_def=mode_partitions(config),
        io_manager_key="json_io",
        group_name="judging",
        ins={
            "extractions": AssetIn(partition_mapping=BY_MODE, input_manager_key=DEFERRED),
            "corpus": AssetIn(input_manager_key=DEFERRED),
        },
    )
    def pairwise_tallies(
        context: AssetExecutionContext, evals: EvalsResource, extractions: Any, corpus: Any
    ) -> Output[dict]:
        """Blind pairwise wins/losses/ties per backend pair and axis, both slot orders."""
        cfg = evals.config
        if cfg.judge.mode == "reference":
            return Output({"status": "not_requested"}, metadata={"status": "not requested"})
        client = evals.judge_client()
        if client is None:
            reason = "ANTHROPIC_API_KEY is not set"
            return Output({"status": "skipped", "reason": reason}, metadata={"status": reason})
        results = _results(context, extractions)

        async def run() -> dict[str, Any]:
            try:
                return await judge_all_pairs(client, _bodies(corpus), results)
            finally:
                await client.aclose()

        pairs = run_sync(run)
        for line in pairwise_warnings(pairs):  # stderr only: the report stays pure data
            print(line, file=sys.stderr)
            context.log.info(line)
        return Output(
            {"status": "ran", "pairs": pairs},
            metadata={
                "judge_calls": client.calls,
                "judge_cache_hits": client.hits,
                "pairs": MetadataValue.json(pairs),
            },
        )

    return [judge_verdicts, pairwise_tallies]
