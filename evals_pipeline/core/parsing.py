"""Structured-output parsing, with a count of how cleanly each reply parsed.

clean: the whole reply is the JSON object asked for. recovered: the object had to be dug out of
a Markdown fence or surrounding prose. malformed: no object of the asked-for shape is there.
Counting these separately from quality is what lets a report say "this model is right but
sloppy" instead of folding format failures into F1.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .models import Edge, Entity, ParseStatus

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EntityItem(_Loose):
    name: str
    type: str | None = None
    summary: str = ""
    quote: str = ""
    properties: dict[str, str | int | float | bool] = Field(default_factory=dict)

    def to_entity(self) -> Entity:
        return Entity(
            name=self.name,
            type=self.type,
            summary=self.summary,
            quote=self.quote,
            properties=self.properties,
        )


class EdgeItem(_Loose):
    source: str
    target: str
    relation: str
    fact: str = ""
    quote: str = ""

    def to_edge(self) -> Edge:
        return Edge(
            source=self.source,
            target=self.target,
            relation=self.relation,
            fact=self.fact,
            quote=self.quote,
        )


class EntitiesReply(_Loose):
    entities: list[EntityItem]


class EdgesReply(_Loose):
    edges: list[EdgeItem]


class TypesReply(_Loose):
    types: dict[str, str]


def _validate(shape: type[T], value: Any) -> T | None:
    try:
        return shape.model_validate(value)
    except ValidationError:
        return None


def _embedded_objects(text: str) -> list[Any]:
    """JSON objects found inside fences first, then at each `{` of the surrounding prose."""
    found: list[Any] = []
    for block in _FENCE.findall(text):
        with contextlib.suppress(ValueError):
            found.append(json.loads(block))
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _end = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        found.append(value)
        break
    return found


def parse_structured(text: str, shape: type[T]) -> tuple[T | None, ParseStatus]:
    """Parse `text` as `shape`, reporting clean / recovered / malformed."""
    try:
        value = json.loads(text)
    except ValueError:
        pass
    else:
        parsed = _validate(shape, value)
        return (parsed, "clean") if parsed is not None else (None, "malformed")
    for candidate in _embedded_objects(text):
        parsed = _validate(shape, candidate)
        if parsed is not None:
            return parsed, "recovered"
    return None, "malformed"
