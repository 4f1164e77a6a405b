"""Rendering mode reports and the mode matrix as readable Markdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def agreement_note(reports: Sequence[Mapping[str, Any]]) -> str:
    """What the strict scores of these mode reports measure, naming their reference: labels
    when every reference is the oracle (the hand-written expected graphs), another backend's
    output otherwise (a model, or the rules that recorded a cassette)."""
    names = sorted({str(r.get("reference")) for r in reports})
    specs = [(r.get("backends") or {}).get(r.get("reference"), {}).get("spec") for r in reports]
    which = ", ".join(f"`{name}`" for name in names)
    if specs and all(spec == "oracle" for spec in specs):
        return (
            f"Strict scores measure agreement with the reference {which}"
            f"{',' if names == ['oracle'] else ', the oracle,'} which answers with the corpus's "
            "hand-written expected graphs (exact strings after casefolding and whitespace "
            "normalisation): ground truth only as far as that labelling goes. An item the labels "
            "leave out counts against a backend that finds it."
        )
    return (
        f"Strict scores measure agreement with the reference {which} (exact strings after "
        "casefolding and whitespace normalisation), not correctness: the reference is another "
        "backend's output, not ground truth."
    )


_DASH = "—"
# The strict axes in table order, with their column labels (types: entities whose type matches).
STRICT_AXES = {
    "entities": "Entities",
    "types": "Typed entities",
    "edges": "Edges",
    "summaries": "Summaries",
}


def _cell(value: object) -> str:
    return _DASH if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def _code(value: object) -> str:
    return f"`{value}`"


def _num(value: float | None, digits: int = 3) -> str:
    return _DASH if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return _DASH if value is None else f"{value:.1%}"


def _int(value: int | None) -> str:
    return _DASH if value is None else f"{value:,}"


def _usd(value: float | None) -> str:
    return _DASH if value is None else f"${value:,.4f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def judge_line(judge: Mapping[str, Any]) -> str:
    """`LLM-as-judge: skipped — ANTHROPIC_API_KEY is not set`, from {"status", "reason"}."""
    status = judge.get("status") or "not run"
    reason = judge.get("reason") or judge.get("detail")
    return f"LLM-as-judge: {status}" + (f" — {reason}" if reason else "")


def _corpus_line(corpus: Mapping[str, Any]) -> str:
    if not corpus:
        return f"Corpus: {_DASH}"
    keys = sorted(corpus, key=lambda k: (k != "digest", k))
    return "Corpus: " + ", ".join(f"{k} {_code(corpus[k])}" for k in keys)


def _provenance_line(provenance: Mapping[str, Any]) -> str:
    """`Provenance (SHA-256, first 12): prompts `…`, …`: what to tell two reports apart by."""
    parts = [
        f"{label} {_code(str(provenance[key])[:12])}"
        for key, label in (("prompts", "prompts"), ("judge_prompts", "judge prompts"))
        if provenance.get(key)
    ]
    if provenance.get("ontology"):
        parts.append(f"ontology {_code(str(provenance['ontology'])[:12])}")
    for name, digest in (provenance.get("cassettes") or {}).items():
        parts.append(f"cassette of {_code(name)} {_code(str(digest)[:12])}")
    return "Provenance (SHA-256, first 12 digits): " + ", ".join(parts)


def _strict_section(backends: Mapping[str, Any], reference: str) -> list[str]:
    headers = ["Backend"]
    for label in STRICT_AXES.values():
        headers += [f"{label} P", f"{label} R", f"{label} F1"]
    headers += ["Chunks compared", "Skipped"]
    rows = []
    for name, summary in backends.items():
        strict = summary.get("strict")
        if strict is None:
            filler = "(reference)" if name == reference else _DASH
            rows.append([_cell(name), *[filler] * (3 * len(STRICT_AXES)), _DASH, _DASH])
            continue
        row = [_cell(name)]
        for axis in STRICT_AXES:
            prf = strict.get(axis) or {}  # an axis added after the report was stored: —
            row += [_num(prf.get("precision")), _num(prf.get("recall")), _num(prf.get("f1"))]
        row += [_int(strict["chunks_compared"]), _int(strict["skipped_chunks"])]
        rows.append(row)
    return [
        f"## Strict agreement with {_code(reference)}",
        "",
        *_table(headers, rows),
        "",
        "— in a P or R column: nothing to divide by (no item produced for a precision, none in "
        "the reference for a recall), not 0.",
        "",
    ]


def _reliability_section(backends: Mapping[str, Any]) -> list[str]:
    headers = [
        "Backend",
        "Chunks",
        "Errors",
        "Error rate",
        "Clean",
        "Recovered",
        "Malformed",
        "Edge budget exhausted",
    ]
    rows = []
    extra: list[str] = []
    for name, s in backends.items():
        so = s["structured_output"]
        rows.append(
            [
                _cell(name),
                _int(s["chunks"]),
                _int(s["errors"]),
                _pct(s["error_rate"]),
                _int(so["clean"]),
                _int(so["recovered"]),
                _int(so["malformed"]),
                _int(s["edge_budget_exhausted_chunks"]),
            ]
        )
        if s["errors_by_type"]:
            by_type = ", ".join(f"{_code(t)} × {n}" for t, n in s["errors_by_type"].items())
            extra.append(f"- errors in {_code(name)}: {by_type}")
            if s["errors_by_type"].get("CassetteMiss"):
                extra.append(
                    "  - a `CassetteMiss` is a chunk its cassette does not hold under these "
                    "prompts: the prompt, ontology or corpus changed since recording, this mode "
                    "was never recorded, or the call failed while recording (the cassette's "
                    "`.failures.jsonl` lists those chunks). Its F1 here measures the cassette, "
                    "not the model: re-record the cassette against a live backend."
                )
        trunc = s["truncated"]
        if trunc["retry_succeeded"] or trunc["exhausted"]:
            extra.append(
                f"- truncated: {_code(name)} — {trunc['retry_succeeded']} retried successfully, "
                f"{trunc['exhausted']} exhausted the retry budget"
            )
    lines = ["## Reliability", "", *_table(headers, rows), ""]
    return lines + ([*extra, ""] if extra else [])


def _vocabulary_section(backends: Mapping[str, Any]) -> list[str]:
    rows = []
    for name, s in backends.items():
        v = s.get("vocabulary_compliance")
        if v is None:
            continue
        rows.append(
            [
                _cell(name),
                f"{_int(v['entities_outside'])} / {_int(v['entities_total'])}",
                f"{_int(v['edges_outside'])} / {_int(v['edges_total'])}",
                _pct(v["outside_rate"]),
            ]
        )
    if not rows:
        return []
    headers = ["Backend", "Entities outside", "Edges outside", "Outside rate"]
    return [
        "## Vocabulary compliance",
        "",
        "Types outside the ontology's closed list, in successful chunks. This is separate from "
        "structured-output health: valid JSON can still ignore the vocabulary.",
        "",
        *_table(headers, rows),
        "",
    ]


def _source_notes(backends: Mapping[str, Any], replayed: str, oracle: str) -> list[str]:
    """A section's notes on where its figures came from: `replayed` said of the cassette
    backends, `oracle` of the oracle; each note names its backends."""
    notes = []
    for said, named in (
        (
            replayed,
            [n for n, s in backends.items() if str(s.get("spec", "")).startswith("cassette:")],
        ),
        (oracle, [n for n, s in backends.items() if s.get("spec") == "oracle"]),
    ):
        if named:
            notes.append(f"- {', '.join(_code(n) for n in named)}: {said}")
    return [*notes, ""] if notes else []


def _latency_section(backends: Mapping[str, Any]) -> list[str]:
    rows = [
        [_cell(name), *(_num(s["latency_ms"].get(k), 1) for k in ("p50", "p90", "p99"))]
        for name, s in backends.items()
    ]
    return [
        "## Latency (ms per successful chunk)",
        "",
        *_table(["Backend", "p50", "p90", "p99"], rows),
        "",
        *_source_notes(
            backends,
            "replayed; the latency is of the recorded calls, when they were made, not of this run.",
            "the oracle makes no call; its latency is nil.",
        ),
    ]


def _usage_section(backends: Mapping[str, Any]) -> list[str]:
    headers = [
        "Backend",
        "Provider",
        "Model",
        "Requests",
        "Input tokens",
        "Output tokens",
        "Cost (USD)",
    ]
    rows = [
        [
            _cell(name),
            _cell(s["provider"]),
            _cell(s["model"]),
            _int(s["requests"]),
            _int(s["tokens"]["input"]),
            _int(s["tokens"]["output"]),
            _usd(s["cost_usd"]),
        ]
        for name, s in backends.items()
    ]
    return [
        "## Tokens, requests and cost",
        "",
        *_table(headers, rows),
        "",
        *_source_notes(
            backends,
            "replayed; provider, model, requests and tokens are the recorded calls' (what they "
            "cost when recorded; see the cassette's README for what recorded it).",
            "the oracle sends no request; it counts its two answers a chunk (entities, edges) "
            "as requests, and spends no token.",
        ),
    ]


def _judged_section(backends: Mapping[str, Any], reference: str) -> list[str]:
    rows = []
    for name, summary in backends.items():
        judged = summary.get("judged")
        if not judged:
            continue
        row = [_cell(name)]
        for axis in ("entities", "edges", "summaries"):
            prf = judged[axis]
            row += [_num(prf["precision"]), _num(prf["recall"]), _num(prf["f1"])]
        row.append(_int(sum(judged[a]["judge_errors"] for a in judged)))
        rows.append(row)
    if not rows:
        return []
    headers = ["Backend"]
    for axis in ("Entities", "Edges", "Summaries"):
        headers += [f"{axis} P", f"{axis} R", f"{axis} F1"]
    headers.append("Judge errors")
    return [
        f"## LLM-as-judge agreement with {_code(reference)}",
        "",
        "A chunk the backend failed counts every reference item as missed, as in the strict "
        "scores. A judge call that gave no verdict (judge errors, summed over the axes) is left "
        "out and asked again on the next run; with none judged on an axis its scores are —.",
        "",
        *_table(headers, rows),
        "",
    ]


def _pairwise_section(pairwise: Mapping[str, Any] | None) -> list[str]:
    if pairwise is None:
        return []
    if pairwise.get("status") != "ran":
        reason = pairwise.get("reason", pairwise.get("status", ""))
        return ["## Blind pairwise judging", "", f"Skipped: {reason}.", ""]
    headers = [
        "Pair", "Axis", "Wins", "Losses", "Ties", "Win rate (first)", "Order inconsistency",
        "Compared", "Skipped", "Judge errors",
    ]  # fmt: skip
    rows = []
    for pair, data in pairwise["pairs"].items():
        for axis, t in data["axes"].items():
            rows.append(
                [
                    _cell(pair), axis, _int(t["wins"]), _int(t["losses"]), _int(t["ties"]),
                    _pct(t["win_rate"]), _pct(t["order_inconsistency_rate"]),
                    _int(t["chunks_compared"]), _int(t["chunks_skipped"]),
                    _int(t.get("judge_errors", 0)),
                ]
            )  # fmt: skip
    return [
        "## Blind pairwise judging",
        "",
        "Wins and win rate are for the first backend of each pair; ties exclude from the rate. "
        "A chunk and axis whose judge calls did not both give a verdict is a judge error, left "
        "out of the tally and asked again on the next run.",
        "",
        *_table(headers, rows),
        "",
    ]


def _notes_section(notes: Sequence[str]) -> list[str]:
    if not notes:
        return []
    return ["## Notes", "", *(f"- {note}" for note in notes), ""]


def render_mode_report(report: Mapping[str, Any]) -> str:
    """One mode's report as Markdown."""
    backends = report["backends"]
    reference = report["reference"]
    lines = [
        f"# Extraction eval — ontology mode {_code(report['ontology_mode'])}",
        "",
        f"- Reference backend: {_code(reference)}",
        f"- {_corpus_line(report.get('corpus') or {})}",
    ]
    if report.get("ontology"):
        lines.append(f"- Ontology: {_code(report['ontology'])}")
    specs = [f"{_code(name)} {_code(s.get('spec', _DASH))}" for name, s in backends.items()]
    lines.append("- Backends: " + ", ".join(specs))
    if report.get("provenance"):
        lines.append(f"- {_provenance_line(report['provenance'])}")
    note = agreement_note([report])
    lines += [f"- {judge_line(report.get('judge') or {})}", "", f"> {note}", ""]
    lines += _strict_section(backends, reference)
    if report["ontology_mode"] == "freeform":
        lines += [
            "In freeform mode the types are each backend's own: typed-entity agreement shows how "
            "far they drift from the reference's types, not whether they are right.",
            "",
        ]
    lines += _judged_section(backends, reference)
    lines += _pairwise_section(report.get("pairwise"))
    lines += _reliability_section(backends)
    lines += _vocabulary_section(backends)
    lines += _latency_section(backends)
    lines += _usage_section(backends)
    lines += _notes_section(report.get("notes") or [])
    return "\n".join(lines).rstrip("\n") + "\n"


