"""`ClaimExtractor`: one chat call per text, then the validation every claim must pass.

The flow mirrors the shared extraction flow in `extractors/base.py`: render a `ChatRequest`,
send it through a `ChatTransport` (the same Anthropic SDK and httpx transports the knowledge-graph
stages use), retry a truncated reply once with a doubled budget, parse the reply with
`parse_structured` (clean / recovered / malformed). Then each claim is checked:

- its evidence span must be a verbatim substring of the input text (else dropped, counted);
- the claim itself must be 5–15 words (else dropped, counted);
- a second claim citing the same span is dropped (counted), so claims anchor 1:1 to spans.

With no LLM configured (`transport=None`) the stage returns zero claims: there is no heuristic
fallback, so every claim the stage emits is the model's. Replay swaps only the network call
(`RecordedTransport`), so a replayed recording goes through exactly this code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, StrictStr

from ..errors import ConfigError, EvalsError, MalformedReply, TransportError
from ..extractors.base import ChatTransport, Reply, TransportExtractor
from ..extractors.specs import BackendSpec, build_extractor
from ..models import Attempt, ChatRequest, ParseStatus
from ..parsing import parse_structured
from .prompt import current_prompt

MIN_CLAIM_WORDS = 5
MAX_CLAIM_WORDS = 15
DEFAULT_MAX_TOKENS = 2048

DropReason = Literal["span_not_verbatim", "claim_shape", "duplicate_span"]


class Claim(BaseModel):
    """One validated claim: a canonical sentence and its verbatim evidence span."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    claim: StrictStr
    evidence_span: StrictStr


class ClaimsReply(BaseModel):
    """CLAIM_OUTPUT_SCHEMA as a pydantic model: no extra keys, both fields strings.

    Strict on purpose (unlike the knowledge-graph replies): a reply that does not match the
    schema we publish in the prompt is malformed, not quietly coerced.
    """

    model_config = ConfigDict(extra="forbid")

    claims: list[Claim]


@dataclass(frozen=True)
class DroppedClaim:
    claim: str
    evidence_span: str
    reason: DropReason


