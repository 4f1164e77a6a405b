import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evals_pipeline.core.models import (
    CallStats,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
    FailureRecord,
    ParseCounts,
    TruncationCounts,
)
from evals_pipeline.core.ontology import EntityType, Ontology, RelationType
from evals_pipeline.core.reports.assemble import assemble_mode_report
from evals_pipeline.core.reports.files import write_report_files
from evals_pipeline.core.reports.markdown import render_mode_matrix, render_mode_report
from evals_pipeline.core.reports.plot import plot_f1_by_mode
from evals_pipeline.core.reports.report import backend_summary, float_metrics, mode_matrix
from evals_pipeline.core.runner import ChunkRun
from evals_pipeline.core.scoring.strict import score_keys, table_keys
from evals_pipeline.core.tables import runs_to_table

ONTOLOGY = Ontology(
    name="people",
    entity_types=(EntityType(name="Person"), EntityType(name="Organization")),
    relation_types=(RelationType(name="WORKS_FOR"), RelationType(name="KNOWS")),
)
PRICES = {"m-small": {"input_per_1m": 2.0, "output_per_1m": 10.0}}
CORPUS = {"digest": "sha256:abc123", "chunks": 3}
JUDGE = {"status": "skipped", "reason": "ANTHROPIC_API_KEY is not set"}
SPECS = {"cand": "openai_compat:m-small", "ref": "anthropic:claude-ref"}


def stats(
    *,
    requests: int = 1,
    input_tokens: int = 0,
    output_tokens: int = 0,
    latency_ms: float = 0.0,
    clean: int = 0,
    recovered: int = 0,
    malformed: int = 0,
    retry_succeeded: int = 0,
    exhausted: int = 0,
) -> CallStats:
    return CallStats(
        requests=requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        latency_ms=latency_ms,
        structured_output=ParseCounts(clean=clean, recovered=recovered, malformed=malformed),
        truncated=TruncationCounts(retry_succeeded=retry_succeeded, exhausted=exhausted),
    )


def ok_run(
    chunk: str,
    result: ExtractionResult,
    call_stats: CallStats,
    *,
    provider: str,
    model: str,
    failures: tuple[FailureRecord, ...] = (),
) -> ChunkRun:
    outcome = ExtractionOutcome(
        result=result,
        stats=call_stats,
        transcript=(),
        failures=failures,
        provider=provider,
        model=model,
    )
    return ChunkRun(Episode(name=chunk, body=f"text of {chunk}"), outcome)


def failed_run(chunk: str, error_type: str, call_stats: CallStats | None = None) -> ChunkRun:
    return ChunkRun(
        Episode(name=chunk, body=f"text of {chunk}"),
        None,
        error=f"{error_type}: boom",
        error_type=error_type,
        stats=call_stats,
    )


EDGE_BUDGET = FailureRecord(
    ts_ms=0,
    model="m-small",
    call_type="edges",
    chunk_key="c3",
    classification="truncation",
    raw_body="{",
    finish_reason="length",
    completion_tokens=512,
    max_tokens=512,
)


def reference_table() -> pd.DataFrame:
    return runs_to_table(
        [
            ok_run(
                "c1",
                ExtractionResult(
                    entities=(
                        Entity(name="Alice", type="Person", summary="An engineer"),
                        Entity(name="Acme", type="Organization"),
                    ),
                    edges=(Edge(source="Alice", relation="WORKS_FOR", target="Acme"),),
                ),
                stats(requests=2, input_tokens=800, output_tokens=150, latency_ms=400, clean=2),
                provider="anthropic",
                model="claude-ref",
            ),
            ok_run(
                "c2",
                ExtractionResult(
                    entities=(Entity(name="Bob", type="Person", summary="A designer"),),
                    edges=(Edge(source="Bob", relation="KNOWS", target="Alice"),),
                ),
                stats(requests=2, input_tokens=600, output_tokens=120, latency_ms=200, clean=2),
                provider="anthropic",
                model="claude-ref",
            ),
            failed_run("c3", "CassetteMiss"),
        ]
    )


