import copy
import json
from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.compare import (
    RATES,
    ComparisonRefused,
    RunReportError,
    compare_runs,
    load_run_report,
    render_comparison,
)
from evals_pipeline.core.errors import EvalsError, InputFileError

D1, D2, D3, D3_NEW, D4, D5 = (f"{c}" * 64 for c in "abcdef")


def ep(
    case: str, sid: str, digest: str | None, *, status: str = "ok", **counts: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"case": case, "source_id": sid, "status": status, "counts": counts}
    if digest is not None:
        out["case_digest"] = digest
    return out


def ents(tp: int, produced: int, expected: int) -> dict[str, Any]:
    return {"entities_tp": tp, "entities_produced": produced, "entities_expected": expected}


def edges(tp: int, produced: int, expected: int) -> dict[str, Any]:
    return {"edges_tp": tp, "edges_produced": produced, "edges_expected": expected}


def report(
    episodes: list[dict[str, Any]], row: str = "model-x", version: str = "1.1.0"
) -> dict[str, Any]:
    return {
        "corpus_version": version,
        "corpus_digest": "0" * 64,
        "split": "dev",
        "rows": {row: {"episodes": episodes}},
    }


def run_a() -> dict[str, Any]:
    return report(
        [
            ep("direction/ships", "ep-1", D1, **ents(3, 4, 3), **edges(1, 2, 2)),
            ep("direction/ships", "ep-2", D1, **ents(2, 2, 3), **edges(1, 1, 2)),
            ep("units/dates", "ep-1", D2, **ents(1, 1, 2), **edges(0, 0, 1)),
            ep("units/dates", "ep-2", D2, status="error", **ents(0, 0, 2), **edges(0, 0, 1)),
            ep("identity/anon", "ep-1", D3, **ents(1, 1, 1), **edges(1, 1, 1)),
            ep("mention/secondary", "ep-1", D4, **ents(1, 1, 1), **edges(1, 1, 1)),
        ]
    )


def run_b() -> dict[str, Any]:
    return report(
        [
            ep("direction/ships", "ep-1", D1, **ents(3, 3, 3), **edges(2, 2, 2)),
            ep("direction/ships", "ep-2", D1, status="error", **ents(0, 0, 3), **edges(0, 0, 2)),
            ep("units/dates", "ep-1", D2, **ents(1, 1, 2), **edges(0, 0, 1)),
            ep("units/dates", "ep-2", D2, **ents(2, 2, 2), **edges(1, 1, 1)),
            ep("identity/anon", "ep-1", D3_NEW, **ents(0, 1, 1), **edges(0, 1, 1)),
            ep("context/thread", "ep-1", D5, **ents(1, 1, 1), **edges(1, 1, 1)),
        ],
        version="1.2.0",
    )


def by_rate(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["rate"]: r for r in result["rates"]}


def test_pairs_on_case_and_source_id_with_matching_digests_and_lists_the_rest() -> None:
    result = compare_runs(run_a(), run_b(), resamples=500)
    assert result["paired"] == 4
    assert result["unpaired"] == {
        "only_a": [{"case": "mention/secondary", "source_id": "ep-1"}],
        "only_b": [{"case": "context/thread", "source_id": "ep-1"}],
        "case_changed": [{"case": "identity/anon", "source_id": "ep-1"}],
        "no_case_digest": [],
    }
    assert result["a"]["row"] == result["b"]["row"] == "model-x"
    assert any("corpus_version differs" in n for n in result["notes"])


