from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TypeVar

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evals_pipeline.core.models import ENTITY_LIST, Edge, Entity
from evals_pipeline.core.parsing import EdgesReply, EntitiesReply, fenced, parse_structured

T = TypeVar("T", bound=BaseModel)
REPO = Path(__file__).resolve().parents[2]


def test_clean_json() -> None:
    parsed, status = parse_structured(
        '{"entities": [{"name": "Ada", "type": "Person"}]}', EntitiesReply
    )
    assert status == "clean"
    assert parsed is not None and parsed.entities[0].name == "Ada"


def test_fenced_json_is_recovered() -> None:
    text = 'Here you go:\n```json\n{"entities": [{"name": "Ada"}]}\n```\nAnything else?'
    parsed, status = parse_structured(text, EntitiesReply)
    assert status == "recovered"
    assert parsed is not None and parsed.entities[0].name == "Ada"


def test_trailing_text_is_recovered() -> None:
    parsed, status = parse_structured('{"edges": []} I hope this helps.', EdgesReply)
    assert status == "recovered"
    assert parsed is not None and parsed.edges == ()


def test_leading_prose_with_braces_is_recovered() -> None:
    text = 'The set {x} is small. {"edges": [{"source": "a", "target": "b", "relation": "R"}]}'
    parsed, status = parse_structured(text, EdgesReply)
    assert status == "recovered"
    assert parsed is not None and parsed.edges[0].relation == "R"


def test_malformed_json() -> None:
    assert parse_structured('{"entities": [{"name": "Ada"', EntitiesReply) == (None, "malformed")
    assert parse_structured("no json here", EntitiesReply) == (None, "malformed")


def test_valid_json_of_wrong_shape_is_malformed() -> None:
    assert parse_structured('{"nodes": []}', EntitiesReply) == (None, "malformed")
    assert parse_structured('[{"name": "Ada"}]', EntitiesReply) == (None, "malformed")


def test_leading_whitespace_before_a_clean_object_is_still_clean() -> None:
    parsed, status = parse_structured(' \n\t{"edges": []}\n', EdgesReply)
    assert status == "clean" and parsed is not None


def test_a_json_document_that_is_not_an_object_is_malformed_not_searched() -> None:
    # json.loads accepts these, so the reply is valid JSON of the wrong shape: never recovered
    # from a `{` further in (the fast path that skips json.loads must not change this).
    for text in ('"{\\"edges\\": []}"', '["{\\"edges\\": []}"]', "null", "-1", "NaN"):
        assert parse_structured(text, EdgesReply) == (None, "malformed"), text


def test_the_fenced_object_wins_over_a_brace_in_the_prose_before_it() -> None:
    text = 'Using {braces}: {"edges": "bad"}\n```json\n{"edges": []}\n```'
    parsed, status = parse_structured(text, EdgesReply)
    assert status == "recovered" and parsed is not None and parsed.edges == ()


class _OldLoose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _OldEntityItem(_OldLoose):
    name: str
    type: str | None = None
    summary: str = ""
    quote: str = ""
    properties: dict[str, str | int | float | bool] = Field(default_factory=dict)


class _OldEdgeItem(_OldLoose):
    source: str
    target: str
    relation: str
    fact: str = ""
    quote: str = ""


class _OldEntitiesReply(_OldLoose):
    entities: list[_OldEntityItem]


class _OldEdgesReply(_OldLoose):
    edges: list[_OldEdgeItem]


def _old_items(text: str, stage: str) -> tuple[tuple[object, ...] | None, str]:
    """The old flow: loose item models, then each item's fields validated as the frozen model."""
    if stage == "entities":
        reply, status = _parse_with_json_loads(text, _OldEntitiesReply)
        if reply is None:
            return None, status
        return tuple(Entity.model_validate(item.__dict__) for item in reply.entities), status
    edges, status = _parse_with_json_loads(text, _OldEdgesReply)
    if edges is None:
        return None, status
    return tuple(Edge.model_validate(item.__dict__) for item in edges.edges), status


