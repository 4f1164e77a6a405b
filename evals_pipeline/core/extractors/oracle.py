"""The oracle backend: replies with each chunk's expected graph, through the same parsing path.

It is the ceiling the pipeline allows, not a model: a report row that says "oracle" shows what a
perfect extractor scores after our own prompting, parsing and scoring have had their say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ..errors import EvalsError
from ..models import (
    Attempt,
    ChatRequest,
    ClassifyOutcome,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
)
from ..options import ExtractOptions
from .base import (
    Extractor,
    Reply,
    classify_entities_items,
    classify_relations_items,
    relation_key,
    run_classify,
    run_extract,
)


class OracleMissing(EvalsError):
    """The oracle was asked about a chunk that has no expected graph."""


class _OracleTransport:
    provider = "oracle"
    model = "oracle"

    def __init__(self, expected: ExtractionResult | None, types: dict[str, str] | None = None):
        self._expected = expected
        self._types = types or {}

    async def complete(self, request: ChatRequest) -> Reply:
        if request.stage == "entities":
            assert self._expected is not None
            payload: object = {
                "entities": [e.model_dump(mode="json") for e in self._expected.entities]
            }
        elif request.stage == "edges":
            assert self._expected is not None
            payload = {"edges": [e.model_dump(mode="json") for e in self._expected.edges]}
        else:
            payload = {"types": self._types}
        text = json.dumps(payload, ensure_ascii=False)
        attempt = Attempt(
            text=text, finish_reason="end_turn", truncated=False, max_tokens=request.max_tokens
        )
        return Reply(attempt=attempt, raw_body=text)

    async def aclose(self) -> None:
        return None


class OracleExtractor(Extractor):
    local = True
    provider = "oracle"
    model = "oracle"

    def __init__(self, expected: Mapping[str, ExtractionResult]) -> None:
        self._expected = expected

    def _lookup(self, name: str) -> ExtractionResult:
        try:
            return self._expected[name]
        except KeyError:
            raise OracleMissing(f"the oracle has no expected graph for chunk {name!r}") from None

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        return await run_extract(_OracleTransport(self._lookup(episode.name)), episode, options)

    def _known_types(self) -> tuple[dict[str, str], dict[str, str]]:
        entity_types: dict[str, str] = {}
        relation_types: dict[str, str] = {}
        for graph in self._expected.values():
            entity_types.update({e.name: e.type for e in graph.entities if e.type})
            relation_types.update({relation_key(e): e.relation for e in graph.edges})
        return entity_types, relation_types

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        known, _ = self._known_types()
        items = classify_entities_items(entities)
        answer = {name: known[name] for name in items if name in known}
        return await run_classify(_OracleTransport(None, answer), "classify_entities", items, types)

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        _, known = self._known_types()
        items = classify_relations_items(edges)
        answer = {key: known[key] for key in items if key in known}
        return await run_classify(
            _OracleTransport(None, answer), "classify_relations", items, types
        )
