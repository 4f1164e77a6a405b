"""Assembling a mode report from per-backend summaries and the reference comparison.

The Dagster graph computes each backend's summary in its own partition (`backend_summary`) and
the strict comparison once per mode; this joins them into one mode's report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .report import jsonable_dict


def assemble_mode_report(
    *,
    mode: str,
    reference: str,
    ontology: str | None,
    summaries: Mapping[str, Mapping[str, Any]],
    strict: Mapping[str, Mapping[str, Any] | None],
    corpus: Mapping[str, object],
    judge: Mapping[str, object],
    notes: Sequence[str] = (),
    judged: Mapping[str, Mapping[str, Any] | None] | None = None,
    pairwise: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`pairwise` is None unless pairwise judging was requested: the section is then absent
    from the report, not null."""
    backends = {
        name: {
            **summaries[name],
            "strict": None if name == reference else strict.get(name),
            "judged": None if judged is None or name == reference else judged.get(name),
        }
        for name in sorted(summaries)
    }
    report: dict[str, Any] = {
        "ontology_mode": mode,
        "reference": reference,
        "ontology": ontology,
        "corpus": dict(corpus),
        "judge": dict(judge),
        "notes": list(notes),
        "backends": backends,
    }
    if pairwise is not None:
        report["pairwise"] = dict(pairwise)
    return jsonable_dict(report)