def test_rates_rises_falls_and_status_changes_are_counted_exactly() -> None:
    result = compare_runs(run_a(), run_b(), resamples=500)
    rates = by_rate(result)
    # Only rates whose counts the runs carry; the rest are skipped.
    assert list(rates) == ["entity_precision", "entity_recall", "edge_precision", "edge_recall"]
    ep_ = rates["entity_precision"]
    assert ep_["a"] == {"num": 6, "den": 7, "rate": pytest.approx(6 / 7)}
    assert ep_["b"] == {"num": 6, "den": 6, "rate": 1.0}
    assert ep_["delta"] == pytest.approx(1 / 7)
    assert ep_["low"] <= ep_["delta"] <= ep_["high"]
    # Per episode, only where both sides define the rate (denominator > 0).
    assert (ep_["rises"], ep_["falls"]) == (1, 0)
    assert (rates["entity_recall"]["rises"], rates["entity_recall"]["falls"]) == (1, 1)
    assert (rates["edge_precision"]["rises"], rates["edge_precision"]["falls"]) == (1, 0)
    assert (rates["edge_recall"]["rises"], rates["edge_recall"]["falls"]) == (2, 1)
    assert result["status_changes"] == [
        {"from": "error", "to": "ok", "episodes": 1, "changed": True},
        {"from": "ok", "to": "error", "episodes": 1, "changed": True},
        {"from": "ok", "to": "ok", "episodes": 2, "changed": False},
    ]


def test_largest_drops_and_rises_by_entity_and_edge_f1() -> None:
    result = compare_runs(run_a(), run_b(), resamples=200)
    assert result["ranking_metric"] == "entity+edge F1"
    (drop,) = result["largest_drops"]
    assert (drop["case"], drop["source_id"]) == ("direction/ships", "ep-2")
    assert (drop["a"], drop["b"], drop["change"]) == (0.75, 0.0, -0.75)
    assert (drop["status_a"], drop["status_b"]) == ("ok", "error")
    rises = [(r["case"], r["source_id"], r["change"]) for r in result["largest_rises"]]
    assert rises == [
        ("units/dates", "ep-2", 1.0),
        ("direction/ships", "ep-1", pytest.approx(1 - 8 / 11)),
    ]


def test_at_most_five_changes_each_way_ranked_by_first_rate_without_f1_counts() -> None:
    a = report([ep("c", f"e{i}", D1, items_conformant=7, items_emitted=10) for i in range(9)])
    b = report([ep("c", f"e{i}", D1, items_conformant=i, items_emitted=10) for i in range(9)])
    result = compare_runs(a, b, resamples=200)
    assert result["ranking_metric"] == "conformance"
    assert [r["rate"] for r in result["rates"]] == ["conformance"]
    drops = [(d["source_id"], d["change"]) for d in result["largest_drops"]]
    # Seven episodes fell; the five largest are listed, largest first.
    assert drops == [(f"e{i}", pytest.approx(-0.7 + i / 10)) for i in range(5)]
    assert [r["source_id"] for r in result["largest_rises"]] == ["e8"]


def test_changes_are_ranked_by_a_higher_is_better_rate_where_there_is_one() -> None:
    """`ungrounded` comes before `conformance_final` in the table, but a drop in it is a gain."""
    counts = {"items_emitted": 10, "quotes_ungrounded": 1, "final_items_emitted": 10}
    a = report([ep("c", f"e{i}", D1, final_items_conformant=7, **counts) for i in range(3)])
    b = report([ep("c", f"e{i}", D1, final_items_conformant=6 + i, **counts) for i in range(3)])
    result = compare_runs(a, b, resamples=200)
    assert [r["rate"] for r in result["rates"]] == ["ungrounded", "conformance_final"]
    assert result["ranking_metric"] == "conformance_final"
    assert [d["source_id"] for d in result["largest_drops"]] == ["e0"]
    # With lower-is-better rates alone, the heading says which way is better.
    only = {"items_emitted": 10}
    a = report([ep("c", f"e{i}", D1, quotes_ungrounded=1, **only) for i in range(3)])
    b = report([ep("c", f"e{i}", D1, quotes_ungrounded=i, **only) for i in range(3)])
    result = compare_runs(a, b, resamples=200)
    assert result["ranking_metric"] == "ungrounded (lower is better: a drop is a gain)"
    assert "### Largest drops (ungrounded (lower is better" in render_comparison(result)


