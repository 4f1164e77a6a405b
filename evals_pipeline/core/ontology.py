"""Ontologies: a closed or suggested vocabulary of entity and relation types, from a bare YAML file.

File format::

    name: people-and-orgs
    mode: strict            # optional, open | strict; a run's --ontology-mode overrides it
    entity_types:
      - name: Person
        description: A human being.
        properties:               # optional: typed values the text may state
          - {name: born, type: date}
          - {name: height, type: number, unit: m}
        identity: name            # name (default) | blank | [property, ...]
    relation_types:
      - name: WORKS_FOR
        description: The source is employed by the target.
        source: [Person]          # allowed source types; empty or absent = any
        target: [Organization]    # allowed target types; empty or absent = any
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import OntologyError
from .files import load_yaml, validate_file_model


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PropertyType(_Strict):
    """A typed property of an entity type; `unit` is the unit values are stated in."""

    name: str = Field(min_length=1)
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    unit: str | None = None
    description: str = ""


class EntityType(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    properties: tuple[PropertyType, ...] = ()
    # How an instance is identified: by its name, by a tuple of its properties (a natural key),
    # or not at all ("blank": the text gives it no identity; match by properties or quote).
    identity: Literal["name", "blank"] | tuple[str, ...] = "name"


class RelationType(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    source: tuple[str, ...] = ()
    target: tuple[str, ...] = ()


class Ontology(_Strict):
    name: str = "ontology"
    mode: Literal["open", "strict"] | None = None
    entity_types: tuple[EntityType, ...] = ()
    relation_types: tuple[RelationType, ...] = ()

    @property
    def entity_type_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.entity_types)

    @property
    def relation_type_names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.relation_types)

    def entity_type(self, name: str | None) -> EntityType | None:
        return next((t for t in self.entity_types if t.name == name), None)

    def merged(self, other: Ontology) -> Ontology:
        """This ontology plus `other`'s types (a case naming several schemas merges them)."""
        have_e = {t.name for t in self.entity_types}
        have_r = {t.name for t in self.relation_types}
        return self.model_copy(
            update={
                "name": f"{self.name}+{other.name}",
                "entity_types": self.entity_types
                + tuple(t for t in other.entity_types if t.name not in have_e),
                "relation_types": self.relation_types
                + tuple(t for t in other.relation_types if t.name not in have_r),
            }
        )

    def vocabulary_violations(
        self, entity_types: Iterable[str | None], relations: Iterable[str]
    ) -> tuple[int, int]:
        """How many of the given entity types and edge relations lie outside this ontology's
        vocabulary (an untyped entity, None, is outside). An ontology of relations only
        (WebNLG's) has no entity vocabulary: the prompt lets the model type entities freely,
        so none is outside (every one had been)."""
        entity_names = self.entity_type_names
        relation_names = self.relation_type_names
        bad_entities = (
            sum(1 for t in entity_types if t not in entity_names) if self.entity_types else 0
        )
        bad_edges = sum(1 for r in relations if r not in relation_names)
        return bad_entities, bad_edges


def check_ontology(ontology: Ontology, path: Path | str) -> Ontology:
    """Reject duplicate names and endpoints that name an undeclared entity type."""
    seen: set[str] = set()
    for i, et in enumerate(ontology.entity_types):
        if et.name in seen:
            raise OntologyError(
                path, f"duplicate entity type {et.name!r}", field=f"entity_types[{i}].name"
            )
        seen.add(et.name)
        declared = {p.name for p in et.properties}
        if len(declared) != len(et.properties):
            raise OntologyError(path, "duplicate property", field=f"entity_types[{i}].properties")
        if isinstance(et.identity, tuple):
            for j, prop in enumerate(et.identity):
                if prop not in declared:
                    raise OntologyError(
                        path,
                        f"identity names undeclared property {prop!r}",
                        field=f"entity_types[{i}].identity[{j}]",
                    )
    seen_rel: set[str] = set()
    for i, rt in enumerate(ontology.relation_types):
        if rt.name in seen_rel:
            raise OntologyError(
                path, f"duplicate relation type {rt.name!r}", field=f"relation_types[{i}].name"
            )
        seen_rel.add(rt.name)
        for side in ("source", "target"):
            for j, type_name in enumerate(getattr(rt, side)):
                if type_name not in seen:
                    raise OntologyError(
                        path,
                        f"unknown ontology type {type_name!r} (declared: {sorted(seen)})",
                        field=f"relation_types[{i}].{side}[{j}]",
                    )
    return ontology


def load_ontology(path: Path | str) -> Ontology:
    """Load and check an ontology file; every failure is an OntologyError naming line or field."""
    data = load_yaml(path, OntologyError)
    if not isinstance(data, dict):
        raise OntologyError(path, "an ontology file must be a YAML mapping")
    return check_ontology(validate_file_model(Ontology, data, path, OntologyError), path)
