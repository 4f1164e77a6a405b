"""What a mode report says of judging, from stored verdict tables and pairwise tallies."""

from __future__ import annotations

from typing import Any

import pandas as pd

from evals_pipeline.core.reports.judging import (
    JUDGE_STATUS,
    UNRECORDED_MODEL,
    judging_section,
)

JUDGE = {"status": "ready", "mode": "both", "model": "judge-2", "planned_calls": 12}
TALLIES: dict[str, Any] = {"status": "ran", "model": "judge-2", "pairs": {}}


def verdicts(model: str | None = "judge-2", status: str = "ran") -> pd.DataFrame:
    rows = [
        {"chunk": "c1", "axis": "entities", "tp": 2, "fp": 1, "fn": 0, "error": None},
        {"chunk": "c1", "axis": "edges", "tp": 1, "fp": 0, "fn": 1, "error": None},
    ]
    if model is not None:
        rows = [{**row, "model": model} for row in rows]
    table = pd.DataFrame(rows)
    table.attrs[JUDGE_STATUS] = status
    return table


def section(**tables: pd.DataFrame) -> Any:
    return judging_section(
        mode="open",
        plan_judge=JUDGE,
        reference="oracle",
        verdicts={"oracle": pd.DataFrame(), **tables},
        pairwise_tallies=TALLIES,
    )


def test_judged_scores_per_candidate_and_no_planned_calls_in_the_report() -> None:
    got = section(rules=verdicts())
    assert got.judge["status"] == "ran" and "planned_calls" not in got.judge
    assert set(got.judged) == {"rules"}  # the reference is not judged against itself
    assert got.judged["rules"]["entities"]["tp"] == 2
    assert got.pairwise == TALLIES and got.notes == []


def test_a_table_stored_while_judging_was_off_is_a_note_not_a_score() -> None:
    got = section(rules=verdicts(), sloppy=verdicts(status="skipped"))
    assert set(got.judged) == {"rules"}
    assert got.notes == [
        "judge_verdicts[sloppy|open] was materialised when judging was 'skipped': it holds no "
        "verdicts, and this report shows none for it; re-materialise judge_verdicts"
    ]


def test_verdicts_of_another_judge_model_are_named() -> None:
    got = section(rules=verdicts("judge-1"), sloppy=verdicts(None))
    assert got.judge["verdict_models"] == sorted(["judge-1", "judge-2", UNRECORDED_MODEL])
    assert len(got.notes) == 1 and "made by an unrecorded model, judge-1" in got.notes[0]


def test_skipped_judging_reads_no_table() -> None:
    got = judging_section(
        mode="open",
        plan_judge={**JUDGE, "status": "skipped"},
        reference="oracle",
        verdicts={"rules": verdicts("judge-1")},
        pairwise_tallies={"status": "skipped"},
    )
    assert got.judge["status"] == "skipped" and got.judged is None and got.notes == []