def test_direction_denominator_sums_two_counts() -> None:
    assert RATES["direction"] == ("edges_matched", "edges_matched+edges_reversed")
    a = report([ep("d", "1", D1, edges_matched=3, edges_reversed=1)])
    b = report([ep("d", "1", D1, edges_matched=4, edges_reversed=0)])
    (rate,) = compare_runs(a, b, resamples=100)["rates"]
    assert (rate["a"]["rate"], rate["b"]["rate"]) == (0.75, 1.0)
    assert rate["a"]["den"] == 4


def test_a_rate_present_in_one_run_only_is_shown_without_a_delta() -> None:
    a = report([ep("d", "1", D1, **ents(1, 1, 1))])
    b = report([ep("d", "1", D1, **ents(1, 1, 1), forbidden_written=1, forbidden_total=2)])
    rates = by_rate(compare_runs(a, b, resamples=100))
    assert rates["forbidden"]["a"] is None
    assert rates["forbidden"]["b"]["rate"] == 0.5
    assert rates["forbidden"]["delta"] is None


def test_a_rate_with_nothing_counted_is_undefined_not_zero() -> None:
    """No reversible edge in run a: its direction rate is undefined (the bench report's "—"),
    and comparing it would report a rise from a 0.0 that was never measured."""
    a = report([ep("d", "1", D1, edges_matched=0, edges_reversed=0)])
    b = report([ep("d", "1", D1, edges_matched=2, edges_reversed=0)])
    result = compare_runs(a, b, resamples=100)
    (rate,) = result["rates"]
    assert (rate["a"]["rate"], rate["b"]["rate"]) == (None, 1.0)
    assert (rate["delta"], rate["low"], rate["high"]) == (None, None, None)
    assert "direction: undefined in run a" in " ".join(result["notes"])
    line = next(x for x in render_comparison(result).splitlines() if x.startswith("| direction"))
    assert "| — | 1.0000 |" in line and "undefined in a run" in line and "0.0000" not in line


def test_a_run_against_itself_shows_no_change() -> None:
    """Its interval is [0, 0]: "cannot tell apart" had read as if the corpus were too small."""
    result = compare_runs(run_a(), run_a(), resamples=300)
    assert result["paired"] == 6
    for rate in result["rates"]:
        assert (rate["delta"], rate["low"], rate["high"]) == (0.0, 0.0, 0.0)
        assert (rate["rises"], rate["falls"]) == (0, 0)
    assert result["largest_drops"] == result["largest_rises"] == []
    text = render_comparison(result)
    assert text.count("| no change |") == len(result["rates"])
    assert {rate["verdict"] for rate in result["rates"]} == {"no change"}


def test_refused_when_no_case_digest_matches() -> None:
    a = report([ep("c", "1", D1, **ents(1, 1, 1)), ep("c", "2", D1, **ents(1, 1, 1))])
    b = report([ep("c", "1", D2, **ents(1, 1, 1)), ep("c", "2", D2, **ents(1, 1, 1))])
    with pytest.raises(ComparisonRefused, match="case content changed") as info:
        compare_runs(a, b)
    assert isinstance(info.value, EvalsError)
    with pytest.raises(ComparisonRefused, match="no episode of run A"):
        compare_runs(a, report([ep("other", "1", D1, **ents(1, 1, 1))]))


def test_reports_without_digests_pair_only_by_name() -> None:
    old = report(
        [ep("c", "1", None, **ents(1, 2, 2)), ep("c", "2", None, **ents(2, 2, 2))],
        version="1.0.0",
    )
    new = report([ep("c", "1", D1, **ents(2, 2, 2)), ep("c", "2", D1, **ents(2, 2, 2))])
    with pytest.raises(ComparisonRefused, match="pair_by_name"):
        compare_runs(old, new)
    result = compare_runs(old, new, pair_by_name=True, resamples=200)
    assert result["paired"] == 2
    assert result["pair_by_name"] is True
    assert by_rate(result)["entity_precision"]["delta"] == pytest.approx(1.0 - 3 / 4)
    # The flag is for a report without digests: where both carry one and they differ, the
    # case changed and is not paired (it had been, with no word).
    changed = report([ep("c", "1", D2, **ents(2, 2, 2)), ep("c", "2", D1, **ents(2, 2, 2))])
    result_changed = compare_runs(new, changed, pair_by_name=True, resamples=50)
    assert result_changed["paired"] == 1
    assert result_changed["unpaired"]["case_changed"] == [{"case": "c", "source_id": "1"}]
    with pytest.raises(ComparisonRefused, match="case content changed"):
        compare_runs(new, report([ep("c", "1", D2, **ents(2, 2, 2))]), pair_by_name=True)
    assert "pair_by_name" in render_comparison(result)