def candidate_table(*, truncated: bool = True) -> pd.DataFrame:
    return runs_to_table(
        [
            ok_run(
                "c1",
                ExtractionResult(
                    entities=(
                        Entity(name="  alice ", type="Person", summary="an  engineer"),
                        Entity(name="ACME", type="Company", summary="A company"),
                        Entity(name="Bob", type="Person"),
                    ),
                    edges=(
                        Edge(source="Acme", relation="WORKS_FOR", target="Alice"),  # reversed
                        Edge(source="alice", relation="works_for", target="ACME"),
                    ),
                ),
                stats(requests=2, input_tokens=1000, output_tokens=200, latency_ms=100, clean=2),
                provider="openai_compat",
                model="m-small",
            ),
            failed_run(
                "c2",
                "ExtractionFailed",
                stats(requests=1, input_tokens=500, output_tokens=100, latency_ms=50, malformed=1),
            ),
            ok_run(
                "c3",
                ExtractionResult(entities=(Entity(name="Carol"),)),
                stats(
                    requests=3,
                    input_tokens=2000,
                    output_tokens=400,
                    latency_ms=300,
                    clean=1,
                    recovered=1,
                    retry_succeeded=1 if truncated else 0,
                ),
                provider="openai_compat",
                model="m-small",
                failures=(EDGE_BUDGET,),
            ),
        ]
    )


def mode_report(
    *,
    mode: str,
    reference: str,
    specs: dict[str, str],
    tables: dict[str, pd.DataFrame],
    ontology: Ontology | None,
    corpus: dict[str, Any],
    judge: dict[str, Any],
    notes: tuple[str, ...] = (),
    prices: dict[str, dict[str, float]] | None = None,
) -> dict[str, Any]:
    """A mode's report as the graph builds it: each backend's summary (the `scores` asset),
    strict scores against the reference (`reference_comparison`), then `assemble_mode_report`."""
    ref = table_keys(tables[reference])
    return assemble_mode_report(
        mode=mode,
        reference=reference,
        ontology=ontology.name if ontology is not None else None,
        summaries={
            name: backend_summary(
                name, specs[name], table, ontology=ontology, mode=mode, prices=prices
            )
            for name, table in tables.items()
        },
        strict={
            name: score_keys(table_keys(table), ref).to_dict()
            for name, table in tables.items()
            if name != reference
        },
        corpus=corpus,
        judge=judge,
        notes=notes,
    )


def report_for(mode: str, **kwargs: Any) -> dict[str, Any]:
    return mode_report(
        mode=mode,
        reference="ref",
        specs=SPECS,
        tables={"ref": reference_table(), "cand": kwargs.pop("cand", candidate_table())},
        ontology=ONTOLOGY,
        corpus=CORPUS,
        judge=JUDGE,
        notes=kwargs.pop("notes", ("Scores are agreement with ref.",)),
        prices=kwargs.pop("prices", PRICES),
    )


