"""Building the JSON-serialisable eval report for one ontology mode, and the cross-mode matrix.

Strict scores in these reports measure agreement with the reference backend's output, not
correctness (see `evals_pipeline.core.scoring.strict`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from pathlib import PurePath
from typing import Any

import numpy as np
import pandas as pd

from ..gc_tuning import gc_paused
from ..models import ONTOLOGY_MODES
from ..ontology import Ontology
from ..prices import cost_usd
from ..scoring.strict import AXES
from ..statistics import most_frequent, percentiles
from ..tables import table_graph_json

PARSE_STATUSES: tuple[str, ...] = ("clean", "recovered", "malformed")
TRUNCATION_COUNTS: tuple[str, ...] = ("retry_succeeded", "exhausted")


def jsonable(value: Any) -> Any:
    """A copy of `value` made of plain JSON types: NaN/inf become None, numpy scalars unwrap."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"not JSON-serialisable in a report: {type(value).__name__}")


def jsonable_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    """`jsonable` of a mapping, typed as the dict it returns."""
    out = jsonable(value)
    assert isinstance(out, dict)
    return out


def _int_sum(table: pd.DataFrame, column: str) -> int:
    return int(table[column].fillna(0).sum()) if len(table) else 0


def _source(rows: pd.DataFrame) -> tuple[str, str] | None:
    """The (provider, model) most rows name, ties by name; None where no row names a model."""
    pairs = Counter(
        (p, m)
        for p, m in zip(rows["provider"], rows["model"], strict=True)
        if isinstance(p, str) and isinstance(m, str)
    )
    return most_frequent(pairs)


def _vocabulary_compliance(ok_rows: pd.DataFrame, ontology: Ontology) -> dict[str, Any]:
    """Entities and edges whose type lies outside the ontology, counted from the table's JSON
    (`table_graph_json`): two fields of every item, not a model of it. Entities count only
    where the ontology has entity types: with none, they were asked for untyped by the list."""
    typed = bool(ontology.entity_types)
    ent_out = ent_total = edge_out = edge_total = 0
    with gc_paused():  # each row's parsed JSON is freed as soon as it is counted
        for _chunk, graph in table_graph_json(ok_rows):
            if graph is None:
                continue
            entities, edges = graph
            bad_entities, bad_edges = ontology.vocabulary_violations(
                (e["type"] for e in entities), (e["relation"] for e in edges)
            )
            ent_out += bad_entities
            edge_out += bad_edges
            ent_total += len(entities) if typed else 0
            edge_total += len(edges)
    total = ent_total + edge_total
    return {
        "entities_outside": ent_out,
        "entities_total": ent_total,
        "edges_outside": edge_out,
        "edges_total": edge_total,
        "outside_rate": (ent_out + edge_out) / total if total else None,
    }