def test_row_selection() -> None:
    two = run_a()
    two["rows"]["oracle"] = {"episodes": [ep("direction/ships", "ep-1", D1, **ents(3, 3, 3))]}
    with pytest.raises(RunReportError, match=r"2 rows \(model-x, oracle\).*row_a"):
        compare_runs(two, run_b())
    with pytest.raises(RunReportError, match=r"no row 'nope' \(rows: model-x, oracle\)"):
        compare_runs(two, run_b(), row_a="nope")
    with pytest.raises(RunReportError, match="row_b"):
        compare_runs(run_b(), two)
    result = compare_runs(two, two, row_a="oracle", row_b="model-x", resamples=50)
    assert (result["a"]["row"], result["b"]["row"], result["paired"]) == ("oracle", "model-x", 1)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("rows"), "'rows'"),
        (lambda r: r["rows"]["model-x"].pop("episodes"), "episodes must be a list"),
        (lambda r: r["rows"]["model-x"]["episodes"][0].pop("case"), r"episodes\[0\].case"),
        (lambda r: r["rows"]["model-x"]["episodes"][1]["counts"].update(edges_tp=-1), "edges_tp"),
        (lambda r: r["rows"]["model-x"]["episodes"][1]["counts"].update(edges_tp=1.5), "integer"),
        # had crashed in numpy with an OverflowError traceback
        (
            lambda r: r["rows"]["model-x"]["episodes"][1]["counts"].update(edges_tp=10**30),
            "edges_tp is 1000000000000000000000000000000: too large to be a count",
        ),
        (  # 1,024 such episodes had summed past int64 into a negative count
            lambda r: r["rows"]["model-x"]["episodes"][1]["counts"].update(tokens=2**53),
            "tokens is 9007199254740992: too large to be a count",
        ),
        # had compared as an edge recall of 33.667
        (
            lambda r: r["rows"]["model-x"]["episodes"][0]["counts"].update(edges_tp=99),
            r"episodes\[0\].counts: edges_tp \(99\) exceeds edges_produced \(2\)",
        ),
        (
            lambda r: r["rows"]["model-x"]["episodes"].append(
                copy.deepcopy(r["rows"]["model-x"]["episodes"][0])
            ),
            "twice",
        ),
    ],
)
def test_malformed_reports_are_rejected(mutate: Any, message: str) -> None:
    bad = run_a()
    mutate(bad)
    with pytest.raises(RunReportError, match=message):
        compare_runs(bad, run_b())


def test_deterministic_with_a_seed() -> None:
    first = compare_runs(run_a(), run_b(), resamples=300, seed=4)
    assert first == compare_runs(run_a(), run_b(), resamples=300, seed=4)
    json.dumps(first)  # JSON-ready


def test_render_has_a_line_per_rate() -> None:
    result = compare_runs(run_a(), run_b(), resamples=300)
    text = render_comparison(result)
    lines = text.splitlines()
    for rate in result["rates"]:
        (line,) = [ln for ln in lines if ln.startswith(f"| {rate['rate']} |")]
        assert f"{rate['a']['rate']:.4f}" in line
        assert f"{rate['delta']:+.4f}" in line
        assert f"[{rate['low']:+.4f}, {rate['high']:+.4f}]" in line
        spans = rate["low"] <= 0 <= rate["high"]
        assert ("cannot tell apart" in line) == spans
    assert "| ok | error | 1 |" in text
    assert "direction/ships ep-2: 0.750 → 0.000 (-0.750) [ok → error]" in text
    assert "### Only in A (1)" in text and "mention/secondary ep-1" in text


