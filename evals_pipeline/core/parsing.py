"""Structured-output parsing, with a count of how cleanly each reply parsed.

clean: the whole reply is the JSON object asked for. recovered: the object had to be dug out of
a Markdown fence or surrounding prose. malformed: no object of the asked-for shape is there.
Counting these separately from quality is what lets a report say "this model is right but
sloppy" instead of folding format failures into F1.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .models import EDGE_LIST, ENTITY_LIST, Edge, Entity, ParseStatus

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


class EdgeItem(_Loose):
    source: str
    target: str
    relation: str
    fact: str = ""
    quote: str = ""


class EntitiesReply(_Loose):
    entities: list[EntityItem]


class EdgesReply(_Loose):
    edges: list[EdgeItem]


class TypesReply(_Loose):
    types: dict[str, str]


# Items carry exactly the fields of Entity / Edge (extra keys were dropped), already validated
# with the same types: one adapter call per reply turns them into the frozen models.


def entities_of(reply: EntitiesReply) -> tuple[Entity, ...]:
    return ENTITY_LIST.validate_python([item.__dict__ for item in reply.entities])


def edges_of(reply: EdgesReply) -> tuple[Edge, ...]:
    return EDGE_LIST.validate_python([item.__dict__ for item in reply.edges])


def _validate(shape: type[T], value: Any) -> T | None:
    try:
        return shape.model_validate(value)
    except ValidationError:
        return None


_DECODER = json.JSONDecoder()
# The first character of any JSON document (after whitespace). json.loads fails on text that
# starts otherwise (prose around an object, a fence), so it is not tried on such text.
_JSON_START = frozenset('{["-0123456789tfnNI')


def _from_json(shape: type[T], text: str) -> T | None:
    """`text` as `shape`, or None if it is JSON of another shape; ValueError if not JSON.

    pydantic's parser first (one pass, no intermediate objects); where it refuses, `json.loads`
    decides, so what counts as JSON is exactly what it always was (the two differ on edge
    cases such as lone surrogates in a string).
    """
    try:
        return shape.model_validate_json(text)
    except ValidationError:
        pass
    return _validate(shape, json.loads(text))


def _recover(text: str, shape: type[T]) -> T | None:
    """The first object of the asked-for shape inside a fence; else the object at the first
    `{` of the surrounding prose that starts one, if it has the shape."""
    for match in _FENCE.finditer(text):
        try:
            parsed = _from_json(shape, match.group(1))
        except ValueError:
            continue
        if parsed is not None:
            return parsed
    start = text.find("{")
    while start != -1:
        try:
            value, _end = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        return _validate(shape, value)
    return None


def parse_structured(text: str, shape: type[T]) -> tuple[T | None, ParseStatus]:
    """Parse `text` as `shape`, reporting clean / recovered / malformed."""
    head = text.lstrip()[:1]
    if head in _JSON_START:
        try:
            parsed = _from_json(shape, text)
        except ValueError:
            pass
        else:
            return (parsed, "clean") if parsed is not None else (None, "malformed")
    parsed = _recover(text, shape)
    return (parsed, "recovered") if parsed is not None else (None, "malformed")
