"""Running an extractor over the bench corpus and writing the run report.

Every episode goes through our real extraction path (`extract_all` under
`ExtractOptions.for_mode`), shown the case's schema, or its slice when the case has a budget.
The report is the JSON `core.compare` reads: per row, every count for every episode (errored
ones included: nothing produced, everything still expected) and the pooled rates.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from ..compare import LOWER_IS_BETTER, RATES
from ..errors import OutputPathError
from ..extractors.base import Extractor
from ..extractors.oracle import OracleExtractor, OracleMissing
from ..models import Episode, OntologyMode
from ..ontology import Ontology
from ..options import DEFAULT_MAX_TOKENS_EDGES, DEFAULT_MAX_TOKENS_ENTITIES, ExtractOptions
from ..prices import cost_usd
from ..runner import ChunkRun, extract_all, gather_all, run_sync
from ..statistics import most_frequent
from .corpus import BenchCase, BenchCorpus, BenchEpisode
from .metrics import episode_counts, first_reply, pooled_rates, recast_counts
from .slice import slice_schema

# Every bench call is made at `ExtractOptions.for_mode`'s default token budgets (entities,
# edges): part of a recorded backend's and the extraction cache's check of what it may reuse.
BENCH_BUDGETS = (DEFAULT_MAX_TOKENS_ENTITIES, DEFAULT_MAX_TOKENS_EDGES)


def oracle_extractor(corpus: BenchCorpus) -> OracleExtractor:
    """The oracle row: replies with each episode's expected graph."""
    return OracleExtractor(corpus.expected_results())


def _shown(case: BenchCase, episode: BenchEpisode) -> tuple[Ontology, tuple[str, ...] | None]:
    if case.budget is None:
        return case.schema, None
    cut = slice_schema(case.schema, episode.body, case.budget)
    return cut.ontology, cut.seeds


_Cast = tuple[BenchCase, BenchEpisode, Episode, Ontology, tuple[str, ...] | None]


def _casts(corpus: BenchCorpus) -> list[_Cast]:
    """Every episode with the schema it is shown (its case's, or the slice of it)."""
    plan: list[_Cast] = []
    for case in corpus.cases:
        for ep in case.episodes:
            shown, seeds = _shown(case, ep)
            episode = Episode(name=corpus.episode_name(case, ep), body=ep.body, context=ep.context)
            plan.append((case, ep, episode, shown, seeds))
    return plan


def bench_calls(
    corpus: BenchCorpus, ontology_mode: OntologyMode = "strict"
) -> list[tuple[Episode, ExtractOptions]]:
    """The extractions `run_bench` makes, in order, recasts included (what a plan checks a
    cassette against)."""
    plan = _casts(corpus)
    casts = [*plan, *(p for p in plan if p[0].recast)]
    return [(p[2], ExtractOptions.for_mode(ontology_mode, p[3])) for p in casts]


