"""`extractions` and `scores`, per backend and ontology mode.

Each extraction partition runs one backend over the mode's chunks, concurrently up to the
configured limit (and, across runs, the `llm` concurrency pool). Answers come from the
extraction cache when they can, so materialising an unchanged partition again makes no call.
"""

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetDep,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    Failure,
    MetadataValue,
    Output,
    asset,
)

from ..core.cassettes.keys import extract_key
from ..core.cassettes.sidecar import miss_explanation
from ..core.cassettes.store import holds_calls_of
from ..core.config import EvalsConfig
from ..core.plan import backend_guards
from ..core.reports.report import backend_summary, float_metrics
from ..core.tables import extraction_table, table_episodes
from ..partitions import BY_MODE, extraction_partitions, partition_check, split_key
from ..resources import EvalsResource
from ..versions import extraction_version, scores_version
from .corpus import PLAN_GUARDS
from .spend import extractor_spent, spend_before_failure

LLM_POOL = "llm"
COVERAGE_CHECK = "cassette_coverage"


def coverage_severity(
    missed: Mapping[str, AbstractSet[str]], cassette: Path | None, mode: str
) -> AssetCheckSeverity:
    """WARN for a cassette's shortfall: episodes it holds no call of in this mode (never
    recorded: a wider scope, another mode, a gold corpus it never saw, or a call that failed
    while recording), or too few answers of a key (a recast recorded once), an honest error
    rate, not an abort. ERROR, still not blocking, when it holds a call recorded for a missed
    episode in this mode under another key (`missed`: name -> keys asked), by each record's
    request: asked under other prompts, a prompt, ontology or text edit since, which a run's
    exit must not hide. It had been ERROR only when every episode missed, so an edit that
    reached some chunks (one text, a prompt part only some render) passed as a shortfall."""
    if not missed or cassette is None:
        return AssetCheckSeverity.WARN
    stale = holds_calls_of(cassette, mode, missed)
    return AssetCheckSeverity.ERROR if stale else AssetCheckSeverity.WARN


def build_extraction_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    partitions = extraction_partitions(config)

    @asset(
        partitions_def=partitions,
        io_manager_key="parquet_io",
        group_name="extraction",
        pool=LLM_POOL,
        code_version=extraction_version(config),
        ins={"corpus": AssetIn(partition_mapping=BY_MODE)},
        deps=[AssetDep("run_plan", partition_mapping=BY_MODE)],
        check_specs=[
            partition_check(
                COVERAGE_CHECK,
                "extractions",
                partitions,
                description=(
                    "Every chunk was in the replayed cassette. A miss means the prompt, ontology "
                    "or corpus changed since recording, or the chunk's call failed then (its "
                    "sidecar says which): the chunk counts as an error, and the cassette needs "
                    "re-recording. Not blocking (a shortfall is an honest error rate): WARN, or "
                    "ERROR when it holds a missed chunk's call in this mode under another key "
                    "(stale: a prompt, ontology or text edit), and the commands then exit 1 "
                    "after the reports."
                ),
            )
        ],
    )
    def extractions(
        context: AssetExecutionContext, evals: EvalsResource, corpus: pd.DataFrame
    ) -> Iterator[Any]:
        """One row per chunk: the graph, or the error, with its calls, tokens and parse counts."""
        backend, mode = split_key(context.partition_key)
        episodes = table_episodes(corpus)
        # This backend's guards only, without re-planning the whole run (see backend_guards).
        found = backend_guards(evals.config, backend, evals.key_environ())
        guards = [g for name in PLAN_GUARDS for g in found if g.check == name]
        if guards:  # enforced here too, for runs that did not include run_plan
            raise Failure(
                description="; ".join(g.message for g in guards),
                metadata={"guards": [g.check for g in guards]},
            )
        options = evals.options(mode)  # type: ignore[arg-type]
        # This mode's calls only: a cassette too big to share between steps loads only these.
        extractor = evals.extractor(backend, keys={extract_key(e, options) for e in episodes})

        try:
            table = extraction_table(
                extractor,
                episodes,
                options,
                concurrency=evals.config.concurrency,
                tolerate_misses=True,  # a cassette's coverage shortfall is an error rate
            )
        except BaseException:  # a failure, SIGTERM: count what was spent
            yield spend_before_failure(context, extractor_spent(extractor))
            raise
        errors = int((~table["ok"]).sum())
        spec = evals.config.specs[backend]
        yield Output(
            table,
            metadata={
                "chunks": len(table),
                "errors": errors,
                **extractor_spent(extractor),
                "spec": spec.describe(),
                **({"cache_path": str(extractor.path)} if extractor.path is not None else {}),
            },
        )
        yield AssetCheckResult(
            check_name=COVERAGE_CHECK,
            passed=extractor.misses == 0,
            severity=coverage_severity(extractor.missed, spec.cassette_path, mode),
            description=(
                miss_explanation(
                    set(table.loc[table["error_type"] == "CassetteMiss", "chunk"]),
                    len(table),
                    spec.cassette_path,
                    mode,
                )
                if extractor.misses
                else "no cassette miss"
            ),
        )

    @asset(
        partitions_def=partitions,
        io_manager_key="json_io",
        group_name="extraction",
        code_version=scores_version(config),
    )
    def scores(
        context: AssetExecutionContext, evals: EvalsResource, extractions: pd.DataFrame
    ) -> Output[dict]:
        """Reliability, latency, tokens and (strict mode) vocabulary compliance of one backend."""
        backend, mode = split_key(context.partition_key)
        summary = backend_summary(
            backend,
            evals.config.specs[backend].describe(),
            extractions,
            ontology=evals.ontology(),
            mode=mode,
            prices=evals.prices(),
        )
        flat = float_metrics({"backends": {backend: summary}})
        metadata: dict[str, object] = {k.split("/", 1)[1]: v for k, v in flat.items()}
        metadata["summary"] = MetadataValue.json(summary)
        return Output(summary, metadata=metadata)  # type: ignore[arg-type]

    return [extractions, scores]