def backend_summary(
    name: str,
    spec: str,
    table: pd.DataFrame,
    *,
    ontology: Ontology | None,
    mode: str,
    prices: Mapping[str, Mapping[str, float]] | None,
) -> dict[str, Any]:
    """One backend's numbers for one mode, apart from its scores against the reference (the
    report assembles those beside it: `assemble_mode_report`). Token, request
    and structured-output counts sum over every chunk, failed ones included (a failed chunk
    still spent its calls); latency and vocabulary compliance read successful chunks only.
    """
    ok = table["ok"].astype(bool)
    ok_rows = table[ok]
    failed = table[~ok]
    chunks = len(table)
    errors = len(failed)
    errors_by_type = Counter(
        str(t) if t is not None and not pd.isna(t) else "unknown" for t in failed["error_type"]
    )
    input_tokens = _int_sum(table, "input_tokens")
    output_tokens = _int_sum(table, "output_tokens")
    # One answer's pair, never one answer's provider with another's model (as the bench's
    # rows); where no chunk succeeded, the failed ones' (the extractor's), to price their calls.
    provider, model = _source(ok_rows) or _source(failed) or (None, None)
    latencies = [float(v) for v in ok_rows["latency_ms"] if not pd.isna(v)]
    summary: dict[str, Any] = {
        "name": name,
        "spec": spec,
        "chunks": chunks,
        "errors": errors,
        "error_rate": errors / chunks if chunks else None,
        "errors_by_type": dict(sorted(errors_by_type.items())),
        "latency_ms": percentiles(latencies),
        "structured_output": {k: _int_sum(table, k) for k in PARSE_STATUSES},
        "truncated": {k: _int_sum(table, k) for k in TRUNCATION_COUNTS},
        "edge_budget_exhausted_chunks": (
            int(table["edge_budget_exhausted"].fillna(False).astype(bool).sum()) if chunks else 0
        ),
        "tokens": {"input": input_tokens, "output": output_tokens},
        "requests": _int_sum(table, "requests"),
        "provider": provider,
        "model": model,
        "cost_usd": cost_usd(model, input_tokens, output_tokens, prices),
    }
    if mode == "strict" and ontology is not None:
        summary["vocabulary_compliance"] = _vocabulary_compliance(ok_rows, ontology)
    return jsonable_dict(summary)


def _ordered_modes(modes: Sequence[str]) -> list[str]:
    known = [m for m in ONTOLOGY_MODES if m in modes]
    return known + sorted(m for m in modes if m not in ONTOLOGY_MODES)


def _f1(summary: Mapping[str, Any], axis: str) -> float | None:
    strict = summary.get("strict")
    # A report stored before an axis existed (`types`) has no block for it: not measured.
    scores = None if strict is None else strict.get(axis)
    return None if scores is None else scores["f1"]


def _outside_rate(summary: Mapping[str, Any]) -> float | None:
    vocabulary = summary.get("vocabulary_compliance")
    return None if vocabulary is None else vocabulary["outside_rate"]


def mode_matrix(reports: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Headline numbers of several per-mode reports side by side, backend by mode.

    A backend absent from a mode has no entry for it; the reference backend's F1s are None.
    """
    modes = _ordered_modes(list(reports))
    backends = sorted({b for report in reports.values() for b in report["backends"]})
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    for backend in backends:
        row: dict[str, dict[str, Any]] = {}
        for mode in modes:
            summary = reports[mode]["backends"].get(backend)
            if summary is None:
                continue
            row[mode] = {
                **{f"{axis}_f1": _f1(summary, axis) for axis in AXES},
                "error_rate": summary["error_rate"],
                "vocabulary_outside_rate": _outside_rate(summary),
            }
        matrix[backend] = row
    return jsonable_dict(
        {"modes": modes, "reports": {m: reports[m] for m in modes}, "matrix": matrix}
    )


def float_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """Flat `"{backend}/{metric}"` -> float for every numeric headline of a mode report.

    Missing values (no strict block for the reference, no latency without successes, no price)
    are left out rather than reported as NaN.
    """
    out: dict[str, float] = {}
    for backend, summary in sorted(report["backends"].items()):
        values: dict[str, Any] = {f"{axis}_f1": _f1(summary, axis) for axis in AXES}
        values["error_rate"] = summary["error_rate"]
        values["errors"] = summary["errors"]
        for key, value in summary["latency_ms"].items():
            values[f"latency_ms_{key}"] = value
        values["input_tokens"] = summary["tokens"]["input"]
        values["output_tokens"] = summary["tokens"]["output"]
        values["requests"] = summary["requests"]
        values.update(summary["structured_output"])
        values.update(summary["truncated"])
        values["edge_budget_exhausted_chunks"] = summary["edge_budget_exhausted_chunks"]
        values["cost_usd"] = summary["cost_usd"]
        values["vocabulary_outside_rate"] = _outside_rate(summary)
        for key, value in values.items():
            if value is not None and not isinstance(value, bool):
                out[f"{backend}/{key}"] = float(value)
    return out
