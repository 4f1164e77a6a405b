"""The bench assets in-process: every backend scored against each gold corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize

from evals_pipeline.assets.bench import bench_key
from evals_pipeline.core.config import BenchConfig
from evals_pipeline.graph import build_definitions
from evals_pipeline.materialize import MaterializeResult, materialize_bench
from evals_pipeline_tests.pipeline_fixtures import (
    BENCH_RULES,
    BENCH_SLOPPY,
    CASES,
    REPO,
    make_config,
)

WEBNLG = REPO.parent / "shared" / "data" / "webnlg" / "dev.jsonl"


def _bench_config(tmp_path: Path, corpora: dict[str, Path], **bench: object):  # type: ignore[no-untyped-def]
    return make_config(
        tmp_path,
        {"oracle": "oracle"},
        bench=BenchConfig(
            backends={
                "oracle": "oracle",
                "rules": f"cassette:path={BENCH_RULES}",
                "sloppy": f"cassette:path={BENCH_SLOPPY}",
            },
            corpora=corpora,
            output_dir=tmp_path / "bench",
            **bench,  # type: ignore[arg-type]
        ),
    )


def test_bench_assets_score_every_backend_against_the_cases(tmp_path: Path) -> None:
    config = _bench_config(tmp_path, {"cases": CASES})
    defs = build_definitions(config)
    instance = DagsterInstance.ephemeral()
    outcome = MaterializeResult()
    assert materialize_bench(config, defs, instance, outcome, quiet=True)
    assert outcome.failed_checks == [] and outcome.success
    (md,) = outcome.bench_reports
    report = json.loads(md.with_suffix(".json").read_text())
    assert set(report["rows"]) == {"oracle", "rules", "sloppy"}
    oracle = report["rows"]["oracle"]["rates"]
    for rate in ("entity_f1", "edge_f1", "property_f1", "direction", "mention", "conformance"):
        assert oracle[rate] == 1.0, rate
    for name in ("rules", "sloppy"):
        row = report["rows"][name]
        # The shipped bench cassettes cover every call, recast second casts included.
        assert [e for e in row["episodes"] if e["status"] != "ok"] == []
        assert row["rates"]["entity_f1"] < 1.0  # rule-based responders, not the ceiling
    # sloppy truncates one entity call in four on the first attempt: first reply < final.
    sloppy = report["rows"]["sloppy"]["rates"]
    assert sloppy["conformance"] is not None and sloppy["conformance_final"] is not None
    assert "not publishable" in md.read_text()
    assert report["publishable"] is False

    # Every bench partition again: the oracle and the cassettes are replayed (never calls, never
    # cached), recast second casts included, and the rows come out the same.
    assert (outcome.bench_calls, outcome.bench_replayed) == (0, 3 * (36 + 4))  # 4 recast again
    again = MaterializeResult()
    assert materialize_bench(config, defs, instance, again, quiet=True)
    assert (again.bench_calls, again.bench_replayed) == (0, 3 * (36 + 4))
    (md2,) = again.bench_reports
    rerun = json.loads(md2.with_suffix(".json").read_text())
    assert {n: r["rates"] for n, r in rerun["rows"].items()} == {
        n: r["rates"] for n, r in report["rows"].items()
    }

    # The report re-materialised alone reads the stored runs: no extraction call at all.
    result = materialize(
        list(defs.assets or []),  # type: ignore[arg-type]
        selection=["bench_report"],
        partition_key="cases",
        instance=instance,
        resources=defs.resources,
    )
    assert result.success
    calls = [
        e.materialization.metadata.get("bench_calls")
        for e in result.get_asset_materialization_events()
    ]
    assert calls == [None]  # only bench_report materialised; bench_runs was not re-run


@pytest.mark.skipif(not WEBNLG.exists(), reason="WebNLG data not present beside the repository")
def test_webnlg_dev_file_is_a_gold_partition_and_the_oracle_scores_one(tmp_path: Path) -> None:
    config = _bench_config(tmp_path, {"webnlg": WEBNLG})
    config = config.model_copy(
        update={"bench": config.bench.model_copy(update={"backends": {"oracle": "oracle"}})}
    )
    defs = build_definitions(config)
    outcome = MaterializeResult()
    assert materialize_bench(config, defs, DagsterInstance.ephemeral(), outcome, quiet=True)
    (md,) = outcome.bench_reports
    report = json.loads(md.with_suffix(".json").read_text())
    row = report["rows"]["oracle"]
    assert row["rates"] == {"triple_precision": 1.0, "triple_recall": 1.0, "triple_f1": 1.0}
    assert row["counts"]["fn"] == 0 and row["counts"]["tp"] > 900
    assert len(row["episodes"]) == 300
    assert str(bench_key("oracle", "webnlg")) == "oracle|webnlg"


@pytest.mark.skipif(not WEBNLG.exists(), reason="WebNLG data not present beside the repository")
def test_a_bench_cassette_recorded_for_other_texts_is_warned_about_not_scored_silently(
    tmp_path: Path,
) -> None:
    """The shipped bench cassettes cover corpus/cases, not WebNLG: every rules episode is a
    cassette miss, which a WARN check and the report's note say (its F1 0.000 measures that)."""
    config = _bench_config(tmp_path, {"webnlg": WEBNLG})
    config = config.model_copy(
        update={
            "bench": config.bench.model_copy(
                update={"backends": {"oracle": "oracle", "rules": f"cassette:path={BENCH_RULES}"}}
            )
        }
    )
    outcome = MaterializeResult()
    ok = materialize_bench(config, build_definitions(config), DagsterInstance.ephemeral(), outcome)
    assert ok and outcome.success  # a shortfall is an error rate, not an abort
    assert not outcome.failed_checks  # (a WARN: it was recorded for other texts, not stale)
    [warning] = [w for w in outcome.warnings if "cassette_coverage" in w]
    assert warning.startswith("bench_runs[rules|webnlg] cassette_coverage: 300 of 300 ")
    (md,) = outcome.bench_reports
    assert "- rules: 300 of 300 episodes errored, 300 of them cassette misses" in md.read_text()


def test_a_live_bench_backend_counts_its_llm_requests_beside_its_calls(tmp_path: Path) -> None:
    """A bench backend's retried call sent two requests: the summary says what was billed, as
    it does for the extraction calls (it had said only how many calls)."""
    from evals_pipeline.run_summary import bench_spend
    from evals_pipeline_tests.support.deterministic_backend import openai_responder
    from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, openai_error

    with LoopbackLLMServer("openai", responder=openai_responder) as server:
        server.enqueue(openai_error(500))  # the first call's first request; its retry succeeds
        live = f"oai-http:url={server.base_url},model=rules-tidy"
        config = _bench_config(tmp_path, {"cases": CASES})
        config = config.model_copy(
            update={
                "bench": config.bench.model_copy(
                    update={"backends": {"oracle": "oracle", "live": live}}
                )
            }
        )
        defs = build_definitions(config)
        outcome = MaterializeResult()
        with DagsterInstance.ephemeral() as instance:
            assert materialize_bench(config, defs, instance, outcome, quiet=True)
        sent = len(server.requests)
    assert outcome.bench_calls > 0
    # An extract call sends two requests (entities, then edges), and one was retried.
    assert outcome.bench_llm_requests == sent == 2 * outcome.bench_calls + 1
    assert f"{outcome.bench_calls} bench calls ({sent} LLM requests; " in bench_spend(outcome)
