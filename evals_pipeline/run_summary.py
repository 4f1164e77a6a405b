"""What a driver's runs spent and what went wrong, and the lines every CLI prints of it."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class MaterializeResult:
    success: bool = True
    runs: int = 0
    extraction_calls: int = 0  # calls that reached a provider (an extract call: one a chunk)
    llm_requests: int = 0  # the LLM requests those calls sent (one or more a call)
    cache_hits: int = 0
    replayed: int = 0  # answers of local backends (cassettes, the oracle): no call, no cache
    judge_calls: int = 0
    judge_cache_hits: int = 0
    cassette_misses: int = 0
    calls_interrupted: int = 0  # stopped mid-flight: their requests are not in llm_requests
    failed_chunks: int = 0  # chunk extractions that failed (misses included), over every mode
    failed_checks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # failed WARN checks: the run goes on
    failed_steps: list[str] = field(default_factory=list)
    report_path: Path | None = None
    bench_calls: int = 0
    bench_llm_requests: int = 0
    bench_interrupted: int = 0  # as calls_interrupted, for the bench's calls
    bench_cache_hits: int = 0
    bench_replayed: int = 0
    bench_misses: int = 0
    bench_reports: list[Path] = field(default_factory=list)


def print_summary(outcome: MaterializeResult) -> None:
    """What the run cost and where its answers came from, one line on stderr (every driver)."""
    failed = f"; {outcome.failed_chunks} chunk extractions failed" if outcome.failed_chunks else ""
    print(
        f"{outcome.runs} runs; {outcome.extraction_calls} extraction calls "
        f"({_requests(outcome.llm_requests, outcome.calls_interrupted)}), "
        f"{outcome.cache_hits} answered from the extraction cache (or a recorded backend's "
        f"cassette), {outcome.replayed} replayed "
        f"from cassettes or the oracle ({outcome.cassette_misses} cassette misses){failed}; "
        f"{outcome.judge_calls} judge "
        f"calls, {outcome.judge_cache_hits} answered from the judge cache; "
        f"{bench_spend(outcome)}",
        file=sys.stderr,
    )


def _requests(requests: int, interrupted: int) -> str:
    """The LLM requests some calls sent, and how many calls stopped mid-flight uncounted."""
    stopped = (
        f"; {interrupted} stopped mid-call, whose requests (at least one each) are not counted"
        if interrupted
        else ""
    )
    return f"{requests} LLM requests{stopped}"


def bench_spend(outcome: MaterializeResult) -> str:
    """The bench's share of the summary (the main command's and `evals-pipeline bench`'s)."""
    return (
        f"{outcome.bench_calls} bench calls "
        f"({_requests(outcome.bench_llm_requests, outcome.bench_interrupted)}; "
        f"{outcome.bench_cache_hits} answered from the cache, {outcome.bench_replayed} "
        f"replayed, {outcome.bench_misses} cassette misses)"
    )


def failed_check_exit(outcome: MaterializeResult) -> int:
    """The exit of a run whose steps all ran: 1 if a check failed at ERROR whose run still went
    on (a stale cassette: calls it holds under other prompts; a prose regression), said after
    the report paths."""
    if not outcome.failed_checks:
        return 0
    print(
        f"{len(outcome.failed_checks)} check(s) failed (FAILED CHECK above): the reports are "
        "written, but measure that failure",
        file=sys.stderr,
    )
    return 1


def print_problems(outcome: MaterializeResult, *, verbose: bool) -> None:
    """What went wrong or needs a look, a line each on stderr: failed WARN checks, failed
    blocking checks, failed steps with their errors (every driver prints the same)."""
    for line in outcome.warnings:
        print(f"WARNING {line}", file=sys.stderr)
    for line in outcome.failed_checks:
        print(f"FAILED CHECK {line}", file=sys.stderr)
    for line in outcome.failed_steps:
        print(f"FAILED STEP {line}", file=sys.stderr)
    if outcome.failed_steps and not verbose:
        print(
            "(--verbose prints Dagster's event log, with each failure's traceback)", file=sys.stderr
        )