def test_strict_mode_report_every_number() -> None:
    report = report_for("strict")
    assert list(report) == [
        "ontology_mode",
        "reference",
        "ontology",
        "corpus",
        "judge",
        "notes",
        "backends",
    ]
    assert report["ontology_mode"] == "strict"
    assert report["reference"] == "ref"
    assert report["ontology"] == "people"
    assert report["corpus"] == CORPUS
    assert report["judge"] == JUDGE
    assert report["notes"] == ["Scores are agreement with ref."]
    assert list(report["backends"]) == ["cand", "ref"]

    cand = report["backends"]["cand"]
    assert cand["name"] == "cand"
    assert cand["spec"] == "openai_compat:m-small"
    assert cand["chunks"] == 3
    assert cand["errors"] == 1
    assert cand["error_rate"] == pytest.approx(1 / 3)
    assert cand["errors_by_type"] == {"ExtractionFailed": 1}

    strict = cand["strict"]
    assert strict["chunks_compared"] == 2
    assert strict["skipped_chunks"] == 1  # the reference failed on c3
    # entities: c1 {alice, acme, bob} vs {alice, acme}; c2 failed vs {bob}
    assert {k: strict["entities"][k] for k in ("tp", "fp", "fn")} == {"tp": 2, "fp": 1, "fn": 1}
    assert strict["entities"]["precision"] == pytest.approx(2 / 3)
    assert strict["entities"]["recall"] == pytest.approx(2 / 3)
    assert strict["entities"]["f1"] == pytest.approx(2 / 3)
    # typed: Alice agrees; ACME is a Company, not an Organization; Bob (c1) is extra and
    # Bob (c2) missed
    assert {k: strict["types"][k] for k in ("tp", "fp", "fn")} == {"tp": 1, "fp": 2, "fn": 2}
    assert strict["types"]["f1"] == pytest.approx(1 / 3)
    # edges: the reversed edge is an FP; c2's KNOWS edge is an FN
    assert {k: strict["edges"][k] for k in ("tp", "fp", "fn")} == {"tp": 1, "fp": 1, "fn": 1}
    assert strict["edges"]["f1"] == pytest.approx(0.5)
    # summaries: alice matches; ACME's is extra; Bob's (c2) is missed
    assert {k: strict["summaries"][k] for k in ("tp", "fp", "fn")} == {"tp": 1, "fp": 1, "fn": 1}
    assert strict["summaries"]["precision"] == pytest.approx(0.5)
    assert strict["summaries"]["recall"] == pytest.approx(0.5)

    # latency over successful chunks only (100, 300), not the failed chunk's 50
    assert cand["latency_ms"] == {
        "p50": pytest.approx(200.0),
        "p90": pytest.approx(280.0),
        "p99": pytest.approx(298.0),
    }
    # counts over every chunk, failed ones included
    assert cand["structured_output"] == {"clean": 3, "recovered": 1, "malformed": 1}
    assert cand["truncated"] == {"retry_succeeded": 1, "exhausted": 0}
    assert cand["edge_budget_exhausted_chunks"] == 1
    assert cand["tokens"] == {"input": 3500, "output": 700}
    assert cand["requests"] == 6
    assert cand["provider"] == "openai_compat"
    assert cand["model"] == "m-small"
    assert cand["cost_usd"] == pytest.approx(3500 * 2.0 / 1e6 + 700 * 10.0 / 1e6)
    # c1: ACME is a Company (outside), c3: Carol untyped (outside); the vocabulary is exact, so
    # "works_for" is outside while strict scoring (normalised) still matched that edge.
    assert cand["vocabulary_compliance"] == {
        "entities_outside": 2,
        "entities_total": 4,
        "edges_outside": 1,
        "edges_total": 2,
        "outside_rate": pytest.approx(3 / 6),
    }

    ref = report["backends"]["ref"]
    assert ref["strict"] is None  # it is the reference
    assert ref["chunks"] == 3
    assert ref["errors"] == 1
    assert ref["errors_by_type"] == {"CassetteMiss": 1}
    assert ref["latency_ms"] == {
        "p50": pytest.approx(300.0),
        "p90": pytest.approx(380.0),
        "p99": pytest.approx(398.0),
    }
    assert ref["structured_output"] == {"clean": 4, "recovered": 0, "malformed": 0}
    assert ref["truncated"] == {"retry_succeeded": 0, "exhausted": 0}
    assert ref["edge_budget_exhausted_chunks"] == 0
    assert ref["tokens"] == {"input": 1400, "output": 270}
    assert ref["requests"] == 4
    assert (ref["provider"], ref["model"]) == ("anthropic", "claude-ref")
    assert ref["cost_usd"] is None  # no price for claude-ref
    assert ref["vocabulary_compliance"] == {
        "entities_outside": 0,
        "entities_total": 3,
        "edges_outside": 0,
        "edges_total": 2,
        "outside_rate": 0.0,
    }

    json.dumps(report, allow_nan=False)


@pytest.mark.parametrize("mode", ["freeform", "open"])
def test_vocabulary_compliance_only_in_strict_mode(mode: str) -> None:
    report = report_for(mode)
    assert report["ontology_mode"] == mode
    for summary in report["backends"].values():
        assert "vocabulary_compliance" not in summary


