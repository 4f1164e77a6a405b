"""Per-episode counts (never rates) of one cast against its expected graph.

Rates are ratios of counts pooled over episodes (`pooled_rates`); `core.compare` reads the same
counts. Entities match by identity: `name` types by normalised name, natural-key types by the
coerced values of their key (by name when the expected vertex states no complete key: a
secondary identity), `blank` types by equal property values or an overlapping quote. Schema
findings (`unknown_type`, `undeclared_edge`, `undeclared_property`) are against the schema the
model was shown, so for a sliced episode a type the slice left out is a finding too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..compare import RATES
from ..models import CallStats, Edge, Entity, ExtractionOutcome, ExtractionResult
from ..ontology import EntityType, Ontology, PropertyType
from ..parsing import EdgesReply, EntitiesReply, parse_structured
from .corpus import EdgeRef, ExpectedGraph, Vertex, is_mention
from .values import canonical, normalise_text, states

COUNT_NAMES: tuple[str, ...] = (
    "entities_tp", "entities_produced", "entities_expected",
    "edges_tp", "edges_produced", "edges_expected",
    "edges_matched", "edges_reversed",
    "properties_tp", "properties_produced", "properties_expected",
    "items_emitted", "items_conformant", "final_items_emitted", "final_items_conformant",
    "quotes_ungrounded",
    "vertices_emitted", "edges_emitted", "properties_emitted",
    "unknown_type", "undeclared_edge", "undeclared_property", "values_unfaithful",
    "items_matched", "span_overlap", "mention_agree",
    "forbidden_written", "forbidden_total",
    "sliced_episodes", "expected_types", "seeds_expected_found", "slice_expected_found",
    "recast_vertices", "recast_added", "recast_duplicated",
    "tokens", "requests",
)  # fmt: skip

_F1 = {
    "entity_f1": ("entities_tp", "entities_produced", "entities_expected"),
    "edge_f1": ("edges_tp", "edges_produced", "edges_expected"),
    "property_f1": ("properties_tp", "properties_produced", "properties_expected"),
}


def _span(text: str, quote: str) -> tuple[int, int] | None:
    if not quote:
        return None
    at = text.casefold().find(quote.casefold())
    return (at, at + len(quote)) if at >= 0 else None


def quotes_overlap(text: str, a: str, b: str) -> bool:
    sa, sb = _span(text, a), _span(text, b)
    return sa is not None and sb is not None and sa[0] < sb[1] and sb[0] < sa[1]


def grounded(text: str, quote: str) -> bool:
    """A quote is grounded when it occurs in the text (case and whitespace runs aside)."""
    return bool(quote.strip()) and normalise_text(quote) in normalise_text(text)


def _props(et: EntityType | None) -> dict[str, PropertyType]:
    return {p.name: p for p in et.properties} if et is not None else {}


def _value_equal(a: object, b: object, prop: PropertyType) -> bool:
    return canonical(a, prop) == canonical(b, prop)  # type: ignore[arg-type]


def _identity_match(v: Vertex, e: Entity, et: EntityType, body: str) -> bool:
    props = _props(et)
    if et.identity == "name":
        return normalise_text(v.name) == normalise_text(e.name)
    if et.identity == "blank":
        if v.properties and all(
            k in e.properties and _value_equal(e.properties[k], val, props[k])
            for k, val in v.properties.items()
        ):
            return True
        return quotes_overlap(body, v.quote, e.quote)
    key = et.identity
    if all(k in v.properties for k in key) and all(k in e.properties for k in key):
        return all(_value_equal(e.properties[k], v.properties[k], props[k]) for k in key)
    # A key missing on either side: the name is the secondary identity it is known by (and
    # the mention flag then tells whether the cast agreed that the key was not stated).
    return normalise_text(v.name) == normalise_text(e.name)


def match_entities(
    expected: ExpectedGraph, produced: Sequence[Entity], schema: Ontology, body: str
) -> dict[str, int]:
    """Expected handle -> index of the produced entity it matched: a maximum one-to-one
    matching (as WebNLG's triples, the judge's pairs and the claims are matched), and among
    those the one closest to matching in file order, first free match first. Taken greedily,
    an expected vertex whose quote overlapped two produced ones could take the only one a later
    vertex matched: the count hung on the file's order, and was low."""
    handles = [h for h, v in expected.vertices.items() if schema.entity_type(v.type) is not None]
    if not handles or not produced:
        return {}
    matches = np.zeros((len(handles), len(produced)), dtype=bool)
    for row, handle in enumerate(handles):
        v = expected.vertices[handle]
        et = schema.entity_type(v.type)
        assert et is not None
        for i, e in enumerate(produced):
            matches[row, i] = e.type == v.type and _identity_match(v, e, et, body)
    greedy = np.zeros_like(matches)
    taken: set[int] = set()
    for row in range(len(handles)):
        free = [int(i) for i in np.flatnonzero(matches[row]) if int(i) not in taken]
        if free:
            greedy[row, free[0]] = True
            taken.add(free[0])
    # Cardinality first (each match outweighs every tie-break together), then greedy's pairs.
    weight = matches * (len(handles) + 1) + greedy
    rows, cols = linear_sum_assignment(weight, maximize=True)
    return {handles[r]: int(c) for r, c in zip(rows, cols, strict=True) if matches[r, c]}


