"""The prose corpus: JSONL chunks of source text, each with the graph we labelled for it.

One JSON object per line (blank lines ignored); see `corpus/prose/README.md` for the fields.
Loading is strict because a scorer trusts the expected graph blindly: a misquoted span, a
dangling edge or an undeclared type would silently turn into a wrong score, so every such
problem is an InputFileError naming the 1-based line and the field path.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field

from .errors import InputFileError
from .files import jsonl_lines, parse_json, read_input_bytes, validate_file_model
from .models import Edge, Entity, Episode, ExtractionResult, SourceType
from .ontology import Ontology


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _ExpectedEntity(_Record):
    name: str = Field(min_length=1)
    type: str = Field(min_length=1)
    summary: str
    quote: str = Field(min_length=1)


class _ExpectedEdge(_Record):
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    relation: str = Field(min_length=1)
    fact: str
    quote: str = Field(min_length=1)


class _ExpectedGraph(_Record):
    entities: tuple[_ExpectedEntity, ...]
    edges: tuple[_ExpectedEdge, ...]


class _ChunkLine(_Record):
    """One corpus line as written on disk; `expected: null` (or absent) means unlabelled."""

    name: str = Field(min_length=1)
    body: str = Field(min_length=1)
    group_id: str = ""
    reference_time: datetime | None = None
    source_type: SourceType = "text"
    custom_instructions: str = ""
    expected: _ExpectedGraph | None = None


@dataclass(frozen=True)
class Chunk:
    """An episode to extract from, and the graph we expect (None if the chunk is unlabelled)."""

    episode: Episode
    expected: ExtractionResult | None


@dataclass(frozen=True)
class ProseCorpus:
    """A loaded corpus file; `digest` (sha256 of the file bytes) lets a run pin its exact input."""

    path: Path
    chunks: tuple[Chunk, ...]
    digest: str

    def episodes(self) -> tuple[Episode, ...]:
        return tuple(c.episode for c in self.chunks)

    def expected_graphs(self) -> dict[str, ExtractionResult]:
        """Chunk name -> expected graph, for labelled chunks only."""
        return {c.episode.name: c.expected for c in self.chunks if c.expected is not None}

    def scoped(self, limit: int | None) -> ProseCorpus:
        """The first `limit` chunks in file order (None = all).

        The digest is kept: it identifies the source file, not the subset taken from it.
        """
        if limit is None:
            return self
        if limit < 0:
            raise ValueError(f"limit must be >= 0 or None, got {limit}")
        return dataclasses.replace(self, chunks=self.chunks[:limit])


def load_prose_corpus(path: Path | str, ontology: Ontology | None = None) -> ProseCorpus:
    """Load and check a corpus file; with `ontology`, also check every type against it."""
    path = Path(path)
    data = read_input_bytes(path)
    chunks: list[Chunk] = []
    first_line: dict[str, int] = {}
    for lineno, text in jsonl_lines(path, data):
        record = _parse_line(path, lineno, text)
        if record.name in first_line:
            raise InputFileError(
                path,
                f"duplicate chunk name {record.name!r} (first on line {first_line[record.name]})",
                line=lineno,
                field="name",
            )
        first_line[record.name] = lineno
        if record.expected is not None:
            _check_expected(path, lineno, record.body, record.expected, ontology)
        chunks.append(_to_chunk(record))
    if not chunks:  # a run over nothing would report perfect agreement on nothing
        raise InputFileError(path, "the corpus holds no chunk (no non-blank line)")
    return ProseCorpus(path=path, chunks=tuple(chunks), digest=hashlib.sha256(data).hexdigest())


def _parse_line(path: Path, lineno: int, text: str) -> _ChunkLine:
    obj: Any = parse_json(path, text, line=lineno)
    return validate_file_model(_ChunkLine, obj, path, line=lineno, kind="a corpus line")


def _check_expected(
    path: Path, lineno: int, body: str, graph: _ExpectedGraph, ontology: Ontology | None
) -> None:
    """Quotes verbatim, names and edges unique as scoring compares them (casefolded, spaces
    collapsed: one written twice would count twice as expected), edges closed over the chunk's
    entities, types declared."""
    from .scoring.strict import normalize  # here: scoring imports tables, which import Chunk

    def fail(problem: str, field: str) -> NoReturn:
        raise InputFileError(path, problem, line=lineno, field=field)

    entity_types: dict[str, str] = {}
    entity_index: dict[str, int] = {}
    for i, ent in enumerate(graph.entities):
        where = f"expected.entities[{i}]"
        if (first := entity_index.setdefault(normalize(ent.name), i)) != i:
            fail(
                f"duplicate entity name {ent.name!r} (first at expected.entities[{first}] as "
                f"{graph.entities[first].name!r}; names are compared casefolded)",
                f"{where}.name",
            )
        entity_types[ent.name] = ent.type
        if ent.quote not in body:
            fail(f"quote {ent.quote!r} is not a verbatim substring of body", f"{where}.quote")
        if ontology is not None and ent.type not in ontology.entity_type_names:
            fail(
                f"entity type {ent.type!r} is not declared by ontology {ontology.name!r} "
                f"(declared: {sorted(ontology.entity_type_names)})",
                f"{where}.type",
            )

    relations = {rt.name: rt for rt in ontology.relation_types} if ontology is not None else {}
    edge_index: dict[tuple[str, str, str], int] = {}
    for i, edge in enumerate(graph.edges):
        where = f"expected.edges[{i}]"
        triple = (normalize(edge.source), normalize(edge.relation), normalize(edge.target))
        if (first := edge_index.setdefault(triple, i)) != i:
            fail(
                f"duplicate edge {edge.source!r} -{edge.relation}-> {edge.target!r} (first at "
                f"expected.edges[{first}]): scoring would expect it twice",
                where,
            )
        for side in ("source", "target"):
            endpoint = getattr(edge, side)
            if endpoint not in entity_types:
                fail(f"{side} {endpoint!r} names no entity of this chunk", f"{where}.{side}")
        if edge.quote not in body:
            fail(f"quote {edge.quote!r} is not a verbatim substring of body", f"{where}.quote")
        if ontology is None:
            continue
        rel = relations.get(edge.relation)
        if rel is None:
            fail(
                f"relation {edge.relation!r} is not declared by ontology {ontology.name!r} "
                f"(declared: {sorted(relations)})",
                f"{where}.relation",
            )
        for side, allowed in (("source", rel.source), ("target", rel.target)):
            endpoint_type = entity_types[getattr(edge, side)]
            if allowed and endpoint_type not in allowed:
                fail(
                    f"{edge.relation} does not allow a {side} of type {endpoint_type!r} "
                    f"(allowed: {list(allowed)})",
                    f"{where}.{side}",
                )


def _to_chunk(record: _ChunkLine) -> Chunk:
    episode = Episode(
        name=record.name,
        body=record.body,
        group_id=record.group_id,
        reference_time=record.reference_time,
        source_type=record.source_type,
        custom_instructions=record.custom_instructions,
    )
    if record.expected is None:
        return Chunk(episode=episode, expected=None)
    expected = ExtractionResult(
        entities=tuple(
            Entity(name=e.name, type=e.type, summary=e.summary, quote=e.quote)
            for e in record.expected.entities
        ),
        edges=tuple(
            Edge(source=e.source, target=e.target, relation=e.relation, fact=e.fact, quote=e.quote)
            for e in record.expected.edges
        ),
    )
    return Chunk(episode=episode, expected=expected)