def test_no_vocabulary_compliance_without_ontology() -> None:
    summary = backend_summary(
        "cand",
        "spec",
        candidate_table(),
        ontology=None,
        mode="strict",
        prices=None,
    )
    assert "vocabulary_compliance" not in summary


def test_cost_without_prices_is_none() -> None:
    report = report_for("open", prices=None)
    assert report["backends"]["cand"]["cost_usd"] is None
    assert report["backends"]["ref"]["cost_usd"] is None


def test_cost_with_prices_for_both_models() -> None:
    prices = {**PRICES, "claude-ref": {"input_per_1m": 3.0, "output_per_1m": 15.0}}
    report = report_for("open", prices=prices)
    assert report["backends"]["cand"]["cost_usd"] == pytest.approx(0.014)
    assert report["backends"]["ref"]["cost_usd"] == pytest.approx(
        1400 * 3.0 / 1e6 + 270 * 15.0 / 1e6
    )


def test_all_failed_backend_has_no_nan() -> None:
    table = runs_to_table([failed_run("c1", "ExtractionFailed"), failed_run("c2", "Timeout")])
    report = mode_report(
        mode="strict",
        reference="ref",
        specs={"ref": "r", "dead": "d"},
        tables={"ref": reference_table(), "dead": table},
        ontology=ONTOLOGY,
        corpus={"digest": "x", "weird": float("nan")},
        judge=JUDGE,
    )
    dead = report["backends"]["dead"]
    assert dead["error_rate"] == 1.0
    assert dead["errors_by_type"] == {"ExtractionFailed": 1, "Timeout": 1}
    assert dead["latency_ms"] == {"p50": None, "p90": None, "p99": None}
    assert dead["provider"] is None and dead["model"] is None
    assert dead["strict"]["entities"]["f1"] == 0.0
    assert dead["vocabulary_compliance"]["outside_rate"] is None
    assert report["corpus"]["weird"] is None
    json.dumps(report, allow_nan=False)
    metrics = float_metrics(report)
    assert "dead/latency_ms_p50" not in metrics
    assert "dead/vocabulary_outside_rate" not in metrics
    assert all(not math.isnan(v) for v in metrics.values())


def test_empty_table_error_rate_is_none() -> None:
    empty = runs_to_table([])
    summary = backend_summary("e", "s", empty, ontology=None, mode="open", prices=None)
    assert summary["chunks"] == 0
    assert summary["error_rate"] is None
    assert summary["requests"] == 0
    strict = score_keys(table_keys(empty), table_keys(reference_table())).to_dict()
    assert strict["entities"]["fn"] == 3


def test_float_metrics() -> None:
    metrics = float_metrics(report_for("strict"))
    assert all(isinstance(v, float) for v in metrics.values())
    assert metrics["cand/entities_f1"] == pytest.approx(2 / 3)
    assert metrics["cand/edges_f1"] == pytest.approx(0.5)
    assert metrics["cand/summaries_f1"] == pytest.approx(0.5)
    assert metrics["cand/error_rate"] == pytest.approx(1 / 3)
    assert metrics["cand/latency_ms_p50"] == pytest.approx(200.0)
    assert metrics["cand/latency_ms_p90"] == pytest.approx(280.0)
    assert metrics["cand/latency_ms_p99"] == pytest.approx(298.0)
    assert metrics["cand/input_tokens"] == 3500.0
    assert metrics["cand/output_tokens"] == 700.0
    assert metrics["cand/requests"] == 6.0
    assert metrics["cand/clean"] == 3.0
    assert metrics["cand/recovered"] == 1.0
    assert metrics["cand/malformed"] == 1.0
    assert metrics["cand/retry_succeeded"] == 1.0
    assert metrics["cand/edge_budget_exhausted_chunks"] == 1.0
    assert metrics["cand/cost_usd"] == pytest.approx(0.014)
    assert metrics["cand/vocabulary_outside_rate"] == pytest.approx(0.5)
    # the reference has no strict scores and no price
    assert "ref/entities_f1" not in metrics
    assert "ref/cost_usd" not in metrics
    assert metrics["ref/error_rate"] == pytest.approx(1 / 3)


