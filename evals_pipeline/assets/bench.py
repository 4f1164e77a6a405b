"""The exact-match bench: every backend scored against gold corpora, not against a reference.

`gold_corpus` (one partition per corpus named in `bench.corpora`) → `bench_runs` (gold corpus ×
backend: one row of counts per episode) → `bench_report` per gold corpus, which writes
`<stamp>.json` and `<stamp>.md` under `bench.output_dir/<corpus>/` for `evals-pipeline compare`.
The blocking `oracle_ceiling` check fails the report when an oracle row is not perfect: the gold
is then unscorable through our own prompting and parsing, and no model row means anything.
"""

import functools
import warnings
from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    BetaWarning,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    MultiToSingleDimensionPartitionMapping,
    Output,
    StaticPartitionsDefinition,
    asset,
)

from ..core.bench.gold import oracle_shortfalls, render_gold_markdown, run_gold
from ..core.bench.runner import merge_rows, row_cost, write_run
from ..core.config import EvalsConfig
from ..partitions import backend_crossed, crossed_key, fan_in, partition_check, split_crossed
from ..resources import EvalsResource
from ..versions import bench_version, gold_version
from .extraction import COVERAGE_CHECK, LLM_POOL, coverage_severity
from .spend import extractor_spent, spend_before_failure

GOLD = "gold_corpus"
ORACLE_CHECK = "oracle_ceiling"

# A bench step's counts, under the bench's metadata names (the driver sums them apart).
_spent = functools.partial(extractor_spent, calls="bench_calls", prefix="bench_")

with warnings.catch_warnings():  # beta in Dagster 1.13, and exactly the mapping we mean
    warnings.simplefilter("ignore", BetaWarning)
    BY_GOLD = MultiToSingleDimensionPartitionMapping(partition_dimension_name=GOLD)


def gold_partitions(config: EvalsConfig) -> StaticPartitionsDefinition:
    return StaticPartitionsDefinition(sorted(config.bench.corpora))


def bench_partitions(config: EvalsConfig) -> MultiPartitionsDefinition:
    return backend_crossed(list(config.bench_backends), GOLD, gold_partitions(config))


def bench_key(backend: str, gold: str) -> MultiPartitionKey:
    return crossed_key(backend, GOLD, gold)


def _split(key: str) -> tuple[str, str]:
    """(backend, gold corpus) of a bench partition key."""
    return split_crossed(key, GOLD)