def test_load_run_report(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_a()), encoding="utf-8")
    assert load_run_report(path) == run_a()
    path.write_text("{\n  nope", encoding="utf-8")
    with pytest.raises(InputFileError) as info:
        load_run_report(path)
    assert info.value.line == 2


def test_every_rate_a_bench_report_shows_is_compared() -> None:
    """A bench run's report and its comparison read one table of rates."""
    from evals_pipeline.core.bench.metrics import COUNT_NAMES

    counts = dict.fromkeys(COUNT_NAMES, 1)
    a = report([ep("c/x", "ep-1", D1, **counts), ep("c/x", "ep-2", D1, **counts)])
    b = copy.deepcopy(a)
    b["rows"]["model-x"]["episodes"][0]["counts"].update(undeclared_edge=0, tokens=7)
    rates = by_rate(compare_runs(a, b))
    assert set(rates) == set(RATES)
    assert rates["relation_hallucination"]["lower_is_better"]
    hallucinated = rates["relation_hallucination"]
    assert (hallucinated["a"]["rate"], hallucinated["b"]["rate"]) == (1.0, 0.5)
    tokens = rates["tokens_per_episode"]
    assert (tokens["a"]["rate"], tokens["b"]["rate"], tokens["delta"]) == (1.0, 4.0, 3.0)
    assert not rates["mention"]["lower_is_better"]


def test_episodes_that_errored_in_one_run_are_noted_beside_lower_is_better_rates() -> None:
    a = report([ep("c/x", "ep-1", D1, forbidden_written=1, forbidden_total=1)])
    b = report([ep("c/x", "ep-1", D1, status="error", forbidden_written=0, forbidden_total=1)])
    notes = compare_runs(a, b)["notes"]
    assert any(
        n.startswith("1 paired episode(s) ok in the other run are not ok in run b") for n in notes
    )
    assert not any("not ok in run" in n for n in compare_runs(a, a)["notes"])


def test_a_rate_whose_counts_no_one_episode_carries_is_not_computed() -> None:
    """Counts had been pooled from the union over episodes: a numerator carried by one and a
    denominator by another gave a rate, which pooled could exceed 1."""
    split = [
        {"case": "c/x", "source_id": "1", "case_digest": "d", "status": "ok",
         "counts": {"entities_tp": 3}},
        {"case": "c/x", "source_id": "2", "case_digest": "d", "status": "ok",
         "counts": {"entities_produced": 4}},
    ]  # fmt: skip
    result = compare_runs(
        {"rows": {"m": {"episodes": split}}}, {"rows": {"m": {"episodes": split}}}, resamples=10
    )
    assert "entity_precision" not in {r["rate"] for r in result["rates"]}
    lopsided = [
        {"case": "c/x", "source_id": "1", "case_digest": "d", "status": "ok",
         "counts": {"entities_tp": 1, "entities_produced": 1}},
        {"case": "c/x", "source_id": "2", "case_digest": "d", "status": "ok",
         "counts": {"entities_tp": 5}},
    ]  # fmt: skip
    with pytest.raises(
        RunReportError, match=r"run a: pooled entities_tp \(6\) exceeds entities_produced \(1\)"
    ):
        compare_runs(
            {"rows": {"m": {"episodes": lopsided}}},
            {"rows": {"m": {"episodes": split}}},
            resamples=10,
        )


def test_a_prose_mode_report_is_named_as_such_not_as_missing_rows() -> None:
    """The first thing a user compares is two prose reports: the error had said only that
    'rows' must be a non-empty object."""
    prose = {"ontology_mode": "strict", "reference": "oracle", "backends": {"oracle": {}}}
    with pytest.raises(RunReportError, match=r"run a is a prose mode report .* its episodes.json"):
        compare_runs(prose, run_a())
