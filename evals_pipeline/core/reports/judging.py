"""What a mode report says of judging, from the verdicts and tallies stored upstream.

Verdicts and tallies are stored assets, re-materialised separately: a report can meet tables
stored while judging was off (they hold no verdicts) or verdicts of another judge model than
the one configured now. Each is said in a note, never shown as a judgement of nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..judge.reference import judged_scores, verdicts_from_rows

# The judge model of verdicts stored before they recorded one.
UNRECORDED_MODEL = "an unrecorded model"
# A verdict table's `attrs` key (kept in its Parquet file): "ran", or why it holds no verdicts.
JUDGE_STATUS = "judge_status"


@dataclass(frozen=True)
class JudgingSection:
    """The report's judge block, judged scores per candidate, pairwise tallies, and notes."""

    judge: dict[str, Any]
    judged: dict[str, Any] | None
    pairwise: dict[str, Any] | None
    notes: list[str]


def judging_section(
    *,
    mode: str,
    plan_judge: Mapping[str, Any],
    reference: str,
    verdicts: Mapping[str, pd.DataFrame],
    pairwise_tallies: Mapping[str, Any],
) -> JudgingSection:
    """The judging part of one mode's report. `plan_judge` is the run plan's judge block,
    `verdicts` each backend's verdict table of this mode."""
    judge = {k: v for k, v in plan_judge.items() if k != "planned_calls"}
    judged: dict[str, Any] | None = None
    verdict_models: set[str] = set()
    notes: list[str] = []
    if judge["status"] != "skipped" and judge["mode"] in ("reference", "both"):
        judge["status"] = "ran"
        tables = {name: table for name, table in verdicts.items() if name != reference}
        unjudged = {  # stored while judging was off (a partial re-materialisation)
            name: str(table.attrs.get(JUDGE_STATUS))
            for name, table in tables.items()
            if table.attrs.get(JUDGE_STATUS, "ran") != "ran"
        }
        for status in sorted(set(unjudged.values())):
            names = [f"{n}|{mode}" for n, s in sorted(unjudged.items()) if s == status]
            notes.append(not_judged_note("judge_verdicts", names, status))
        judged = {
            name: judged_scores(verdicts_from_rows(table.to_dict(orient="records")))
            for name, table in tables.items()
            if name not in unjudged
        }
        verdict_models |= {m for t in tables.values() for m in _judge_models(t)}
    elif judge["status"] != "skipped":
        judge["status"] = "ran"
    pairwise = dict(pairwise_tallies) if judge["mode"] in ("pairwise", "both") else None
    if pairwise is not None and pairwise.get("status") == "ran":
        verdict_models.add(str(pairwise.get("model", UNRECORDED_MODEL)))
    elif pairwise is not None and judge["status"] == "ran":
        said = pairwise.get("reason") or pairwise.get("status")
        notes.append(not_judged_note("pairwise_tallies", [mode], str(said)))
    if others := sorted(verdict_models - {judge.get("model")}):
        judge["verdict_models"] = sorted(verdict_models)
        notes.append(stale_judge_note(others, str(judge.get("model"))))
    return JudgingSection(judge=judge, judged=judged, pairwise=pairwise, notes=notes)


def not_judged_note(asset: str, partitions: Sequence[str], status: str) -> str:
    """Upstream judging stored while judging was off: its emptiness is no verdict."""
    return (
        f"{asset}[{', '.join(partitions)}] was materialised when judging was {status!r}: "
        f"{'they hold' if len(partitions) > 1 else 'it holds'} no verdicts, and this report "
        f"shows none for {'them' if len(partitions) > 1 else 'it'}; re-materialise {asset}"
    )


def _judge_models(verdicts: pd.DataFrame) -> set[str]:
    """The judge models a verdict table's rows came from."""
    if verdicts.empty:
        return set()
    if "model" not in verdicts.columns:
        return {UNRECORDED_MODEL}
    return {m if isinstance(m, str) else UNRECORDED_MODEL for m in verdicts["model"]}


def stale_judge_note(made_by: list[str], configured: str) -> str:
    """Verdicts are stored assets: after the judge model changes, Dagster keeps the old ones
    until they are re-materialised, and the report must not name the new model beside them."""
    return (
        f"judge verdicts in this report were made by {', '.join(made_by)}, not by the "
        f"configured judge model {configured}: re-materialise judge_verdicts and "
        "pairwise_tallies for this mode to judge with it"
    )