@dataclass(frozen=True)
class ClaimExtraction:
    """What the stage produced for one text, and what validation threw away."""

    claims: tuple[Claim, ...] = ()
    dropped: tuple[DroppedClaim, ...] = ()
    # None: no LLM was called (none configured). Otherwise how cleanly the reply parsed.
    parse_status: ParseStatus | None = None
    raw_response_text: str | None = None
    truncated: bool = False

    def dropped_count(self, reason: DropReason) -> int:
        return sum(1 for d in self.dropped if d.reason == reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "claims": [c.model_dump() for c in self.claims],
            "dropped": [asdict(d) for d in self.dropped],
            "parse_status": self.parse_status,
            "raw_response_text": self.raw_response_text,
            "truncated": self.truncated,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClaimExtraction:
        """The inverse of `to_dict` (asset values travel between Dagster steps as JSON)."""
        return cls(
            claims=tuple(Claim.model_validate(c) for c in data["claims"]),
            dropped=tuple(
                DroppedClaim(d["claim"], d["evidence_span"], cast(DropReason, d["reason"]))
                for d in data["dropped"]
            ),
            parse_status=data["parse_status"],
            raw_response_text=data["raw_response_text"],
            truncated=bool(data["truncated"]),
        )


def word_count(text: str) -> int:
    return len(text.split())


def claim_shape_ok(claim: str) -> bool:
    return MIN_CLAIM_WORDS <= word_count(claim) <= MAX_CLAIM_WORDS


def span_is_verbatim(span: str, text: str) -> bool:
    """A non-blank span that occurs in `text` exactly as given (an empty span is in every text)."""
    return bool(span.strip()) and span in text


def validate_claims(raw_text: str, input_text: str, *, truncated: bool = False) -> ClaimExtraction:
    """Schema, then span, then shape, then 1:1 span anchoring. A malformed reply is zero claims."""
    parsed, status = parse_structured(raw_text, ClaimsReply)
    if parsed is None:
        return ClaimExtraction(parse_status=status, raw_response_text=raw_text, truncated=truncated)
    kept: list[Claim] = []
    dropped: list[DroppedClaim] = []
    spans: set[str] = set()
    for item in parsed.claims:
        reason: DropReason | None = None
        if not span_is_verbatim(item.evidence_span, input_text):
            reason = "span_not_verbatim"
        elif not claim_shape_ok(item.claim):
            reason = "claim_shape"
        elif item.evidence_span in spans:
            reason = "duplicate_span"
        if reason is not None:
            dropped.append(DroppedClaim(item.claim, item.evidence_span, reason))
            continue
        spans.add(item.evidence_span)
        kept.append(item)
    return ClaimExtraction(
        claims=tuple(kept),
        dropped=tuple(dropped),
        parse_status=status,
        raw_response_text=raw_text,
        truncated=truncated,
    )


class ClaimCallFailed(EvalsError):
    """The claim-extraction call failed at the HTTP level or returned no usable completion."""

    def __init__(self, message: str, *, body: str = "") -> None:
        self.body = body
        super().__init__(message)


def claim_request(text: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> ChatRequest:
    """The rendered request, from the prompt constants as they stand now."""
    prompt = current_prompt()
    return ChatRequest(
        stage="claims", system=prompt.system, user=prompt.render_user(text), max_tokens=max_tokens
    )


class ClaimExtractor:
    """Claims out of one text through a ChatTransport; `transport=None` means no LLM."""

    def __init__(
        self, transport: ChatTransport | None, *, max_tokens: int = DEFAULT_MAX_TOKENS
    ) -> None:
        self.transport = transport
        self.max_tokens = max_tokens

    @property
    def provider(self) -> str:
        return self.transport.provider if self.transport is not None else "none"

    @property
    def model(self) -> str:
        return self.transport.model if self.transport is not None else "none"

    async def extract(self, text: str) -> ClaimExtraction:
        """Raises ClaimCallFailed when the provider fails; never invents claims itself."""
        if self.transport is None:
            return ClaimExtraction()
        request = claim_request(text, self.max_tokens)
        for retry in (False, True):
            try:
                reply = await self.transport.complete(request)
            except (TransportError, MalformedReply) as exc:
                raise ClaimCallFailed(f"{self.provider}: {exc}", body=exc.body) from exc
            attempt = reply.attempt
            if attempt.truncated and not retry:
                request = request.model_copy(update={"max_tokens": request.max_tokens * 2})
                continue
            # An exhausted budget still goes through validation (usually: malformed, zero
            # claims), so a live run and the replay of its recording agree by construction.
            return validate_claims(attempt.text, text, truncated=attempt.truncated)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        if self.transport is not None:
            await self.transport.aclose()


@dataclass
class RecordedTransport:
    """Serves one recorded reply text: replay swaps the network call and nothing else.

    A reply recorded as truncated is served as truncated on every attempt, so the extractor's
    retry and validation run as they did live.
    """

    text: str
    truncated: bool = False
    model: str = "recorded"
    provider: str = "recording"
    requests: list[ChatRequest] = field(default_factory=list)

    async def complete(self, request: ChatRequest) -> Reply:
        self.requests.append(request)
        attempt = Attempt(
            text=self.text,
            finish_reason="length" if self.truncated else "recorded",
            truncated=self.truncated,
            max_tokens=request.max_tokens,
        )
        return Reply(attempt=attempt, raw_body="")

    async def aclose(self) -> None:
        return None


def transport_from_spec(
    spec: BackendSpec,
    *,
    anthropic_api_key: str | None = None,
    anthropic_base_url: str | None = None,
    timeout_s: float = 120.0,
    max_retries: int = 2,
) -> ChatTransport:
    """The live transport `build_extractor` builds for this spec (anthropic, oai-http, oai-uds).

    Reusing `build_extractor` keeps one place that knows how a spec becomes a client. Cassette
    and oracle backends hold knowledge-graph answers, not claims, so they are a ConfigError here.
    Keys come from the environment as usual (ANTHROPIC_API_KEY, EVALS_OAI_API_KEY), never a spec.
    """
    if not spec.is_live:
        raise ConfigError(
            "claim extraction needs a live backend (anthropic, oai-http or oai-uds); "
            f"{spec.describe()!r} is a {spec.kind} backend"
        )
    extractor = build_extractor(
        spec,
        anthropic_api_key=anthropic_api_key,
        anthropic_base_url=anthropic_base_url,
        timeout_s=timeout_s,
        max_retries=max_retries,
    )
    assert isinstance(extractor, TransportExtractor)  # every live kind is a transport
    return extractor.transport