def _edge_handles(
    edge: Edge, by_name: Mapping[str, str], by_norm: Mapping[str, str]
) -> tuple[str | None, str | None]:
    def one(name: str) -> str | None:
        return by_name.get(name) or by_norm.get(normalise_text(name))

    return one(edge.source), one(edge.target)


def _findings(
    result: ExtractionResult, shown: Ontology
) -> tuple[list[bool], list[bool], int, int, int]:
    """Per entity / edge: conformant?; and the unknown_type / undeclared_* finding counts."""
    types = {e.name: e.type for e in result.entities}
    relations = {r.name: r for r in shown.relation_types}
    ent_ok: list[bool] = []
    unknown = undeclared_props = 0
    for e in result.entities:
        et = shown.entity_type(e.type)
        bad_props = sum(1 for p in e.properties if p not in _props(et))
        unknown += et is None
        undeclared_props += bad_props
        ent_ok.append(et is not None and bad_props == 0)
    edge_ok: list[bool] = []
    for edge in result.edges:
        rt = relations.get(edge.relation)
        ok = rt is not None
        if rt is not None:
            src, tgt = types.get(edge.source), types.get(edge.target)
            ok = (not rt.source or src in rt.source) and (not rt.target or tgt in rt.target)
        edge_ok.append(ok)
    return ent_ok, edge_ok, unknown, edge_ok.count(False), undeclared_props


def _unfaithful(e: Entity, et: EntityType | None, context: Sequence[str]) -> int:
    props = _props(et)
    identity = et.identity if et is not None and isinstance(et.identity, tuple) else ()
    bad = 0
    for name, value in e.properties.items():
        pt = props.get(name)
        if pt is None or pt.type not in ("integer", "number", "date"):
            continue
        sources = [e.quote, *(context if name in identity else ())]
        bad += not any(states(q, value, pt) for q in sources)
    return bad


def first_reply(outcome: ExtractionOutcome) -> ExtractionResult:
    """What the model said first: each stage's first attempt, parsed as the pipeline parses.

    Differs from the kept result only when a stage was retried (a truncated first reply, which
    usually does not parse: its items then count as none emitted).
    """
    if all(len(stage.attempts) <= 1 for stage in outcome.transcript):
        return outcome.result  # no retry: the first reply is the one kept
    entities: tuple[Entity, ...] = ()
    edges: tuple[Edge, ...] = ()
    for stage in outcome.transcript:
        if not stage.attempts:
            continue
        text = stage.attempts[0].text
        if stage.stage == "entities":
            ents, _ = parse_structured(text, EntitiesReply)
            if ents is not None:
                entities = ents.entities
        elif stage.stage == "edges":
            eds, _ = parse_structured(text, EdgesReply)
            if eds is not None:
                edges = eds.edges
    return ExtractionResult(entities=entities, edges=edges)