def build_bench_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    if not config.bench.corpora:
        return []
    golds = gold_partitions(config)
    runs = bench_partitions(config)

    @asset(
        partitions_def=golds,
        io_manager_key="json_io",
        group_name="bench",
        code_version=gold_version(config),
    )
    def gold_corpus(context: AssetExecutionContext, evals: EvalsResource) -> Output[dict]:
        """A gold corpus, loaded and checked: quotes verbatim, values coerced, handles known."""
        gold = evals.gold(context.partition_key)
        summary = gold.summary()
        return Output(
            summary,
            metadata={
                "episodes": gold.episode_count,
                "digest": gold.digest,
                "kind": gold.kind,
                "path": MetadataValue.path(str(gold.path)),
            },
        )

    @asset(
        partitions_def=runs,
        io_manager_key="json_io",
        group_name="bench",
        pool=LLM_POOL,
        code_version=bench_version(config),
        ins={"gold_corpus": AssetIn(partition_mapping=BY_GOLD)},
        check_specs=[
            partition_check(
                COVERAGE_CHECK,
                "bench_runs",
                runs,
                description=(
                    "Every extraction was in the replayed cassette. A miss (a cassette recorded "
                    "for other cases, texts or prompts) counts as an episode error; the row then "
                    "measures the cassette, not the model. Not blocking: WARN, or ERROR when the "
                    "cassette holds a missed episode's call under another key (stale: a prompt "
                    "edit), and the commands then exit 1 after the reports."
                ),
            )
        ],
    )
    def bench_runs(
        context: AssetExecutionContext, evals: EvalsResource, gold_corpus: dict[str, Any]
    ) -> Iterator[Any]:
        """One backend cast over one gold corpus: counts per episode, pooled rates."""
        backend, name = _split(context.partition_key)
        gold = evals.gold(name)
        extractor = evals.bench_extractor(backend, gold)
        try:
            report = run_gold(
                gold,
                extractor,
                row_name=backend,
                ontology_mode=evals.config.bench.ontology_mode,
                concurrency=evals.config.concurrency,
            )
        except BaseException:  # a failure, SIGTERM: count what was spent
            yield spend_before_failure(context, _spent(extractor))
            raise
        row = report["rows"][backend]
        row["spec"] = evals.config.bench_specs[backend].describe()
        row["cost_usd"] = row_cost(row, evals.prices())
        episodes = row["episodes"]
        metadata: dict[str, Any] = {
            k: float(v) for k, v in row["rates"].items() if isinstance(v, int | float)
        }
        metadata |= {
            "episodes": len(episodes),
            "errors": sum(e["status"] != "ok" for e in episodes),
            **_spent(extractor),
            "requests": sum(int(e["counts"].get("requests", 0)) for e in episodes),
            "spec": row["spec"],
        }
        yield Output(report, metadata=metadata)
        cassette = evals.config.bench_specs[backend].cassette_path
        yield AssetCheckResult(
            check_name=COVERAGE_CHECK,
            passed=extractor.misses == 0,
            severity=coverage_severity(
                extractor.missed, cassette, evals.config.bench.ontology_mode
            ),
            description=(
                f"{extractor.misses} of {extractor.misses + extractor.replayed} extractions are "
                f"not in {cassette or 'the cassette'} under {evals.config.bench.ontology_mode} "
                f"prompts for {name}: the cassette was recorded for other cases, texts or "
                "prompts, and they count as episode errors. Record one for this gold corpus "
                "against a live backend (evals-pipeline bench --record-cassette)"
                if extractor.misses
                else "no cassette miss"
            ),
        )

    @asset(
        partitions_def=golds,
        io_manager_key="json_io",
        group_name="bench",
        code_version=bench_version(config),
        ins={"bench_runs": AssetIn(partition_mapping=BY_GOLD)},
        check_specs=[
            partition_check(
                ORACLE_CHECK,
                "bench_report",
                golds,
                blocking=True,
                description=(
                    "Every oracle row reaches the ceiling its gold corpus allows (CEILING): the "
                    "scorer and the corpus agree. A rate not in CEILING, such as seed_recall, is "
                    "left out: selection bounds it for the oracle too."
                ),
            )
        ],
    )
    def bench_report(
        context: AssetExecutionContext, evals: EvalsResource, bench_runs: Any
    ) -> Iterator[Any]:
        """Every backend's row over one gold corpus, written as `<stamp>.json` and `.md`."""
        name = context.partition_key
        by_backend = {_split(k)[0]: v for k, v in fan_in(context, "bench_runs", bench_runs).items()}
        report = merge_rows(*(by_backend[b] for b in sorted(by_backend)))
        out_dir = evals.config.bench.output_dir / name
        markdown = render_gold_markdown(report)  # rendered once: written, and shown in the UI
        json_path, md_path = write_run(report, out_dir, render=lambda _report: markdown)
        metadata: dict[str, Any] = {
            f"{row}/{rate}": float(value)
            for row, data in report["rows"].items()
            for rate, value in data["rates"].items()
            if isinstance(value, int | float)
        }
        metadata |= {
            "publishable": bool(report.get("publishable")),
            "report_json": MetadataValue.path(str(json_path)),
            "bench_report_md": MetadataValue.path(str(md_path)),
            "report": MetadataValue.md(markdown),
        }
        yield Output(report, metadata=metadata)
        oracles = [b for b, spec in evals.config.bench_specs.items() if spec.kind == "oracle"]
        missed = oracle_shortfalls(report, [b for b in oracles if b in report["rows"]])
        yield AssetCheckResult(
            check_name=ORACLE_CHECK,
            passed=not missed,
            severity=AssetCheckSeverity.ERROR,
            description="; ".join(missed) or f"oracle rows perfect: {', '.join(oracles) or 'none'}",
        )

    return [gold_corpus, bench_runs, bench_report]
