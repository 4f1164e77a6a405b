"""The Extractor interface and the one extraction flow every backend runs.

A backend is a `ChatTransport` (one rendered request in, one reply out). Everything above it —
prompt rendering, the entities-then-edges sequence, the doubled-budget retry on truncation,
structured-output parsing and its counts, failure records — is shared here, so a cassette replay,
the oracle and a live model all go through the same parsing path and are scored alike.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, assert_never

from pydantic import BaseModel

from ..errors import ExtractionFailed, MalformedReply, TransportError
from ..models import (
    Attempt,
    CallStats,
    ChatRequest,
    ClassifyOutcome,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
    FailureRecord,
    ParseCounts,
    ParseStatus,
    StageTranscript,
    TruncationCounts,
)
from ..options import ExtractOptions
from ..parsing import EdgesReply, EntitiesReply, TypesReply, parse_structured
from ..prompts import ExtractPrompts, render_classify_prompt, render_extract_prompts
from .retries import Tries

T = TypeVar("T", bound=BaseModel)
C = TypeVar("C")


class LoopBound(Generic[C]):
    """One async client per event loop.

    Async HTTP clients pool connections on the loop that opened them. Dagster steps, the CLI and
    tests each run their own `asyncio.run`, so a transport keeps a client per loop instead of
    failing with "Event loop is closed" on the second run.
    """

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, C]] = {}

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            for key in [k for k, (lp, _c) in self._clients.items() if lp.is_closed()]:
                del self._clients[key]
            entry = (loop, self._make())
            self._clients[id(loop)] = entry
        return entry[1]

    async def aclose(self, close: Callable[[C], Awaitable[object]]) -> None:
        """Close the client of the running loop.

        A client whose loop ended without this is dropped when the next loop asks; its sockets
        close when it is collected, and aiohttp logs it as an unclosed session. Every caller
        in the package closes in a `finally`.
        """
        entry = self._clients.pop(id(asyncio.get_running_loop()), None)
        if entry is not None:
            await close(entry[1])


# Stop reasons of a reply that is no answer to the prompt, whatever its text parses as (a
# filtered, refused or paused turn): a failure record naming the reason, not an extraction that
# found nothing. Checked in the shared flow, so a replayed recording is held to it too.
# OpenAI's content_filter; Anthropic's refusal and pause_turn (a server-tool turn left open).
NOT_AN_ANSWER = frozenset({"content_filter", "refusal", "pause_turn"})


@dataclass(frozen=True)
class Reply:
    """A transport's answer: the recordable attempt plus the raw HTTP body (sidecar only)."""

    attempt: Attempt
    raw_body: str


def counted(attempt: Attempt, requests: int) -> Attempt:
    """`attempt` as it took `requests` HTTP requests (retries before it included)."""
    return attempt if requests == 1 else attempt.model_copy(update={"http_requests": requests})


async def counted_reply(call: Callable[[Tries], Awaitable[tuple[Attempt, str]]]) -> Reply:
    """One call with its retries, `call(tries)`, and the HTTP requests it sent: on the reply's
    attempt, or on the TransportError or MalformedReply it ended in (every transport's)."""
    tries = Tries()
    try:
        attempt, body = await call(tries)
    except (TransportError, MalformedReply) as exc:
        exc.requests = tries.count
        raise
    return Reply(attempt=counted(attempt, tries.count), raw_body=body)


class ChatTransport(Protocol):
    """Sends one rendered request to a provider. Raises TransportError or MalformedReply."""

    provider: str
    model: str

    async def complete(self, request: ChatRequest) -> Reply: ...

    async def aclose(self) -> None: ...


class Extractor(ABC):
    """What the harness and the pipeline call. The record/replay seam sits at this boundary."""

    provider: str
    model: str
    # Answers without waiting on a network (a cassette, the oracle): a run over it is bounded
    # CPU work, which `run_each` runs with the cyclic collector paused.
    local: bool = False

    @abstractmethod
    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        """Entities, then edges, for one episode. Raises ExtractionFailed on a fatal failure."""

    @abstractmethod
    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome: ...

    @abstractmethod
    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome: ...

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most extractors hold nothing
        """Release network clients."""


def classify_entities_items(entities: Sequence[Entity]) -> dict[str, str]:
    """The raw call arguments of classify_entities: entity name -> summary."""
    return {e.name: e.summary for e in entities}


