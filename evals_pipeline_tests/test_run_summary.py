"""The summary and problem lines every driver prints (run_summary.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import MetadataValue

from evals_pipeline.materialize import _count
from evals_pipeline.run_summary import (
    MaterializeResult,
    bench_spend,
    print_problems,
    print_summary,
)


def test_the_summary_counts_every_source_of_answers(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = MaterializeResult(
        runs=2,
        extraction_calls=4,
        llm_requests=6,
        cache_hits=3,
        replayed=9,
        cassette_misses=1,
        failed_chunks=1,
        judge_calls=5,
        judge_cache_hits=7,
        bench_calls=8,
        bench_llm_requests=10,
        bench_cache_hits=11,
        bench_replayed=12,
        bench_misses=13,
    )
    print_summary(outcome)
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("2 runs; 4 extraction calls (6 LLM requests), 3 answered from the ")
    assert (
        "9 replayed from cassettes or the oracle (1 cassette misses); 1 chunk extractions" in line
    )
    assert "5 judge calls, 7 answered from the judge cache; " in line
    assert line.endswith(bench_spend(outcome))
    assert bench_spend(outcome) == (
        "8 bench calls (10 LLM requests; 11 answered from the cache, 12 replayed, "
        "13 cassette misses)"
    )
    print_summary(MaterializeResult())
    assert "failed" not in capsys.readouterr().err  # no failed chunks, no clause for them


def test_the_summary_says_when_calls_were_stopped_mid_flight(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcome = MaterializeResult()
    _count(
        {"extraction_calls": MetadataValue.int(5), "calls_interrupted": MetadataValue.int(2)},
        outcome,
    )
    print_summary(outcome)
    assert "5 extraction calls (0 LLM requests; 2 stopped mid-call" in capsys.readouterr().err
    bench = MaterializeResult()
    _count(
        {"bench_calls": MetadataValue.int(3), "bench_calls_interrupted": MetadataValue.int(1)},
        bench,
    )
    print_summary(bench)
    assert "3 bench calls (0 LLM requests; 1 stopped mid-call" in capsys.readouterr().err
    print_summary(MaterializeResult())
    assert "stopped" not in capsys.readouterr().err


def test_problems_are_a_line_each_and_a_failed_step_points_at_verbose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcome = MaterializeResult(
        warnings=["same_graphs: a and b"],
        failed_checks=["coverage: 2 misses"],
        failed_steps=["extractions: boom"],
        report_path=Path("r.md"),
    )
    print_problems(outcome, verbose=False)
    assert capsys.readouterr().err.splitlines() == [
        "WARNING same_graphs: a and b",
        "FAILED CHECK coverage: 2 misses",
        "FAILED STEP extractions: boom",
        "(--verbose prints Dagster's event log, with each failure's traceback)",
    ]
    print_problems(outcome, verbose=True)  # the event log was printed: no pointer to it
    assert "--verbose" not in capsys.readouterr().err
    print_problems(MaterializeResult(), verbose=False)
    assert capsys.readouterr().err == ""
