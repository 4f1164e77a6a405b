from collections.abc import Sequence

import pandas as pd
import pytest

from evals_pipeline.core.models import (
    CallStats,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
)
from evals_pipeline.core.runner import ChunkRun
from evals_pipeline.core.scoring.strict import (
    PRF,
    StrictScores,
    chunk_keys,
    compare,
    normalize,
    score_against_reference,
    score_keys,
    table_keys,
)
from evals_pipeline.core.tables import runs_to_table, table_results


def graph(
    entities: Sequence[str | tuple[str, str]] = (),
    edges: Sequence[tuple[str, str, str]] = (),
) -> ExtractionResult:
    """Entities as "name" or (name, summary); edges as (source, relation, target)."""
    ents = [
        Entity(name=e) if isinstance(e, str) else Entity(name=e[0], summary=e[1]) for e in entities
    ]
    return ExtractionResult(
        entities=tuple(ents),
        edges=tuple(Edge(source=s, relation=r, target=t) for s, r, t in edges),
    )


def test_normalize_casefolds_and_collapses_whitespace() -> None:
    assert normalize("  Alice \t  SMITH\n") == "alice smith"
    assert normalize("Straße") == "strasse"
    assert normalize("") == ""


def test_prf_numbers() -> None:
    prf = PRF(tp=2, fp=1, fn=3)
    assert prf.precision == pytest.approx(2 / 3)
    assert prf.recall == pytest.approx(2 / 5)
    assert prf.f1 == pytest.approx(2 * (2 / 3) * (2 / 5) / (2 / 3 + 2 / 5))
    assert prf.to_dict() == {
        "precision": prf.precision,
        "recall": prf.recall,
        "f1": prf.f1,
        "tp": 2,
        "fp": 1,
        "fn": 3,
    }
    assert PRF(1, 2, 3) + PRF(10, 20, 30) == PRF(11, 22, 33)


def test_prf_zero_denominators() -> None:
    nothing_predicted = PRF(tp=0, fp=0, fn=4)
    assert (nothing_predicted.precision, nothing_predicted.recall, nothing_predicted.f1) == (
        0.0,
        0.0,
        0.0,
    )
    all_wrong = PRF(tp=0, fp=3, fn=0)
    assert (all_wrong.precision, all_wrong.recall, all_wrong.f1) == (0.0, 0.0, 0.0)


def test_empty_versus_empty_is_full_agreement() -> None:
    prf = PRF(0, 0, 0)
    assert (prf.precision, prf.recall, prf.f1) == (1.0, 1.0, 1.0)
    scores = compare(ExtractionResult(), ExtractionResult())
    assert all(p == PRF(0, 0, 0) and p.f1 == 1.0 for p in scores.values())


def test_case_and_whitespace_differences_still_match() -> None:
    ref = graph(
        [("Alice Smith", "An engineer."), ("Acme Corp", "")],
        [("Alice Smith", "WORKS_FOR", "Acme Corp")],
    )
    cand = graph(
        [("  alice   SMITH", "an  ENGINEER."), ("ACME corp", "")],
        [("alice smith ", "works_for", "  acme   corp")],
    )
    scores = compare(cand, ref)
    assert scores["entities"] == PRF(2, 0, 0)
    assert scores["edges"] == PRF(1, 0, 0)
    # Acme has no summary on either side: it is not a summary item.
    assert scores["summaries"] == PRF(1, 0, 0)


def test_reversed_edge_does_not_match() -> None:
    ref = graph(["A", "B"], [("A", "KNOWS", "B")])
    cand = graph(["A", "B"], [("B", "KNOWS", "A")])
    assert compare(cand, ref)["edges"] == PRF(tp=0, fp=1, fn=1)


def test_different_relation_or_summary_does_not_match() -> None:
    ref = graph([("A", "a person")], [("A", "KNOWS", "B")])
    cand = graph([("A", "a different person")], [("A", "LIKES", "B")])
    scores = compare(cand, ref)
    assert scores["entities"] == PRF(1, 0, 0)
    assert scores["edges"] == PRF(0, 1, 1)
    assert scores["summaries"] == PRF(0, 1, 1)


def test_types_axis_needs_name_and_type_to_agree() -> None:
    """A name with the wrong type still counts on the entity axis, not on the typed one: a
    prompt or ontology-mode change that breaks typing shows there."""

    def typed(*pairs: tuple[str, str | None]) -> ExtractionResult:
        return ExtractionResult(entities=tuple(Entity(name=n, type=t) for n, t in pairs))

    ref = typed(("London", "City"), ("Ada", "Person"), ("Babbage", "Person"))
    cand = typed(("london", " city "), ("Ada", "Organization"), ("Babbage", None))
    scores = compare(cand, ref)
    assert scores["entities"] == PRF(tp=3, fp=0, fn=0)
    assert scores["types"] == PRF(tp=1, fp=2, fn=2)  # types normalised like names


def test_duplicates_are_a_multiset_matched_one_to_one() -> None:
    ref = graph(["A", "A", "B"], [("A", "R", "B")])
    cand = graph(["a", "a", "a", "C"], [("A", "R", "B"), ("A", "R", "B")])
    scores = compare(cand, ref)
    # Two of the three "a"s match the reference's two; the third and C are extra; B is missed.
    assert scores["entities"] == PRF(tp=2, fp=2, fn=1)
    assert scores["edges"] == PRF(tp=1, fp=1, fn=0)


def test_failed_candidate_chunk_misses_everything() -> None:
    ref = graph([("A", "s"), "B"], [("A", "R", "B")])
    scores = compare(None, ref)
    assert scores == {
        "entities": PRF(0, 0, 2),
        "types": PRF(0, 0, 2),
        "edges": PRF(0, 0, 1),
        "summaries": PRF(0, 0, 1),
    }
    assert scores["entities"].precision == 0.0
    assert scores["entities"].f1 == 0.0