def test_mode_matrix() -> None:
    reports = {m: report_for(m) for m in ("strict", "freeform", "open")}
    matrix = mode_matrix(reports)
    assert matrix["modes"] == ["freeform", "open", "strict"]
    assert list(matrix["reports"]) == ["freeform", "open", "strict"]
    assert matrix["reports"]["open"] == reports["open"]
    cand = matrix["matrix"]["cand"]
    assert list(cand) == ["freeform", "open", "strict"]
    assert cand["strict"] == {
        "entities_f1": pytest.approx(2 / 3),
        "types_f1": pytest.approx(1 / 3),
        "edges_f1": pytest.approx(0.5),
        "summaries_f1": pytest.approx(0.5),
        "error_rate": pytest.approx(1 / 3),
        "vocabulary_outside_rate": pytest.approx(0.5),
    }
    assert cand["open"]["vocabulary_outside_rate"] is None
    assert matrix["matrix"]["ref"]["open"]["edges_f1"] is None
    json.dumps(matrix, allow_nan=False)


def test_mode_matrix_backend_absent_from_a_mode() -> None:
    only_ref = mode_report(
        mode="open",
        reference="ref",
        specs=SPECS,
        tables={"ref": reference_table()},
        ontology=None,
        corpus=CORPUS,
        judge=JUDGE,
    )
    matrix = mode_matrix({"open": only_ref, "strict": report_for("strict")})
    assert matrix["modes"] == ["open", "strict"]
    assert list(matrix["matrix"]["cand"]) == ["strict"]
    assert "n/a" in render_mode_matrix(matrix)


def test_markdown_mode_report() -> None:
    md = render_mode_report(report_for("strict"))
    assert md.startswith("# Extraction eval — ontology mode `strict`\n")
    assert "Reference backend: `ref`" in md
    assert "sha256:abc123" in md
    assert "LLM-as-judge: skipped — ANTHROPIC_API_KEY is not set" in md
    assert "agreement with the reference `ref` (exact strings" in md
    assert "not correctness" in md
    assert "| Entities F1 | Typed entities P | Typed entities R | Typed entities F1 |" in md
    row = "| cand | 0.667 | 0.667 | 0.667 | 0.333 | 0.333 | 0.333 | 0.500 | 0.500 | 0.500 |"
    assert row + " 0.500 | 0.500 | 0.500 |" in md
    assert "33.3%" in md
    assert "truncated: `cand`" in md
    assert "`ExtractionFailed` × 1" in md
    assert "## Vocabulary compliance" in md
    assert "| cand | 2 / 4 | 1 / 2 | 50.0% |" in md
    assert "| cand | 200.0 | 280.0 | 298.0 |" in md
    assert "| cand | openai_compat | m-small | 6 | 3,500 | 700 | $0.0140 |" in md
    assert "- Scores are agreement with ref." in md
    assert md.endswith("\n") and not md.endswith("\n\n")


def test_markdown_omits_zero_truncation_and_nonstrict_vocabulary() -> None:
    md = render_mode_report(report_for("open", cand=candidate_table(truncated=False)))
    assert "truncated:" not in md
    assert "Vocabulary compliance" not in md
    assert "LLM-as-judge: skipped — ANTHROPIC_API_KEY is not set" in md


def test_markdown_missing_strict_block_is_not_labelled_reference() -> None:
    report = report_for("open")
    report["backends"]["cand"]["strict"] = None
    md = render_mode_report(report)
    assert "| cand | — | — | — | — | — | — | — | — | — | — | — |" in md
    assert "| ref | (reference) |" in md


def test_markdown_judge_ran() -> None:
    report = report_for("open")
    report["judge"] = {"status": "ran"}
    assert "- LLM-as-judge: ran\n" in render_mode_report(report)


