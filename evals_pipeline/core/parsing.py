"""Structured-output parsing, with a count of how cleanly each reply parsed.

clean: the whole reply is the JSON object asked for. recovered: the object had to be dug out of
a Markdown fence or surrounding prose. malformed: no object of the asked-for shape is there.
Counting these separately from quality is what lets a report say "this model is right but
sloppy" instead of folding format failures into F1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .models import Edge, Entity, ParseStatus

T = TypeVar("T", bound=BaseModel)

# A Markdown fence's opening; its body runs to the next ```. Found with `str.find`, not with a
# lazy `(.*?)```` in the pattern, which advanced one character at a time through every body.
_FENCE_OPEN = re.compile(r"```(?:json|JSON)?\s*\n?")


def fenced(text: str) -> Iterator[str]:
    """The body of each Markdown fence in `text`, in order: an opening ``` (with an optional
    json tag, then whitespace), up to the next ```."""
    at = 0
    while (opening := _FENCE_OPEN.search(text, at)) is not None:
        close = text.find("```", opening.end())
        if close == -1:
            return  # no later opening can have a closing fence either
        yield text[opening.end() : close]
        at = close + 3


class _Loose(BaseModel):
    """A reply shape whose extra keys, its items' included, are dropped when parsed through
    `parse_structured` (see `_extra`); validating it directly keeps Entity's extra="forbid"."""

    model_config = ConfigDict(extra="ignore")


def _extra(shape: type[BaseModel]) -> Literal["ignore"] | None:
    """A loose shape's items are validated straight into the frozen Entity / Edge models: the
    call passes extra="ignore" down to them (a model may add keys), so one validation builds
    what the flow returns. Any other shape (a strict schema) keeps its own config."""
    return "ignore" if issubclass(shape, _Loose) else None


class EntitiesReply(_Loose):
    entities: tuple[Entity, ...]


class EdgesReply(_Loose):
    edges: tuple[Edge, ...]


class TypesReply(_Loose):
    types: dict[str, str]


# A JSON escape of a UTF-16 surrogate. json.loads reads a lone one ("\ud800") into a str that
# cannot be written as UTF-8, so a graph holding it could not be stored or served again.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD: a reply's text as a transport
    keeps it. A body's JSON may escape one (`"\\ud83d"`, half an emoji), and such a text
    could be neither recorded nor cached, as invalid UTF-8 bytes in a body are decoded."""
    return _valid_unicode(text) if _SURROGATE.search(text) is not None else text


def _valid_unicode(value: Any) -> Any:
    """`value` with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_valid_unicode(item) for item in value]
    if isinstance(value, dict):
        return {_valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    return value


def _validate(shape: type[T], value: Any, text: str) -> T | None:
    """`value` (json.loads of `text`) as `shape`, or None."""
    if _SURROGATE_ESCAPE.search(text) is not None:
        value = _valid_unicode(value)
    try:
        return shape.model_validate(value, extra=_extra(shape))
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
        return shape.model_validate_json(text, extra=_extra(shape))
    except ValidationError:
        pass
    return _validate(shape, json.loads(text), text)


def _recover(text: str, shape: type[T]) -> T | None:
    """The first object of the asked-for shape inside a fence; else the object at the first
    `{` of the surrounding prose that starts one, if it has the shape."""
    for body in fenced(text):
        try:
            parsed = _from_json(shape, body)
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
        return _validate(shape, value, text)
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