def _parse_with_json_loads(text: str, shape: type[T]) -> tuple[T | None, str]:
    """The parser as it was before pydantic's own JSON parser was tried first: the reference
    its results must match, status and value alike."""

    def validate(value: object) -> T | None:
        try:
            return shape.model_validate(value)
        except ValidationError:
            return None

    if text.lstrip()[:1] in set('{["-0123456789tfnNI'):
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            parsed = validate(value)
            return (parsed, "clean") if parsed is not None else (None, "malformed")
    for match in re.finditer(r"```(?:json|JSON)?\s*\n?(.*?)```", text, re.DOTALL):
        try:
            value = json.loads(match.group(1))
        except ValueError:
            continue
        if (parsed := validate(value)) is not None:
            return parsed, "recovered"
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        parsed = validate(value)
        return (parsed, "recovered") if parsed is not None else (None, "malformed")
    return None, "malformed"


_EDGE_CASES = [
    '{"entities": [{"name": "A\\ud800"}]}',  # a lone surrogate: json.loads takes it
    '{"entities": [{"name": "A", "properties": {"w": NaN, "x": Infinity}}]}',
    '{"entities": [{"name": "A", "properties": {"n": 1, "f": 1.0, "b": true, "s": "1"}}]}',
    '{"entities": [{"name": "A", "properties": {"big": 123456789012345678901234567890}}]}',
    '{"entities": [{"name": "A"}], "entities": [{"name": "B"}]}',  # a repeated key
    '{"entities": [{"name": 5}]}',
    '{"entities": [{"name": "A", "type": null, "extra": [1, {"x": 2}]}]}',
    '{"entities": [{"name": "A"}]} trailing',
    '```json\n{"entities": [{"name": "A\\ud800"}]}\n```',
    '```json\n{"edges": []}\n```\n```json\n{"entities": []}\n```',
    'Here: {"entities": [{"name": "A"}]} and {"entities": []}',
    '{"entities": "no"}',
    "[]",
    "",
]


@pytest.mark.parametrize("stage", ["entities", "edges"])
def test_every_shipped_reply_and_edge_case_parses_as_the_json_loads_parser_did(
    stage: str,
) -> None:
    """Today's parser (pydantic's JSON parser first, items validated straight into the frozen
    models) against the old one (json.loads, loose item models, then a second validation)."""
    texts = list(_EDGE_CASES) + [case.replace('"entities"', '"edges"') for case in _EDGE_CASES]
    texts += ['{"edges": [{"source": "A", "target": "B", "relation": "R", "weight": 0.5}]}']
    for cassette in sorted((REPO / "corpus" / "cassettes").glob("*.jsonl")):
        for line in cassette.read_text(encoding="utf-8").splitlines():
            for transcript in json.loads(line)["response"]["transcript"]:
                texts += [attempt["text"] for attempt in transcript["attempts"]]
    assert len(texts) > 100
    shape = EntitiesReply if stage == "entities" else EdgesReply
    for text in texts:
        parsed, status = parse_structured(text, shape)
        got = None if parsed is None else getattr(parsed, stage)
        want, want_status = _old_items(text, stage)
        assert status == want_status, text
        # repr: NaN is not equal to itself. A lone surrogate is now U+FFFD (see the next test).
        assert repr(got) == repr(want).replace("\\ud800", "\ufffd"), text


def test_a_lone_surrogate_becomes_the_replacement_character_and_the_graph_can_be_stored() -> None:
    for text in (
        '{"entities": [{"name": "A\\ud800", "summary": "\\ud83d\\ude00 \\udc00"}]}',
        '```json\n{"entities": [{"name": "A\\ud800"}]}\n```',
        'Here: {"entities": [{"name": "A\\udfff"}]}',
    ):
        parsed, _status = parse_structured(text, EntitiesReply)
        assert parsed is not None, text
        (entity,) = parsed.entities
        assert entity.name == "A\ufffd"
        assert entity.summary in ("", "\U0001f600 \ufffd")  # a valid pair stays one character
        assert ENTITY_LIST.validate_json(ENTITY_LIST.dump_json(parsed.entities)) == parsed.entities


def test_fence_bodies_are_what_the_lazy_pattern_captured() -> None:
    # The pattern fences were found with before `fenced`; every case must split alike.
    lazy = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
    cases = [
        "",
        "no fence",
        "```",
        "````",
        "``````",
        "```json```",
        "```json\n{}\n```",
        "```JSON  \n\n {} ``` tail ```\n[1]\n```",
        'a ```json\n{} ``` b ```{"x": 1}``` c ```unclosed',
        "```jsonx\n{}```",
        "```Json\n{}```",
        "`````json\n{}\n````",
        "```\n```\n```\n```",
        '``` \t\r\n{"entities": []}``` and ``` ',
    ]
    for text in cases:
        assert list(fenced(text)) == [m.group(1) for m in lazy.finditer(text)], text
