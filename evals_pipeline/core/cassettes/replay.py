"""Serving extraction calls from a cassette: no provider, no key, no network.

The recorded transcript is fed back through the same flow a live call runs (`run_extract`), so
replay exercises today's parsing code on yesterday's model output. A call whose key is not
recorded raises CassetteMiss; it never falls through to a live call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from ..errors import CassetteMiss
from ..extractors.base import (
    Extractor,
    Reply,
    classify_entities_items,
    classify_relations_items,
    run_classify,
    run_extract,
)
from ..models import ChatRequest, ClassifyOutcome, Edge, Entity, Episode, ExtractionOutcome
from ..options import ExtractOptions
from ..prompts import render_extract_prompts
from .format import ServedRecord
from .keys import classify_key, extract_key
from .store import Cassette, load_cassette


class _TranscriptTransport:
    """Answers each request with the next recorded attempt of the same stage."""

    def __init__(self, record: ServedRecord) -> None:
        self.provider = record.provider
        self.model = record.model
        self._record = record
        self._attempts = {
            stage.stage: deque(stage.attempts) for stage in record.response.transcript
        }

    async def complete(self, request: ChatRequest) -> Reply:
        queue = self._attempts.get(request.stage)
        if not queue:
            raise CassetteMiss(
                self._record.key,
                self._record.call_type,
                detail=f"the recording has no further {request.stage} reply; the flow changed",
            )
        attempt = queue.popleft()
        return Reply(attempt=attempt, raw_body=attempt.text)

    async def aclose(self) -> None:
        return None


class ReplayingExtractor(Extractor):
    local = True

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self.provider = "cassette"
        self.model = "cassette"

    @classmethod
    def from_path(
        cls, path: Path | str, *, unique: bool = False, keys: AbstractSet[str] | None = None
    ) -> ReplayingExtractor:
        return cls(load_cassette(path, unique=unique, keys=keys))

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        prompts = render_extract_prompts(episode, options)  # once, for the key and the flow
        record = self.cassette.take(extract_key(episode, options, prompts), "extract")
        return await run_extract(_TranscriptTransport(record), episode, options, prompts)

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        items = classify_entities_items(entities)
        record = self.cassette.take(
            classify_key("classify_entities", items, types), "classify_entities"
        )
        return await run_classify(_TranscriptTransport(record), "classify_entities", items, types)

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        items = classify_relations_items(edges)
        record = self.cassette.take(
            classify_key("classify_relations", items, types), "classify_relations"
        )
        return await run_classify(_TranscriptTransport(record), "classify_relations", items, types)