def _identity(e: Entity, et: EntityType | None) -> tuple[object, ...] | None:
    """What a graph merges an entity on; None for a blank type (nothing to merge on)."""
    if et is None or et.identity == "name":
        return ("name", e.type, normalise_text(e.name))
    if et.identity == "blank":
        return None
    props = _props(et)
    if all(k in e.properties for k in et.identity):
        return ("key", e.type, *(canonical(e.properties[k], props[k]) for k in et.identity))
    return ("name", e.type, normalise_text(e.name))


def recast_counts(
    first: ExtractionResult, second: ExtractionResult, schema: Ontology, body: str
) -> dict[str, int]:
    """A second cast of the same text into the graph the first one wrote.

    `recast_added`: natural identities the second cast adds (the first did not write them);
    `recast_duplicated`: blank vertices it mints anew although the first wrote the same one
    (equal property values or an overlapping quote): with no identity they cannot merge.
    """
    seen = {_identity(e, schema.entity_type(e.type)) for e in first.entities} - {None}
    blanks = [e for e in first.entities if _identity(e, schema.entity_type(e.type)) is None]
    added = duplicated = 0
    for e in second.entities:
        identity = _identity(e, schema.entity_type(e.type))
        if identity is not None:
            added += identity not in seen
            continue
        duplicated += any(
            b.type == e.type
            and (
                (b.properties and b.properties == e.properties)
                or quotes_overlap(body, b.quote, e.quote)
            )
            for b in blanks
        )
    return {
        "recast_vertices": len(second.entities),
        "recast_added": added,
        "recast_duplicated": duplicated,
    }


def zero_counts(expected: ExpectedGraph, *, sliced: bool, expected_types: int) -> dict[str, int]:
    """The counts of an episode that produced nothing (an error): everything still expected."""
    counts = dict.fromkeys(COUNT_NAMES, 0)
    counts["entities_expected"] = len(expected.vertices)
    counts["edges_expected"] = len(expected.edges)
    counts["forbidden_total"] = len(expected.forbidden_vertices) + len(expected.forbidden_edges)
    if sliced:
        counts["sliced_episodes"] = 1
        counts["expected_types"] = expected_types
    return counts


def episode_counts(
    *,
    body: str,
    context: Sequence[str],
    expected: ExpectedGraph,
    result: ExtractionResult | None,
    schema: Ontology,
    shown: Ontology,
    seeds: Sequence[str] | None = None,
    stats: CallStats | None = None,
    first: ExtractionResult | None = None,
) -> dict[str, int]:
    """Every count of one episode. `schema` is the case's whole schema (for identity and value
    types), `shown` what the model was shown; `seeds` is given for sliced episodes only.

    Conformance and the hallucination, grounding and faithfulness findings read the `first`
    reply (default: the kept `result`); P/R/F1 and everything matched read the kept result."""
    expected_types = {v.type for v in expected.vertices.values()}
    counts = zero_counts(expected, sliced=seeds is not None, expected_types=len(expected_types))
    if seeds is not None:
        shown_types = shown.entity_type_names
        counts["seeds_expected_found"] = len(expected_types & set(seeds))
        counts["slice_expected_found"] = len(expected_types & shown_types)
    if stats is not None:
        counts["tokens"] = stats.input_tokens + stats.output_tokens
        counts["requests"] = stats.requests
    if result is None:
        return counts
    first = result if first is None else first
    ents, edges = result.entities, result.edges
    counts["entities_produced"] = len(ents)
    counts["edges_produced"] = len(edges)
    counts["final_items_emitted"] = len(ents) + len(edges)
    ent_ok, edge_ok, *_ = _findings(result, shown)
    counts["final_items_conformant"] = ent_ok.count(True) + edge_ok.count(True)

    counts["vertices_emitted"] = len(first.entities)
    counts["edges_emitted"] = len(first.edges)
    counts["items_emitted"] = len(first.entities) + len(first.edges)
    counts["properties_emitted"] = sum(len(e.properties) for e in first.entities)
    ent_ok, edge_ok, unknown, undeclared_edges, undeclared_props = _findings(first, shown)
    counts["items_conformant"] = ent_ok.count(True) + edge_ok.count(True)
    counts["unknown_type"] = unknown
    counts["undeclared_edge"] = undeclared_edges
    counts["undeclared_property"] = undeclared_props
    quotes = [e.quote for e in first.entities] + [e.quote for e in first.edges]
    counts["quotes_ungrounded"] = sum(not grounded(body, q) for q in quotes)
    counts["values_unfaithful"] = sum(
        _unfaithful(e, schema.entity_type(e.type), context) for e in first.entities
    )

    matched = match_entities(expected, ents, schema, body)
    counts["entities_tp"] = len(matched)
    for handle, i in matched.items():
        v, e = expected.vertices[handle], ents[i]
        props = _props(schema.entity_type(v.type))
        counts["properties_expected"] += len(v.properties)
        counts["properties_produced"] += len(e.properties)
        counts["properties_tp"] += sum(
            1
            for k, val in v.properties.items()
            if k in e.properties and k in props and _value_equal(e.properties[k], val, props[k])
        )
        counts["span_overlap"] += quotes_overlap(body, v.quote, e.quote)
        et = schema.entity_type(v.type)
        counts["mention_agree"] += et is not None and is_mention(et, e.properties) == v.mention

    by_name = {ents[i].name: h for h, i in matched.items()}
    by_norm = {normalise_text(ents[i].name): h for h, i in matched.items()}
    want = {(e.source, e.relation, e.target): e for e in expected.edges}
    hit: set[tuple[str, str, str]] = set()
    # Each wrong-way edge once, as each matched one: a repeated reversed edge had counted twice
    # against direction while a repeated right one counted once.
    turned: set[tuple[str, str, str]] = set()
    for edge in edges:
        src, tgt = _edge_handles(edge, by_name, by_norm)
        if src is None or tgt is None:
            continue
        key = (src, edge.relation, tgt)
        if key in want and key not in hit:
            hit.add(key)
            counts["span_overlap"] += quotes_overlap(body, want[key].quote, edge.quote)
        elif (tgt, edge.relation, src) in want and key not in want:
            turned.add(key)
    counts["edges_tp"] = counts["edges_matched"] = len(hit)
    counts["edges_reversed"] = len(turned)
    counts["items_matched"] = counts["entities_tp"] + counts["edges_tp"]
    counts["forbidden_written"] = _forbidden_written(
        expected, ents, edges, matched, by_name, by_norm
    )
    return counts


