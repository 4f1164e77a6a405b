"""WebNLG v3.0 import: externally authored texts and triples as our gold structures.

Our own prose corpus was labelled by this project, so scoring against it alone can hide a bias
we share with it. WebNLG (see `shared/data/webnlg/README.md`) was written by others; importing
it as `Chunk`s lets the same pipeline run on it unchanged.

A record of the `dev.jsonl` format becomes one `Chunk`:

- `Episode(name=id, body=text, group_id="webnlg-<category>")`;
- expected graph: one `Entity` per distinct subject/object (its normalised text as the name, in
  order of appearance; `type=None` and `quote=""`, since WebNLG has neither entity types nor
  spans), and one `Edge(source=subject, target=object, relation=predicate)` per gold triple.

Only `id`, `category`, `text` and `triples` are read; the other fields are ignored. Triples are
taken as the file spells them (the converter already normalised entity strings). A category
ontology file becomes an `Ontology` with relation types only (no endpoint restrictions).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .corpus import Chunk
from .errors import InputFileError
from .files import (
    jsonl_lines,
    load_yaml,
    parse_json,
    read_input_bytes,
    validate_file_model,
)
from .models import Edge, Entity, Episode, ExtractionResult
from .ontology import EntityType, Ontology, RelationType

GROUP_PREFIX = "webnlg-"


class _Lenient(BaseModel):
    """Extra fields are ignored: the files carry provenance we do not need to score."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class _Triple(_Lenient):
    subject: str = Field(min_length=1)
    predicate: str = Field(min_length=1)
    object: str = Field(min_length=1)


class _Line(_Lenient):
    id: str = Field(min_length=1)
    category: str = Field(min_length=1)
    text: str = Field(min_length=1)
    triples: tuple[_Triple, ...] = Field(min_length=1)


class _NamedEntry(_Lenient):
    """A relation or entity type entry; `label`, `seen_in`, `count` and examples are ignored."""

    name: str = Field(min_length=1)
    description: str = ""


class _OntologyFile(_Lenient):
    category: str = Field(min_length=1)
    relations: tuple[_NamedEntry, ...]
    entity_types: tuple[_NamedEntry, ...]


@dataclass(frozen=True)
class WebNLGCorpus:
    """A loaded WebNLG file; `digest` (sha256 of the file bytes) pins the exact input of a run."""

    path: Path
    chunks: tuple[Chunk, ...]
    categories: tuple[str, ...]
    digest: str

    def episodes(self) -> tuple[Episode, ...]:
        return tuple(c.episode for c in self.chunks)

    def expected_graphs(self) -> dict[str, ExtractionResult]:
        """Chunk name -> gold graph (every WebNLG chunk is labelled)."""
        return {c.episode.name: c.expected for c in self.chunks if c.expected is not None}

    def by_category(self) -> dict[str, tuple[Chunk, ...]]:
        """Chunks per category, in `categories` order: WebNLG results are read per category."""
        groups: dict[str, list[Chunk]] = {c: [] for c in self.categories}
        for chunk in self.chunks:
            groups[category_of(chunk)].append(chunk)
        return {c: tuple(chunks) for c, chunks in groups.items()}


def category_of(chunk: Chunk) -> str:
    """The WebNLG category a loaded chunk came from (kept in its episode's `group_id`)."""
    group = chunk.episode.group_id
    if not group.startswith(GROUP_PREFIX):
        raise ValueError(f"chunk {chunk.episode.name!r} is not a WebNLG chunk (group {group!r})")
    return group[len(GROUP_PREFIX) :]


def load_webnlg(path: Path | str) -> WebNLGCorpus:
    """Load a file of the `dev.jsonl` format; every bad line is an InputFileError naming it."""
    path = Path(path)
    data = read_input_bytes(path)
    chunks: list[Chunk] = []
    categories: dict[str, None] = {}
    first_line: dict[str, int] = {}
    for lineno, text in jsonl_lines(path, data):
        record = _parse_line(path, lineno, text)
        if record.id in first_line:
            raise InputFileError(
                path,
                f"duplicate id {record.id!r} (first on line {first_line[record.id]})",
                line=lineno,
                field="id",
            )
        first_line[record.id] = lineno
        categories.setdefault(record.category, None)
        chunks.append(_to_chunk(record))
    return WebNLGCorpus(
        path=path,
        chunks=tuple(chunks),
        categories=tuple(sorted(categories)),
        digest=hashlib.sha256(data).hexdigest(),
    )


def _parse_line(path: Path, lineno: int, text: str) -> _Line:
    obj: Any = parse_json(path, text, line=lineno)
    return validate_file_model(_Line, obj, path, line=lineno, kind="a WebNLG line")


def _to_chunk(record: _Line) -> Chunk:
    names: dict[str, None] = {}
    for t in record.triples:
        names.setdefault(t.subject, None)
        names.setdefault(t.object, None)
    expected = ExtractionResult(
        entities=tuple(Entity(name=n, type=None, quote="") for n in names),
        edges=tuple(
            Edge(source=t.subject, target=t.object, relation=t.predicate) for t in record.triples
        ),
    )
    episode = Episode(name=record.id, body=record.text, group_id=f"{GROUP_PREFIX}{record.category}")
    return Chunk(episode=episode, expected=expected)


def load_webnlg_ontology(path: Path | str) -> Ontology:
    """Convert a category ontology file into our Ontology (named after its category).

    WebNLG relations take any endpoints, so relation types carry no source/target restriction.
    """
    path = Path(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise InputFileError(path, "a WebNLG ontology file must be a YAML mapping")
    parsed = validate_file_model(_OntologyFile, data, path)
    for key, entries in (("entity_types", parsed.entity_types), ("relations", parsed.relations)):
        seen: dict[str, int] = {}
        for i, entry in enumerate(entries):
            if entry.name in seen:
                raise InputFileError(
                    path,
                    f"duplicate name {entry.name!r} (first at {key}[{seen[entry.name]}])",
                    field=f"{key}[{i}].name",
                )
            seen[entry.name] = i
    return Ontology(
        name=parsed.category,
        entity_types=tuple(
            EntityType(name=e.name, description=e.description) for e in parsed.entity_types
        ),
        relation_types=tuple(
            RelationType(name=r.name, description=r.description) for r in parsed.relations
        ),
    )
