"""A prose run's per-chunk counts (`<mode>/episodes.json`) and `compare` reading two of them."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from evals_pipeline.core.compare import (
    ComparisonRefused,
    RunReportError,
    compare_runs,
    render_comparison,
    verdict,
)
from evals_pipeline.core.models import Edge, Entity, Episode, ExtractionResult
from evals_pipeline.core.reports.episodes import DIGEST_SCHEME, chunk_digest, compare_tables
from evals_pipeline.core.scoring.strict import chunk_keys, score_keys, table_keys
from evals_pipeline.core.tables import runs_to_table

from .test_report import candidate_table, failed_run, ok_run, reference_table, stats

EPISODES = {name: Episode(name=name, body=f"text of {name}") for name in ("c1", "c2", "c3")}


def _compare(tables: dict[str, pd.DataFrame], **episodes: Episode) -> tuple[Any, Any]:
    return compare_tables(
        tables,
        "ref",
        mode="strict",
        corpus_digest="abc",
        episodes={**EPISODES, **episodes},
    )


def test_the_per_chunk_counts_pool_to_the_reports_strict_scores() -> None:
    tables = {"ref": reference_table(), "cand": candidate_table()}
    strict, run = _compare(tables)
    pooled = score_keys(table_keys(tables["cand"]), table_keys(tables["ref"])).to_dict()
    assert strict == {"cand": pooled}
    assert (run["kind"], run["ontology_mode"], run["reference"]) == ("prose", "strict", "ref")
    episodes = run["rows"]["cand"]["episodes"]
    assert [e["case"] for e in episodes] == ["c1", "c2"]  # c3: the reference failed on it
    for axis in ("entities", "types", "edges", "summaries"):
        tp = sum(e["counts"][f"{axis}_tp"] for e in episodes)
        produced = sum(e["counts"][f"{axis}_produced"] for e in episodes)
        expected = sum(e["counts"][f"{axis}_expected"] for e in episodes)
        assert (tp, produced - tp, expected - tp) == (
            pooled[axis]["tp"],
            pooled[axis]["fp"],
            pooled[axis]["fn"],
        )
    failed = episodes[1]  # the candidate failed c2: nothing produced, everything expected
    assert failed["status"] == "error"
    assert failed["counts"]["entities_produced"] == 0
    assert failed["counts"]["entities_expected"] == 1
    assert (failed["counts"]["tokens"], failed["counts"]["requests"]) == (600, 1)
    assert episodes[0]["counts"]["tokens"] == 1200 and episodes[0]["status"] == "ok"


def test_a_chunk_pairs_only_while_its_text_and_its_reference_are_unchanged() -> None:
    keys = chunk_keys(ExtractionResult(entities=(Entity(name="Alice"),)))
    other = chunk_keys(ExtractionResult(entities=(Entity(name="Alicia"),)))
    episode = EPISODES["c1"]
    edited = Episode(name="c1", body="text of c1, edited")
    assert chunk_digest(episode, keys) == chunk_digest(
        episode, chunk_keys(ExtractionResult(entities=(Entity(name="Alice"),)))
    )
    assert chunk_digest(edited, keys) != chunk_digest(episode, keys)
    assert chunk_digest(episode, other) != chunk_digest(episode, keys)
    _strict, run = _compare({"ref": reference_table(), "cand": candidate_table()})
    _strict, changed = _compare(
        {"ref": reference_table(), "cand": candidate_table()}, c2=Episode(name="c2", body="new")
    )
    result = compare_runs(run, changed, resamples=50)
    assert result["paired"] == 1
    assert [u["case"] for u in result["unpaired"]["case_changed"]] == ["c2"]


def test_a_chunk_the_corpus_no_longer_holds_has_no_digest() -> None:
    tables = {"ref": reference_table(), "cand": candidate_table()}
    _strict, run = compare_tables(
        tables, "ref", mode="strict", corpus_digest="abc", episodes={"c1": EPISODES["c1"]}
    )
    by_case = {e["case"]: e for e in run["rows"]["cand"]["episodes"]}
    assert "case_digest" in by_case["c1"] and "case_digest" not in by_case["c2"]


def _table(graphs: dict[str, ExtractionResult]) -> pd.DataFrame:
    return runs_to_table(
        [
            ok_run(name, graph, stats(requests=2, input_tokens=100), provider="p", model="m")
            for name, graph in graphs.items()
        ]
    )


def test_compare_says_a_prose_backend_got_worse_between_two_runs() -> None:
    """What a prompt change is checked for: the same backend, the same chunks and reference,
    before and after. The mode report pools chunks and could only rank backends in one run."""
    names = [f"c{i:02d}" for i in range(30)]
    gold = {
        n: ExtractionResult(
            entities=(Entity(name=f"A{n}", type="Person"), Entity(name=f"B{n}", type="Place")),
            edges=(Edge(source=f"A{n}", relation="LIVES_IN", target=f"B{n}"),),
        )
        for n in names
    }
    lost_edges = {n: ExtractionResult(entities=g.entities) for n, g in gold.items()}
    episodes = {n: Episode(name=n, body=f"A{n} lives in B{n}.") for n in names}

    def run(candidate: dict[str, ExtractionResult]) -> dict[str, Any]:
        tables = {"ref": _table(gold), "model": _table(candidate)}
        return compare_tables(tables, "ref", mode="open", corpus_digest="d", episodes=episodes)[1]

    result = compare_runs(run(gold), run(lost_edges), resamples=500)
    verdicts = {r["rate"]: verdict(r) for r in result["rates"]}
    assert result["paired"] == 30
    assert verdicts["edge_recall"] == "B worse"
    assert verdicts["entity_recall"] == "no change"
    assert verdicts["typed_entity_precision"] == "no change"
    assert verdicts["edge_precision"] == "undefined in a run"  # B produced no edge at all


def test_two_runs_against_different_references_are_refused_saying_so() -> None:
    """Nothing pairs across two references' keys; the refusal had said only that the case
    content changed, which sends one looking at the corpus."""
    _strict, run = _compare({"ref": reference_table(), "cand": candidate_table()})
    other = _table({"c1": ExtractionResult(entities=(Entity(name="Alicia"),))})
    _strict, against_other = compare_tables(
        {"model-ref": other, "cand": candidate_table()},
        "model-ref",
        mode="strict",
        corpus_digest="abc",
        episodes=EPISODES,
    )
    with pytest.raises(ComparisonRefused, match=r"references differ \(ref vs model-ref\)"):
        compare_runs(run, against_other, resamples=20)
    assert run["case_digest_scheme"] == DIGEST_SCHEME


def test_a_note_names_different_references_whose_keys_agree() -> None:
    _strict, run = _compare({"ref": reference_table(), "cand": candidate_table()})
    renamed = {**run, "reference": "ref-copy"}  # another backend that extracted the same
    result = compare_runs(run, renamed, resamples=20)
    assert result["paired"] == 2 and result["b"]["reference"] == "ref-copy"
    assert any("references differ (ref vs ref-copy)" in n for n in result["notes"])
    assert "against reference `ref-copy`" in render_comparison(result)


def test_runs_with_nothing_to_compare_say_why() -> None:
    """A reference-only run, and one whose reference failed every chunk, had been refused as
    "'rows' must be a non-empty object" and "the runs measure different episodes"."""
    _strict, alone = _compare({"ref": reference_table()})
    _strict, run = _compare({"ref": reference_table(), "cand": candidate_table()})
    with pytest.raises(RunReportError, match="no candidate backend beside its reference 'ref'"):
        compare_runs(run, alone, resamples=20)
    failed = runs_to_table([failed_run(c, "CassetteMiss") for c in EPISODES])
    _strict, nothing = _compare({"ref": failed, "cand": candidate_table()})
    assert nothing["rows"]["cand"]["episodes"] == []
    with pytest.raises(ComparisonRefused, match=r"run B holds no episode in row 'cand'"):
        compare_runs(run, nothing, resamples=20)


def test_a_new_digest_scheme_is_named_where_nothing_pairs() -> None:
    _strict, run = _compare({"ref": reference_table(), "cand": candidate_table()})
    rehashed = {
        **run,
        "case_digest_scheme": "prose-2",
        "rows": {
            "cand": {
                "episodes": [
                    {**e, "case_digest": "x" + e["case_digest"][1:]}
                    for e in run["rows"]["cand"]["episodes"]
                ]
            }
        },
    }
    with pytest.raises(
        ComparisonRefused, match=r"case digest schemes differ \(prose-1 vs prose-2\)"
    ):
        compare_runs(run, rehashed, resamples=20)


def test_pairs_made_by_name_across_references_are_not_said_to_agree() -> None:
    """With pair_by_name, chunks without digests pair whatever their yardstick: the note had
    said their digests agreed."""
    _strict, run = _compare({"ref": reference_table(), "cand": candidate_table()})
    bare = {
        **run,
        "rows": {
            "cand": {
                "episodes": [
                    {k: v for k, v in e.items() if k != "case_digest"}
                    for e in run["rows"]["cand"]["episodes"]
                ]
            }
        },
    }
    other = {**bare, "reference": "model-ref"}
    result = compare_runs(bare, other, pair_by_name=True, resamples=20)
    [note] = [n for n in result["notes"] if "references differ" in n]
    assert "2 of the pairs are paired by name alone" in note and "agree" not in note


def test_an_empty_row_is_named_on_either_side_and_prose_only_where_it_is() -> None:
    _strict, run = _compare({"ref": reference_table(), "cand": candidate_table()})
    failed = runs_to_table([failed_run(c, "CassetteMiss") for c in EPISODES])
    _strict, nothing = _compare({"ref": failed, "cand": candidate_table()})
    with pytest.raises(ComparisonRefused, match=r"run A holds no episode in row 'cand' \(a prose"):
        compare_runs(nothing, run, resamples=20)
    bench = {"rows": {"m": {"episodes": []}}}
    with pytest.raises(ComparisonRefused, match=r"run A holds no episode in row 'm'$"):
        compare_runs(bench, run, row_b="cand", resamples=20)
