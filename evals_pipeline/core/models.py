"""Domain models shared by every stage: what goes into an extraction call and what comes out.

Plain pydantic models, no I/O. Serialised forms of these are what cassettes, Parquet tables and
reports store, so field names are part of the on-disk format.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

SourceType = Literal["text", "message", "json"]
OntologyMode = Literal["freeform", "open", "strict"]
ONTOLOGY_MODES: tuple[OntologyMode, ...] = ("freeform", "open", "strict")

Stage = Literal["entities", "edges", "classify_entities", "classify_relations", "claims"]
CallType = Literal["extract", "classify_entities", "classify_relations"]
ParseStatus = Literal["clean", "recovered", "malformed"]
FailureClass = Literal["http_error", "truncation", "malformed"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Episode(_Frozen):
    """One chunk of source text, as an ingest pipeline hands it to extraction."""

    name: str
    body: str
    group_id: str = ""
    reference_time: datetime | None = None
    source_type: SourceType = "text"
    custom_instructions: str = ""
    # Earlier texts of the same thread, shown to resolve references; extraction is of `body`.
    context: tuple[str, ...] = ()


PropertyValue = str | int | float | bool


class Entity(_Frozen):
    name: str
    type: str | None = None
    summary: str = ""
    quote: str = ""
    properties: dict[str, PropertyValue] = Field(default_factory=dict)


class Edge(_Frozen):
    """A directed, typed relation: `source --relation--> target`."""

    source: str
    target: str
    relation: str
    fact: str = ""
    quote: str = ""


class ExtractionResult(_Frozen):
    entities: tuple[Entity, ...] = ()
    edges: tuple[Edge, ...] = ()


# Whole entity / edge lists validated or serialised in one call instead of one per item.
# NaN and infinities in a property (json.loads accepts them in a reply) stay themselves in the
# lists' JSON (tables), as json.dumps writes them, instead of turning into null.
ENTITY_LIST: TypeAdapter[tuple[Entity, ...]] = TypeAdapter(
    tuple[Entity, ...], config=ConfigDict(ser_json_inf_nan="constants")
)
EDGE_LIST: TypeAdapter[tuple[Edge, ...]] = TypeAdapter(tuple[Edge, ...])


class ChatRequest(_Frozen):
    """One rendered LLM call. Carries no transport detail (no URL, header or key)."""

    stage: Stage
    system: str
    user: str
    max_tokens: int


class Attempt(_Frozen):
    """One provider reply to a ChatRequest, as recorded in a cassette.

    `truncated` is the normalised form of the provider's own stop reason (`max_tokens` for
    Anthropic, `length` for OpenAI-compatible servers), which is kept verbatim in `finish_reason`.
    """

    text: str
    finish_reason: str | None
    truncated: bool
    # A server's negative count is no count: a reply carrying one is malformed.
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    max_tokens: int
    latency_ms: float = 0.0
    # HTTP requests this reply took: 1, plus one for each retried 429/5xx, timeout or reset
    # before it (recorded, so a replay counts what the live call sent). Written only when over
    # 1, so a cassette without retries reads as before (older code forbids the field).
    http_requests: int = Field(default=1, ge=1)

    @model_serializer(mode="wrap")
    def _without_default_requests(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("http_requests") == 1:
            del data["http_requests"]
        return data


class StageTranscript(_Frozen):
    stage: Stage
    attempts: tuple[Attempt, ...]


class ParseCounts(BaseModel):
    clean: int = 0
    recovered: int = 0
    malformed: int = 0


class TruncationCounts(BaseModel):
    retry_succeeded: int = 0
    exhausted: int = 0


class CallStats(BaseModel):
    """Counts for one chunk (or, summed, for a run): what the report's reliability columns read."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    structured_output: ParseCounts = Field(default_factory=ParseCounts)
    truncated: TruncationCounts = Field(default_factory=TruncationCounts)


class FailureRecord(_Frozen):
    """One failed call, exactly the sidecar's fields. `raw_body` is never truncated."""

    ts_ms: int
    model: str
    # The reference's "entities" / "edges", and its type-classification calls (recorded and
    # replayed by the cassette layer for programs that make them; the pipeline makes none).
    call_type: Literal["entities", "edges", "classify_entities", "classify_relations"]
    chunk_key: str | None
    classification: FailureClass
    raw_body: str
    finish_reason: str | None
    completion_tokens: int | None
    max_tokens: int


class ExtractionOutcome(_Frozen):
    """A successful extraction of one episode, with everything needed to record or score it."""

    result: ExtractionResult
    stats: CallStats
    transcript: tuple[StageTranscript, ...]
    failures: tuple[FailureRecord, ...] = ()
    provider: str
    model: str


class ClassifyOutcome(_Frozen):
    """Types assigned by a classify_entities / classify_relations call, by item name."""

    types: dict[str, str]
    stats: CallStats
    transcript: tuple[StageTranscript, ...]
    provider: str
    model: str
