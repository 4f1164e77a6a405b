"""Recording: wraps whichever extractor was resolved and appends one record per successful call.

A failed call (an extract's or a classify's) never produces a cassette record (the cassette
holds successes only); it produces a sidecar record. Edge-budget exhaustion is the one
non-fatal class and produces both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path

from ..errors import ExtractionFailed
from ..extractors.base import Extractor, classify_entities_items, classify_relations_items
from ..models import (
    CallType,
    ClassifyOutcome,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    FailureRecord,
)
from ..options import ExtractOptions
from .format import CassetteRecord, CassetteResponse, rfc3339_now
from .keys import classify_key, classify_request, extract_key, extract_request
from .sidecar import DEFAULT_CAP_BYTES, FailureSidecar
from .store import CassetteWriter


class RecordingExtractor(Extractor):
    def __init__(
        self,
        inner: Extractor,
        path: Path | str,
        *,
        sidecar_cap_bytes: int = DEFAULT_CAP_BYTES,
        write_sidecar: bool = True,
    ) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model = inner.model
        self.local = inner.local
        self.writer = CassetteWriter(path)
        self.sidecar = FailureSidecar(path, cap_bytes=sidecar_cap_bytes) if write_sidecar else None

    def _sidecar(self, exc: ExtractionFailed) -> None:
        if self.sidecar is not None and isinstance(exc.failure, FailureRecord):
            self.sidecar.append(exc.failure)

    def _append(
        self,
        key: str,
        call_type: CallType,
        request: Mapping[str, object],
        outcome: ExtractionOutcome | ClassifyOutcome,
        result: dict[str, object],
    ) -> None:
        self.writer.append(
            CassetteRecord(
                key=key,
                call_type=call_type,
                provider=outcome.provider,
                model=outcome.model,
                timestamp=rfc3339_now(),
                request=dict(request),
                response=CassetteResponse(transcript=outcome.transcript, result=result),
            )
        )

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        try:
            outcome = await self.inner.extract(episode, options)
        except ExtractionFailed as exc:
            self._sidecar(exc)
            raise
        request: dict[str, object] = {"episode_name": episode.name, "ontology_mode": options.mode}
        request.update(extract_request(episode, options))
        self._append(
            extract_key(episode, options),
            "extract",
            request,
            outcome,
            outcome.result.model_dump(mode="json"),
        )
        if self.sidecar is not None:
            for failure in outcome.failures:
                self.sidecar.append(failure)
        return outcome

    async def _classify(
        self,
        call_type: CallType,
        items: dict[str, str],
        types: Sequence[str],
        outcome_coro: Awaitable[ClassifyOutcome],
    ) -> ClassifyOutcome:
        try:
            outcome = await outcome_coro
        except ExtractionFailed as exc:
            self._sidecar(exc)
            raise
        self._append(
            classify_key(call_type, items, types),
            call_type,
            classify_request(items, types),
            outcome,
            {"types": outcome.types},
        )
        return outcome

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        return await self._classify(
            "classify_entities",
            classify_entities_items(entities),
            types,
            self.inner.classify_entities(entities, types),
        )

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        return await self._classify(
            "classify_relations",
            classify_relations_items(edges),
            types,
            self.inner.classify_relations(edges, types),
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