def classify_relations_items(edges: Sequence[Edge]) -> dict[str, str]:
    """The raw call arguments of classify_relations: `source|relation|target` -> fact."""
    return {relation_key(e): e.fact for e in edges}


def relation_key(edge: Edge) -> str:
    return f"{edge.source}|{edge.relation}|{edge.target}"


@dataclass(slots=True)
class _Tally:
    """A call's counts as they accrue: plain ints, one `CallStats` model at the end (setting a
    pydantic model's field goes through its `__setattr__`, ten times a chunk)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    clean: int = 0
    recovered: int = 0
    malformed: int = 0
    retry_succeeded: int = 0
    exhausted: int = 0

    def count_attempt(self, attempt: Attempt) -> None:
        self.requests += attempt.http_requests
        self.input_tokens += attempt.input_tokens
        self.output_tokens += attempt.output_tokens
        self.latency_ms += attempt.latency_ms

    def count_parse(self, status: ParseStatus) -> None:
        if status == "clean":
            self.clean += 1
        elif status == "recovered":
            self.recovered += 1
        elif status == "malformed":
            self.malformed += 1
        else:
            assert_never(status)

    def stats(self) -> CallStats:
        return CallStats(
            requests=self.requests,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            latency_ms=self.latency_ms,
            structured_output=ParseCounts(
                clean=self.clean, recovered=self.recovered, malformed=self.malformed
            ),
            truncated=TruncationCounts(
                retry_succeeded=self.retry_succeeded, exhausted=self.exhausted
            ),
        )


class _StageFailure(Exception):
    def __init__(self, failure: FailureRecord) -> None:
        self.failure = failure


def _completion_tokens(attempt: Attempt | None) -> int | None:
    """The reply's output token count, or None where it is unknown (the design's null): the
    transports read a missing usage block as 0, and a reply with text, or one cut off at its
    budget, took more than none."""
    if attempt is None or (attempt.output_tokens == 0 and (attempt.text or attempt.truncated)):
        return None
    return attempt.output_tokens


def _failure(
    transport: ChatTransport,
    request: ChatRequest,
    chunk_key: str | None,
    classification: str,
    raw_body: str,
    attempt: Attempt | None = None,
) -> FailureRecord:
    return FailureRecord(
        ts_ms=int(time.time() * 1000),
        model=transport.model,
        # The claims call has its own failure path (ClaimCallFailed) and never gets here.
        call_type=request.stage if request.stage != "claims" else "entities",
        chunk_key=chunk_key,
        classification=classification,  # type: ignore[arg-type]
        raw_body=raw_body,
        finish_reason=attempt.finish_reason if attempt else None,
        completion_tokens=_completion_tokens(attempt),
        max_tokens=request.max_tokens,
    )


async def _run_stage(
    transport: ChatTransport,
    request: ChatRequest,
    shape: type[T],
    stats: _Tally,
    transcript: list[StageTranscript],
    chunk_key: str | None,
) -> tuple[T | None, FailureRecord | None]:
    """One logical call: a truncated reply is retried once with doubled max_tokens.

    Returns (parsed, None), or (None, truncation failure) when the budget stays exhausted.
    Raises _StageFailure for an HTTP failure or a malformed reply.
    """
    attempts: list[Attempt] = []
    try:
        for retry in (False, True):
            try:
                reply = await transport.complete(request)
            except TransportError as exc:
                stats.requests += exc.requests
                raise _StageFailure(
                    _failure(transport, request, chunk_key, "http_error", exc.body or str(exc))
                ) from exc
            except MalformedReply as exc:
                stats.requests += exc.requests
                raise _StageFailure(
                    _failure(transport, request, chunk_key, "malformed", exc.body)
                ) from exc
            attempt = reply.attempt
            attempts.append(attempt)
            stats.count_attempt(attempt)
            if attempt.finish_reason in NOT_AN_ANSWER:  # live or replayed: its tokens count
                raise _StageFailure(
                    _failure(transport, request, chunk_key, "malformed", reply.raw_body, attempt)
                )
            if attempt.truncated:
                # Cut off by the context window, not the budget: a doubled budget gives the
                # same input no more room, and would only pay for the same cut again.
                if not retry and attempt.finish_reason != "model_context_window_exceeded":
                    request = request.model_copy(update={"max_tokens": request.max_tokens * 2})
                    continue
                stats.exhausted += 1
                failure = _failure(
                    transport, request, chunk_key, "truncation", reply.raw_body, attempt
                )
                return None, failure
            parsed, status = parse_structured(attempt.text, shape)
            stats.count_parse(status)
            if parsed is None:  # after a retry too: a malformed retry recovered nothing
                raise _StageFailure(
                    _failure(transport, request, chunk_key, "malformed", reply.raw_body, attempt)
                )
            if retry:
                stats.retry_succeeded += 1
            return parsed, None
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        transcript.append(StageTranscript(stage=request.stage, attempts=tuple(attempts)))


async def run_extract(
    transport: ChatTransport,
    episode: Episode,
    options: ExtractOptions,
    prompts: ExtractPrompts | None = None,
) -> ExtractionOutcome:
    """Two calls per episode: entities, then edges between those entities.

    Entity-budget exhaustion is fatal (nothing to relate); edge-budget exhaustion is not: the
    outcome carries an empty edge list plus a failure record saying the low count is suppressed
    output, not a quality signal.
    """
    if prompts is None:  # a caller that rendered them already (replay's key) passes them in
        prompts = render_extract_prompts(episode, options)
    stats = _Tally()
    transcript: list[StageTranscript] = []
    failures: list[FailureRecord] = []
    chunk_key = episode.name
    try:
        entities_reply, failure = await _run_stage(
            transport,
            ChatRequest(
                stage="entities",
                system=prompts.entity_system,
                user=prompts.entity_user,
                max_tokens=options.max_tokens_entities,
            ),
            EntitiesReply,
            stats,
            transcript,
            chunk_key,
        )
        if entities_reply is None:
            assert failure is not None
            raise _StageFailure(failure)
        entities = entities_reply.entities
        edges_reply, failure = await _run_stage(
            transport,
            ChatRequest(
                stage="edges",
                system=prompts.edge_system,
                user=prompts.edge_user(entities),
                max_tokens=options.max_tokens_edges,
            ),
            EdgesReply,
            stats,
            transcript,
            chunk_key,
        )
    except _StageFailure as exc:
        raise ExtractionFailed(
            f"{transport.provider} extraction of {chunk_key!r} failed: "
            f"{exc.failure.call_type} {exc.failure.classification}",
            exc.failure,
            stats.stats(),
        ) from exc.__cause__
    edges: tuple[Edge, ...] = ()
    if edges_reply is not None:
        edges = edges_reply.edges
    if failure is not None:
        failures.append(failure)
    return ExtractionOutcome(
        result=ExtractionResult(entities=entities, edges=edges),
        stats=stats.stats(),
        transcript=tuple(transcript),
        failures=tuple(failures),
        provider=transport.provider,
        model=transport.model,
    )


async def run_classify(
    transport: ChatTransport,
    stage: str,
    items: dict[str, str],
    types: Sequence[str],
    max_tokens: int = 2048,
) -> ClassifyOutcome:
    """One classify_entities / classify_relations call over the given items."""
    system, user = render_classify_prompt(stage, tuple(types), items)
    stats = _Tally()
    transcript: list[StageTranscript] = []
    request = ChatRequest(stage=stage, system=system, user=user, max_tokens=max_tokens)  # type: ignore[arg-type]
    try:
        reply, failure = await _run_stage(transport, request, TypesReply, stats, transcript, None)
    except _StageFailure as exc:
        raise ExtractionFailed(
            f"{transport.provider} {stage} failed: {exc.failure.classification}",
            exc.failure,
            stats.stats(),
        ) from exc.__cause__
    if reply is None:
        raise ExtractionFailed(
            f"{transport.provider} {stage} failed: truncation", failure, stats.stats()
        )
    return ClassifyOutcome(
        types=dict(reply.types),
        stats=stats.stats(),
        transcript=tuple(transcript),
        provider=transport.provider,
        model=transport.model,
    )


class TransportExtractor(Extractor):
    """An Extractor over a live ChatTransport (Anthropic, OpenAI-compatible HTTP or UDS)."""

    def __init__(self, transport: ChatTransport) -> None:
        self.transport = transport
        self.provider = transport.provider
        self.model = transport.model

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        return await run_extract(self.transport, episode, options)

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        return await run_classify(
            self.transport, "classify_entities", classify_entities_items(entities), types
        )

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        return await run_classify(
            self.transport, "classify_relations", classify_relations_items(edges), types
        )

    async def aclose(self) -> None:
        await self.transport.aclose()