def run_bench(
    corpus: BenchCorpus,
    extractor: Extractor,
    *,
    row_name: str,
    ontology_mode: OntologyMode = "strict",
    concurrency: int = 8,
) -> dict[str, Any]:
    """Cast every episode of `corpus` with `extractor`; the run report as a dict."""
    plan = _casts(corpus)

    async def cast_all() -> list[ChunkRun]:
        # One extract_all per episode: each may be shown a different slice of its schema.
        gate = asyncio.Semaphore(concurrency)
        stopped: list[BaseException] = []  # an error that is not one episode's: start no more

        async def one(episode: Episode, shown: Ontology) -> ChunkRun:
            async with gate:
                if stopped:
                    raise stopped[0]
                options = ExtractOptions.for_mode(ontology_mode, shown)
                try:
                    runs = await extract_all(extractor, [episode], options, tolerate_misses=True)
                except OracleMissing as exc:  # this episode's error, counted in its row
                    return ChunkRun(episode, None, str(exc), type(exc).__name__)
                except Exception as exc:
                    # A full disk, a read-only or corrupt cassette, a bug: the episodes still
                    # waiting would each make (and pay for) a call that cannot be recorded.
                    stopped.append(exc)
                    raise
                return runs[0]

        async def cast_each(jobs: list[tuple[Episode, Ontology]]) -> list[ChunkRun]:
            """Every job; those in flight finish before the first error is raised."""
            return await gather_all([one(*job) for job in jobs])

        try:
            firsts = await cast_each([(p[2], p[3]) for p in plan])
            # A recast case is cast again with a fresh call, after the first cast (as into a
            # graph the first cast wrote): a cassette serves its second recorded reply (FIFO).
            seconds = await cast_each([(p[2], p[3]) for p in plan if p[0].recast])
        finally:
            await extractor.aclose()  # this loop's clients; a later run opens its own
        return [*firsts, *seconds]

    all_runs = run_sync(cast_all)
    runs, second_runs = all_runs[: len(plan)], iter(all_runs[len(plan) :])
    usage = usage_totals(all_runs)
    episodes: list[dict[str, Any]] = []
    for (case, ep, _episode, shown, seeds), run in zip(plan, runs, strict=True):
        if run.outcome is not None:
            counts = episode_counts(
                body=ep.body,
                context=ep.context,
                expected=ep.expected,
                result=run.outcome.result,
                schema=case.schema,
                shown=shown,
                seeds=seeds,
                stats=run.outcome.stats,
                first=first_reply(run.outcome),
            )
        else:
            counts = episode_counts(
                body=ep.body,
                context=ep.context,
                expected=ep.expected,
                result=None,
                schema=case.schema,
                shown=shown,
                seeds=seeds,
                stats=run.stats,
            )
        recast_error: str | None = None
        if case.recast:
            second = next(second_runs)
            if second.outcome is None:
                recast_error = f"second cast: {second.error or 'failed'}"
            if run.outcome is not None and second.outcome is not None:
                counts.update(
                    recast_counts(run.outcome.result, second.outcome.result, case.schema, ep.body)
                )
            cost = second.outcome.stats if second.outcome is not None else second.stats
            if cost is not None:
                counts["tokens"] += cost.input_tokens + cost.output_tokens
                counts["requests"] += cost.requests
        episodes.append(
            {
                "case": case.id,
                "source_id": ep.source_id,
                "case_digest": case.digest,
                "status": "ok" if run.ok and recast_error is None else "error",
                **({} if run.ok else {"error": run.error or ""}),
                **({} if recast_error is None or not run.ok else {"error": recast_error}),
                "counts": counts,
            }
        )
    by_case: dict[str, list[dict[str, int]]] = {}
    for e in episodes:
        by_case.setdefault(e["case"], []).append(e["counts"])
    return {
        "corpus_version": corpus.version,
        "corpus_digest": corpus.digest,
        "split": corpus.split or "all",
        "publishable": corpus.split == "test" and not corpus.modified,
        "ontology_mode": ontology_mode,
        "rows": {
            row_name: {
                **row_source(extractor, all_runs),
                "episodes": episodes,
                "usage": usage,
                "rates": pooled_rates([e["counts"] for e in episodes]),
                "cases": {c: pooled_rates(v) for c, v in sorted(by_case.items())},
            }
        },
    }


def row_source(extractor: Extractor, runs: Sequence[ChunkRun]) -> dict[str, str]:
    """The provider and model a row's answers came from (most answers' pair, ties by name): for
    a replay, the recorded model, so a prices file prices it as the prose report does (what
    the recorded calls cost); the extractor's own where no answer names one."""
    pairs = Counter((r.outcome.provider, r.outcome.model) for r in runs if r.outcome is not None)
    # One answer's pair, never one answer's provider with another's model.
    provider, model = most_frequent(pairs) or (extractor.provider, extractor.model)
    return {"provider": provider, "model": model}


def usage_totals(runs: Sequence[ChunkRun]) -> dict[str, int]:
    """Input and output tokens over every call of a row (what a price applies to)."""
    totals = {"input_tokens": 0, "output_tokens": 0}
    for run in runs:
        stats = run.outcome.stats if run.outcome is not None else run.stats
        if stats is not None:
            totals["input_tokens"] += stats.input_tokens
            totals["output_tokens"] += stats.output_tokens
    return totals


def row_cost(
    row: Mapping[str, Any], prices: Mapping[str, Mapping[str, float]] | None
) -> float | None:
    """USD for a row's tokens when a prices file names its model; None otherwise."""
    model, usage = row.get("model"), row.get("usage")
    if not isinstance(model, str) or usage is None:
        return None
    return cost_usd(model, usage["input_tokens"], usage["output_tokens"], prices)


def merge_rows(*reports: dict[str, Any]) -> dict[str, Any]:
    """One report holding the rows of several runs over the same corpus."""
    first = dict(reports[0])
    first["rows"] = {k: v for r in reports for k, v in r["rows"].items()}
    return first


def shown_rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


# What the less obvious rates mean; every rate's counts come from `compare.RATES`.
RATE_NOTES = {
    "direction": "matched edges that point the way the gold graph does",
    "conformance": "emitted items the schema shown allows (first reply)",
    "ungrounded": "items whose quote is not in the text (lower is better)",
    "forbidden": "items a case forbids (identity-less, injected, reversed) that were written "
    "(lower is better)",
    "property_precision": "properties of matched entities only: with no entity matched it "
    "is undefined (—), so read it beside entity recall",
    "property_recall": "properties of matched entities only (an unmatched entity's count as "
    "entity misses, not here)",
    "span": "matched items whose quote overlaps the gold span",
    "mention": "matched entities whose secondary-identity (`mention`) flag agrees",
    "seed_recall": "sliced cases: expected types among the types the text names (the seeds)",
    "closure_recall": "sliced cases: expected types anywhere in the slice shown",
    "recast_added": "a second cast of the same text: vertices it added",
    "recast_duplicated": "a second cast of the same text: vertices it minted again",
}