def test_score_against_reference_pools_and_skips() -> None:
    reference = {
        "c1": graph(["A", "B"], [("A", "R", "B")]),
        "c2": graph(["C"]),
        "c3": None,  # the reference failed: nothing to compare against
        "c4": graph(["D", "E"]),
    }
    candidate = {
        "c1": graph(["a", "b", "x"], [("B", "R", "A")]),
        "c2": None,  # the candidate failed
        "c3": graph(["Z"]),
        # c4 is missing from the candidate: counted as failed
        "c5": graph(["only-candidate"]),  # outside the reference's scope: ignored
    }
    scores = score_against_reference(candidate, reference)
    assert scores == StrictScores(
        entities=PRF(tp=2, fp=1, fn=3),
        types=PRF(tp=2, fp=1, fn=3),  # untyped on both sides: the types agree
        edges=PRF(tp=0, fp=1, fn=1),
        summaries=PRF(0, 0, 0),
        chunks_compared=3,
        skipped_chunks=1,
    )
    assert scores.entities.precision == pytest.approx(2 / 3)
    assert scores.entities.recall == pytest.approx(2 / 5)
    assert scores.entities.f1 == pytest.approx(0.5)
    d = scores.to_dict()
    assert d["chunks_compared"] == 3
    assert d["skipped_chunks"] == 1
    assert d["entities"]["tp"] == 2
    assert d["edges"] == PRF(0, 1, 1).to_dict()
    assert d["summaries"]["f1"] == 1.0


def test_score_against_self_is_perfect() -> None:
    results = {"c1": graph([("A", "s")], [("A", "R", "B")]), "c2": graph(["C"])}
    scores = score_against_reference(results, results)
    assert scores.entities.f1 == scores.edges.f1 == scores.summaries.f1 == 1.0
    assert scores.chunks_compared == 2
    assert scores.skipped_chunks == 0


def _table(results: dict[str, ExtractionResult | None]) -> pd.DataFrame:
    runs = [
        ChunkRun(
            Episode(name=chunk, body="text"),
            None
            if result is None
            else ExtractionOutcome(
                result=result, stats=CallStats(), transcript=(), provider="p", model="m"
            ),
            error=None if result is not None else "failed",
        )
        for chunk, result in results.items()
    ]
    return runs_to_table(runs)


def test_table_keys_score_as_the_models_do() -> None:
    """Scoring a table from its JSON columns equals scoring the models it round-trips to."""
    odd = Entity(name="  Zoë\u2028 ÅNGSTRÖM ", summary="naïve\t\tsummary 😀", properties={"x": 1.5})
    reference = {
        "c1": graph([("Alice", "An engineer"), "Acme", "acme"], [("Alice", "WORKS_FOR", "Acme")]),
        "c2": ExtractionResult(
            entities=(odd,), edges=(Edge(source="Zoë", relation="r", target="x"),)
        ),
        "c3": None,
        "c4": graph(),
    }
    candidate = {
        "c1": graph(["alice", "ACME", "Bob"], [("acme", "WORKS_FOR", "alice")]),
        "c2": ExtractionResult(entities=(odd, odd), edges=()),
        "c4": None,
        "c5": graph(["only here"]),
    }
    ref_table, cand_table = _table(reference), _table(candidate)
    from_tables = score_keys(table_keys(cand_table), table_keys(ref_table))
    from_models = score_against_reference(table_results(cand_table), table_results(ref_table))
    assert from_tables == from_models == score_against_reference(candidate, reference)
    assert from_tables.chunks_compared == 3 and from_tables.skipped_chunks == 1
    keys = table_keys(ref_table)
    assert keys["c3"] is None
    assert keys["c2"] == chunk_keys(reference["c2"])  # type: ignore[arg-type]


def test_normalize_is_remembered_without_changing_results() -> None:
    normalize.cache_clear()
    assert normalize(" A  b ") == normalize(" A  b ") == "a b"
    assert normalize.cache_info().hits >= 1


def test_no_chunk_compared_has_no_score_rather_than_a_perfect_one() -> None:
    # The reference failed on every chunk: agreeing on "nothing" over zero chunks measured
    # nothing, and the report had shown 1.000.
    scores = score_keys({"c": None}, {"c": None}).to_dict()
    assert scores["chunks_compared"] == 0 and scores["skipped_chunks"] == 1
    for axis in ("entities", "edges", "summaries"):
        assert scores[axis]["f1"] is None and scores[axis]["precision"] is None
    compared = score_keys({"c": None}, {"c": chunk_keys(graph())}).to_dict()
    assert compared["entities"]["f1"] == 1.0  # one chunk, both empty: agreement


def test_a_score_with_nothing_to_divide_is_undefined_not_zero() -> None:
    """A backend that wrote no summaries had shown summaries precision 0.000, a measured zero;
    the bench shows — there. F1 stays 0.0 (nothing agreed), and agreeing on nothing is 1.0."""
    produced_nothing = PRF(tp=0, fp=0, fn=3).to_dict()
    assert produced_nothing["precision"] is None
    assert (produced_nothing["recall"], produced_nothing["f1"]) == (0.0, 0.0)
    expected_nothing = PRF(tp=0, fp=2, fn=0).to_dict()
    assert expected_nothing["recall"] is None
    assert (expected_nothing["precision"], expected_nothing["f1"]) == (0.0, 0.0)
    assert PRF().to_dict()["precision"] == PRF().to_dict()["recall"] == 1.0