_MATRIX_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("edges_f1", "Edge F1 (agreement with reference)", False),
    ("entities_f1", "Entity F1 (agreement with reference)", False),
    ("types_f1", "Typed entity F1 (name and type agree with reference)", False),
    ("summaries_f1", "Summary F1 (agreement with reference)", False),
    ("error_rate", "Error rate", True),
    ("vocabulary_outside_rate", "Vocabulary outside rate (strict mode)", True),
)


def render_mode_matrix(matrix: Mapping[str, Any]) -> str:
    """The cross-mode matrix as Markdown: one table per headline metric, backends by modes."""
    modes: list[str] = list(matrix["modes"])
    reports: Mapping[str, Any] = matrix.get("reports") or {}
    cells: Mapping[str, Mapping[str, Any]] = matrix["matrix"]
    note = agreement_note([reports[m] for m in modes if m in reports])
    lines = ["# Extraction eval — ontology mode matrix", "", f"> {note}", ""]
    for mode in modes:
        report = reports.get(mode) or {}
        parts = [f"reference {_code(report.get('reference', _DASH))}"]
        corpus = report.get("corpus") or {}
        if "digest" in corpus:
            parts.append(f"corpus {_code(corpus['digest'])}")
        parts.append(judge_line(report.get("judge") or {}))
        lines.append(f"- {_code(mode)}: " + "; ".join(parts))
    lines.append("")
    for key, title, percent in _MATRIX_METRICS:
        if key == "vocabulary_outside_rate" and not any(
            row.get(m, {}).get(key) is not None for row in cells.values() for m in modes
        ):
            continue
        rows = []
        for backend, row in cells.items():
            values = []
            for mode in modes:
                if mode not in row:
                    values.append("n/a")
                elif key.endswith("_f1") and backend == (reports.get(mode) or {}).get("reference"):
                    values.append("(reference)")  # agreement with itself is not measured
                else:
                    value = row[mode].get(key)
                    values.append(_pct(value) if percent else _num(value))
            rows.append([_cell(backend), *values])
        lines += [f"## {title}", "", *_table(["Backend", *modes], rows), ""]
    notes = [n for mode in modes for n in (reports.get(mode) or {}).get("notes") or []]
    lines += _notes_section(list(dict.fromkeys(notes)))
    return "\n".join(lines).rstrip("\n") + "\n"