def test_markdown_mode_matrix() -> None:
    matrix = mode_matrix({m: report_for(m) for m in ("freeform", "open", "strict")})
    md = render_mode_matrix(matrix)
    assert md.startswith("# Extraction eval — ontology mode matrix\n")
    assert "not correctness" in md
    assert "LLM-as-judge: skipped — ANTHROPIC_API_KEY is not set" in md
    assert "| Backend | freeform | open | strict |" in md
    assert "| cand | 0.500 | 0.500 | 0.500 |" in md  # edge F1 row
    assert "| ref | (reference) | (reference) | (reference) |" in md  # not an F1 of —
    assert "## Vocabulary outside rate (strict mode)" in md
    assert "| cand | — | — | 50.0% |" in md


def test_plot_writes_deterministic_png(tmp_path: Path) -> None:
    matrix = mode_matrix({m: report_for(m) for m in ("freeform", "open", "strict")})
    path = plot_f1_by_mode(matrix, tmp_path / "plots" / "f1.png")
    assert path == tmp_path / "plots" / "f1.png"
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    again = plot_f1_by_mode(matrix, tmp_path / "again.png")
    assert again.read_bytes() == data
    assert b"Software" not in data
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["f1.png"]  # no temp left


def test_write_report_files(tmp_path: Path) -> None:
    report = report_for("strict")
    md = render_mode_report(report)
    json_path, md_path = write_report_files(report, md, tmp_path / "out", "strict")
    assert (json_path, md_path) == (
        tmp_path / "out" / "strict.json",
        tmp_path / "out" / "strict.md",
    )
    text = json_path.read_text(encoding="utf-8")
    assert text.endswith("}\n")
    assert json.loads(text) == report
    assert text == json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert "NaN" not in text
    assert md_path.read_text(encoding="utf-8") == md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["strict.json", "strict.md"]