def _legend(rates: list[str]) -> list[str]:
    lines = ["", "## What the rates count", ""]
    lines.append("- `episodes errored`: episodes whose extraction failed, of the row's episodes")
    for rate in rates:
        if rate in RATES:
            num, den = RATES[rate]
            counts = f"`{num}` / `{den}`"
        else:
            counts = "F1 of its precision and recall"
        note = RATE_NOTES.get(rate)
        lines.append(f"- `{rate}`: {counts}" + (f" — {note}" if note else ""))
    lines += [
        "",
        "— : nothing to count in this run (e.g. no property expected), not 0. The oracle row "
        "answers with the gold graph: it must reach 1.0 on entity_f1, edge_f1, property_f1, "
        "direction and mention (the `oracle_ceiling` check). seed_recall measures the slicing: "
        "its seeds miss a type the text names only through a relation, for the oracle too.",
    ]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Exact-match benchmark",
        "",
        f"- corpus {report['corpus_version']} (digest `{report['corpus_digest'][:12]}`), "
        f"split {report['split']}, ontology mode {report.get('ontology_mode', 'strict')}",
    ]
    if not report.get("publishable"):
        lines.append(
            "- **not publishable**: only `--split test` on an unmodified corpus is publishable"
        )
    rows = report["rows"]
    rates = [*RATES, "entity_f1", "edge_f1", "property_f1"]
    lines += ["", "| rate | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    total = {r: len(rows[r]["episodes"]) for r in rows}
    errored = {r: sum(e["status"] != "ok" for e in rows[r]["episodes"]) for r in rows}
    lines.append(
        "| episodes errored | " + " | ".join(f"{errored[r]} / {total[r]}" for r in rows) + " |"
    )
    for rate in rates:
        # An errored episode wrote nothing, which looks clean on a lower-is-better rate: a row
        # that errored on every episode measured nothing there.
        cells = [
            "—"
            if rate in LOWER_IS_BETTER and total[r] and errored[r] == total[r]
            else shown_rate(rows[r]["rates"].get(rate))
            for r in rows
        ]
        lines.append(f"| {rate} | " + " | ".join(cells) + " |")
    if any("cost_usd" in row for row in rows.values()):
        cells = [
            "—" if rows[r].get("cost_usd") is None else f"{rows[r]['cost_usd']:.4f}" for r in rows
        ]
        lines.append("| cost (USD) | " + " | ".join(cells) + " |")
    lines += _legend(rates)
    if any(errored.values()):
        lines.append(
            "- an errored episode wrote nothing: on a lower-is-better rate (ungrounded, "
            "forbidden, the hallucination rates, tokens) it looks clean, so read those beside "
            "the row's errors; — where every episode of the row errored"
        )
    for name, row in rows.items():
        failed = [e for e in row["episodes"] if e["status"] != "ok"]
        lines += ["", f"## {name}: {len(row['episodes'])} episodes, {len(failed)} errors"]
        lines += [f"- {e['case']} {e['source_id']}: {e.get('error', '')}" for e in failed]
    return "\n".join(lines) + "\n"


def write_run(
    report: dict[str, Any],
    out_dir: Path | str,
    *,
    now: datetime | None = None,
    render: Callable[[dict[str, Any]], str] | None = None,
) -> tuple[Path, Path]:
    """Write `<stamp>.json` and `<stamp>.md` (stamp: UTC time to the second; `-2`, `-3`, …
    appended when a run of the same second is already there, so none is overwritten)."""
    json_text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    md_text = (render or render_markdown)(report)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(out, f"cannot write here: {exc.strerror or exc}") from exc
    base = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in itertools.count(1):
        stamp = base if n == 1 else f"{base}-{n}"
        json_path, md_path = out / f"{stamp}.json", out / f"{stamp}.md"
        if md_path.exists():
            continue
        try:
            json_path.open("x").close()  # claims the name: a run of the same second gets -2
        except FileExistsError:
            continue
        except OSError as exc:
            raise OutputPathError(json_path, f"cannot write here: {exc.strerror or exc}") from exc
        break
    try:  # each written whole (a temporary file renamed over the claimed name)
        write_text_atomic(json_path, json_text)
        write_text_atomic(md_path, md_text)
    except BaseException:
        json_path.unlink(missing_ok=True)  # no run file without its report beside it
        raise
    return json_path, md_path
