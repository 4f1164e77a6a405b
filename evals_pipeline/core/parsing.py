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
from collections.abc import Iterator
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


_DECODER = json.JSONDecoder()
# The first character of any JSON document (after whitespace). json.loads fails on text that
# starts otherwise (prose around an object, a fence), so it is not tried on such text.
_JSON_START = frozenset('{["-0123456789tfnNI')


def _embedded_objects(text: str) -> Iterator[Any]:
    """JSON objects found inside fences first, then at the first `{` of the surrounding prose
    that starts one. Lazy: a reply whose fenced object fits is not decoded a second time."""
    for match in _FENCE.finditer(text):
        with contextlib.suppress(ValueError):
            yield json.loads(match.group(1))
    start = text.find("{")
    while start != -1:
        try:
            value, _end = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        yield value
        return


def parse_structured(text: str, shape: type[T]) -> tuple[T | None, ParseStatus]:
    """Parse `text` as `shape`, reporting clean / recovered / malformed."""
    head = text.lstrip()[:1]
    if head in _JSON_START:
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