def test_write_report_files_rejects_nan(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_report_files({"x": float("nan")}, "", tmp_path, "bad")
    assert list(tmp_path.iterdir()) == []


def test_an_oracle_reference_is_called_labels_not_another_backend() -> None:
    """The shipped run's reference is the oracle: its scores are against hand-written labels.
    The note names the reference as configured: it had said `oracle` whatever its name."""
    report = report_for("strict")
    report["backends"]["ref"]["spec"] = "oracle"
    md = render_mode_report(report)
    assert "hand-written expected graphs" in md and "another backend" not in md
    assert "agreement with the reference `ref`, the oracle" in md
    reports = {m: report_for(m) for m in ("freeform", "open", "strict")}
    for each in reports.values():
        each["backends"]["ref"]["spec"] = "oracle"
    assert "hand-written expected graphs" in render_mode_matrix(mode_matrix(reports))
    reports["open"]["backends"]["ref"]["spec"] = "cassette:path=ref.jsonl"  # one is recorded
    matrix = render_mode_matrix(mode_matrix(reports))
    assert "agreement with the reference `ref` (exact strings" in matrix
    assert "another backend's output, not ground truth" in matrix


def test_a_report_stored_before_the_types_axis_still_renders() -> None:
    """Dagster may re-materialise the matrix over mode reports written by an older version."""
    old = report_for("strict")
    del old["backends"]["cand"]["strict"]["types"]
    matrix = mode_matrix({"strict": old})
    assert matrix["matrix"]["cand"]["strict"]["types_f1"] is None
    assert "| cand | — |" in render_mode_matrix(matrix).split("## Typed entity F1")[1]
    assert "| cand | 0.667 | 0.667 | 0.667 | — | — | — | 0.500 |" in render_mode_report(old)


def test_the_strict_table_has_a_column_group_per_scored_axis() -> None:
    from evals_pipeline.core.reports.markdown import STRICT_AXES
    from evals_pipeline.core.scoring.strict import AXES

    assert list(STRICT_AXES) == list(AXES)


def test_vocabulary_compliance_of_an_ontology_of_relations_only_counts_edges() -> None:
    """No entity types: the prompt lets the model type entities freely, so they are neither
    outside nor in the total (all four had been outside, an outside rate of 5/6)."""
    from evals_pipeline.core.ontology import Ontology, RelationType

    relations_only = Ontology(relation_types=(RelationType(name="WORKS_FOR"),))
    summary = backend_summary(
        "cand", "spec", candidate_table(), ontology=relations_only, mode="strict", prices=None
    )
    vocabulary = summary["vocabulary_compliance"]
    assert (vocabulary["entities_outside"], vocabulary["entities_total"]) == (0, 0)
    assert vocabulary["edges_total"] == 2
    assert vocabulary["outside_rate"] == vocabulary["edges_outside"] / 2


def test_a_backend_whose_every_chunk_failed_is_priced_at_its_model() -> None:
    """Its tokens were summed, but the model had been read from successful chunks only: a
    backend that spent $6 and failed every chunk (truncation exhausted) reported no cost."""
    from evals_pipeline.core.errors import ExtractionFailed
    from evals_pipeline.core.extractors.base import Extractor
    from evals_pipeline.core.options import ExtractOptions
    from evals_pipeline.core.tables import extraction_table

    class Truncating(Extractor):
        provider, model = "anthropic", "claude-x"

        async def extract(self, episode: Episode, options: ExtractOptions) -> Any:
            spent = CallStats(requests=3, input_tokens=500_000, output_tokens=100_000)
            raise ExtractionFailed("truncated past every retry", None, spent)

        async def classify_entities(self, *args: Any) -> Any:
            raise NotImplementedError

        async def classify_relations(self, *args: Any) -> Any:
            raise NotImplementedError

        async def aclose(self) -> None:
            return None

    episodes = [Episode(name=f"c{i}", body="text") for i in (1, 2)]
    table = extraction_table(Truncating(), episodes, ExtractOptions.for_mode("open", ONTOLOGY))
    prices = {"claude-x": {"input_per_1m": 3.0, "output_per_1m": 15.0}}
    summary = backend_summary("dead", "s", table, ontology=None, mode="open", prices=prices)
    assert summary["errors"] == 2 and summary["tokens"] == {"input": 1_000_000, "output": 200_000}
    assert (summary["provider"], summary["model"]) == ("anthropic", "claude-x")
    assert summary["cost_usd"] == pytest.approx(6.0)


def test_a_mode_report_says_what_each_backend_is_and_what_its_figures_are() -> None:
    """The rule responders' recorded figures had read as a model's of this run: the report names
    each backend's spec, says a replay's latency and usage are the recorded calls', and that the
    oracle sends nothing; freeform types are the backends' own."""
    report = report_for("freeform")
    report["backends"]["ref"]["spec"] = "oracle"
    report["backends"]["cand"]["spec"] = "cassette:path=cand.jsonl"
    md = render_mode_report(report)
    assert "- Backends: `cand` `cassette:path=cand.jsonl`, `ref` `oracle`" in md
    assert "- `cand`: replayed; the latency is of the recorded calls" in md
    assert "- `ref`: the oracle makes no call" in md
    assert "- `cand`: replayed; provider, model, requests and tokens are the recorded calls'" in md
    assert "- `ref`: the oracle sends no request" in md
    assert "In freeform mode the types are each backend's own" in md
    assert "In freeform mode" not in render_mode_report(report_for("strict"))


def test_a_replay_that_missed_every_chunk_names_no_placeholder_model(tmp_path: Path) -> None:
    """A failed row names the extractor's model only where calls were paid for: a stale replay
    had shown provider and model `cassette`, beside the note that they are the recorded calls'."""
    from evals_pipeline.core.cassettes.replay import ReplayingExtractor
    from evals_pipeline.core.options import ExtractOptions
    from evals_pipeline.core.tables import extraction_table

    empty = tmp_path / "empty.jsonl"
    empty.touch()
    episodes = [Episode(name="c1", body="text")]
    table = extraction_table(
        ReplayingExtractor.from_path(empty),
        episodes,
        ExtractOptions.for_mode("open", ONTOLOGY),
        tolerate_misses=True,
    )
    summary = backend_summary(
        "s", "cassette:path=x", table, ontology=None, mode="open", prices=None
    )
    assert summary["errors"] == 1
    assert (summary["provider"], summary["model"]) == (None, None)