def _strip_article(name: str) -> str:
    n = normalise_text(name)
    for article in ("the ", "a ", "an "):
        if n.startswith(article):
            return n[len(article) :]
    return n


def _forbidden_written(
    expected: ExpectedGraph,
    ents: Sequence[Entity],
    edges: Sequence[Edge],
    matched: Mapping[str, int],
    by_name: Mapping[str, str],
    by_norm: Mapping[str, str],
) -> int:
    used = set(matched.values())
    written = 0
    for fv in expected.forbidden_vertices:
        for i, e in enumerate(ents):
            if e.type != fv.type:
                continue
            if (fv.name is None and i not in used) or (
                fv.name is not None and _strip_article(e.name) == _strip_article(fv.name)
            ):
                written += 1
                used.add(i)
                break
    produced = set()
    for edge in edges:
        src, tgt = _edge_handles(edge, by_name, by_norm)
        produced.add((src, edge.relation, tgt))
    written += sum((f.source, f.relation, f.target) in produced for f in expected.forbidden_edges)
    return written


def _side(counts: Mapping[str, int], side: str) -> int:
    return sum(counts.get(name.strip(), 0) for name in side.split("+"))


def sum_counts(episodes: Sequence[Mapping[str, int]]) -> dict[str, int]:
    total = dict.fromkeys(COUNT_NAMES, 0)
    for counts in episodes:
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    total["episodes"] = len(episodes)
    return total


def pooled_rates(episodes: Sequence[Mapping[str, int]]) -> dict[str, float | None]:
    """Every bench rate over the pooled counts; None where the denominator is zero."""
    total = sum_counts(episodes)
    out: dict[str, float | None] = {}
    for rate, (num, den) in RATES.items():
        d = _side(total, den)
        out[rate] = _side(total, num) / d if d else None
    for rate, (tp, produced, expected_) in _F1.items():
        d = total[produced] + total[expected_]
        out[rate] = 2 * total[tp] / d if d else None
    return out


__all__ = ["COUNT_NAMES", "EdgeRef", "episode_counts", "pooled_rates"]
