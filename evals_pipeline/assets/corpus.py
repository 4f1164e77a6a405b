"""`corpus` and `run_plan`, per ontology mode: what will be extracted, and whether it may be.

The guards are blocking checks on `run_plan`, so a corrupt or duplicate-keyed cassette, two
backends replaying one cassette, recording a replay, an anthropic backend without its key or
an input a later prose step would refuse (`run_inputs`: what the CLI's preflight reads of them)
stops the run before any extraction. A failed guard also fails the step, leaving that mode's
plan unmaterialised, so a backfill (whose extraction partitions run in runs of their own) stops
there too.
"""

from collections.abc import Iterator
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetsDefinition,
    Failure,
    MetadataValue,
    Output,
    asset,
)

from ..core.cassettes.keys import extract_key
from ..core.config import EvalsConfig
from ..core.errors import EvalsError
from ..core.preflight import check_prose_inputs
from ..core.tables import episodes_table, table_episodes
from ..partitions import mode_partitions, partition_check
from ..resources import EvalsResource
from ..versions import corpus_version, plan_version

# The corpus file's digest, in the stored table's attrs: of the chunks as they were read.
CORPUS_DIGEST = "corpus_digest"
PLAN_GUARDS = (
    "cassette_integrity",
    "distinct_cassettes",
    "no_record_on_replay",
    "recording_targets",
    "live_credentials",
    "run_inputs",
)
# What each guard asserts, shown with its check in the UI.
GUARD_DESCRIPTIONS = {
    "cassette_integrity": (
        "Every replayed cassette is present and loads: no corrupt or torn line, no key recorded "
        "twice (an eval backend has one answer per call)."
    ),
    "distinct_cassettes": (
        "No two backends replay the same cassette file or byte-identical ones: comparing a "
        "recording with itself is degenerate."
    ),
    "no_record_on_replay": "No backend both replays a cassette and records one.",
    "recording_targets": (
        "Every recording target is a cassette its backend can take answers from (its model's, "
        "at the run's token budgets, one a key), and no two backends record into one file or "
        "into a cassette another replays: a recording is served what its file holds."
    ),
    "live_credentials": (
        "Every anthropic backend has ANTHROPIC_API_KEY: without it the backend's extraction "
        "fails, after the other backends' steps have made their calls."
    ),
    "run_inputs": (
        "Every input a later prose step reads loads, as `evals-pipeline` reads them before a "
        "run: the oracle's labels, the judge cache, the keys, proxy variables and Anthropic "
        "base URL the live backends and the judge send with. A bad one had failed its step "
        "after the calls of the steps before it."
    ),
}


def build_corpus_assets(config: EvalsConfig) -> list[AssetsDefinition]:
    modes = mode_partitions(config)

    @asset(
        partitions_def=modes,
        io_manager_key="parquet_io",
        group_name="inputs",
        code_version=corpus_version(config),
    )
    def corpus(context: AssetExecutionContext, evals: EvalsResource) -> Output[pd.DataFrame]:
        """The chunks in scope, with each chunk's cassette key under this mode's prompts."""
        mode = context.partition_key
        chunks = evals.corpus()
        options = evals.options(mode)
        table = episodes_table(chunks.chunks)
        table["extract_key"] = [extract_key(c.episode, options) for c in chunks.chunks]
        table.attrs[CORPUS_DIGEST] = chunks.digest  # stored with the chunks it is the digest of
        return Output(
            table,
            metadata={
                "chunks": len(table),
                "corpus_path": str(chunks.path),
                "corpus_digest": chunks.digest,
            },
        )

    @asset(
        partitions_def=modes,
        io_manager_key="json_io",
        group_name="inputs",
        code_version=plan_version(config),
        check_specs=[
            partition_check(
                name, "run_plan", modes, blocking=True, description=GUARD_DESCRIPTIONS[name]
            )
            for name in PLAN_GUARDS
        ],
    )
    def run_plan(
        context: AssetExecutionContext, evals: EvalsResource, corpus: pd.DataFrame
    ) -> Iterator[Any]:
        """This mode's resolved plan (the code of --dry-run); guards are its blocking checks.

        How much of the judging the judge cache covers is worked out only when there will be
        judging (a key is set): it replays every backend to render the judge prompts.
        """
        mode = context.partition_key
        inputs_problem = _inputs_problem(evals)  # the CLI's preflight, for Dagster's runs
        judged = bool(evals.anthropic_api_key)
        plan = evals.plan(table_episodes(corpus), judge_coverage=judged, modes=[mode])
        metadata: dict[str, Any] = {
            "plan": MetadataValue.md(f"```\n{plan.render()}\n```"),
            "guards": len(plan.guards),
            "planned_llm_requests": sum(
                b.planned_calls.get(mode, 0) for b in plan.backends.values()
            ),
        }
        failed = {name: [g.message for g in plan.guards_for(name)] for name in PLAN_GUARDS}
        failed["run_inputs"] = [inputs_problem] if inputs_problem else []
        results = [
            AssetCheckResult(
                check_name=name,
                passed=not problems,
                severity=AssetCheckSeverity.ERROR,
                description="; ".join(problems) or "ok",
            )
            for name, problems in failed.items()
        ]
        if any(failed.values()):
            # Not materialised: a blocking check stops only its own run's downstream steps,
            # and a backfill launches each extraction partition in a run of its own once its
            # run_plan partition is materialised (it had made every other backend's paid calls).
            yield from results
            checks = ", ".join(sorted(name for name, problems in failed.items() if problems))
            raise Failure(
                description=f"blocking check(s) failed: {checks} (see the checks)",
                metadata=metadata,
            )
        yield Output(plan.to_dict(), metadata=metadata)
        yield from results

    return [corpus, run_plan]


def _inputs_problem(evals: EvalsResource) -> str | None:
    """What the CLI's preflight would refuse of the prose run (a run from Dagster's UI or CLI
    skips it), or None. Not the claim gate's or the bench's inputs: their assets depend on no
    prose asset, and fail on their own. Read through the resource's memo of the corpus the
    `corpus` step loaded, with the key the run was launched with."""
    try:
        check_prose_inputs(evals.config, evals.corpus(), evals.key_environ(), bench=False)
    except EvalsError as exc:
        return str(exc)
    return None
