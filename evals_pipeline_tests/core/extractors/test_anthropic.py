"""The Anthropic backend end to end: the official SDK over a real 127.0.0.1 socket.

Every test scripts a LoopbackLLMServer speaking the Messages API, points `AnthropicTransport` at
it and runs the shared extraction flow, so the SDK's timeouts and parsing run unmodified (its
retries are off: the transport's own, in `retries.py`, are bounded). Error replies carry
`retry-after: 0.01` so the retries stay fast.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gzip
import itertools
import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.errors import ConfigError, ExtractionFailed
from evals_pipeline.core.extractors.anthropic import AnthropicTransport
from evals_pipeline.core.extractors.base import Extractor, TransportExtractor
from evals_pipeline.core.extractors.specs import build_extractor, parse_backend_spec
from evals_pipeline.core.models import (
    CallStats,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
    FailureRecord,
)
from evals_pipeline.core.ontology import EntityType, Ontology, RelationType
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline.core.runner import extract_all, run_sync
from evals_pipeline_tests.conftest import TEST_API_KEY
from evals_pipeline_tests.pipeline_fixtures import make_config
from evals_pipeline_tests.support.deterministic_backend import anthropic_responder
from evals_pipeline_tests.support.hermetic import clear_proxy_env
from evals_pipeline_tests.support.llm_servers import (
    LoopbackLLMServer,
    ReceivedRequest,
    Reply,
    anthropic_error,
    anthropic_message,
    raw_http_server,
    trickled_json,
)

EPISODE = Episode(name="ep-1", body="Alice works for Acme. Bob met Alice.")
OPTIONS = ExtractOptions(max_tokens_entities=100, max_tokens_edges=60)
ENTITIES = {
    "entities": [
        {"name": "Alice", "type": "Person", "summary": "Works for Acme.", "quote": "Alice"},
        {"name": "Acme", "type": "Organization", "summary": "Employs Alice.", "quote": "Acme"},
    ]
}
EDGES = {
    "edges": [
        {
            "source": "Alice",
            "target": "Acme",
            "relation": "WORKS_FOR",
            "fact": "Alice works for Acme.",
            "quote": "Alice works for Acme",
        }
    ]
}
ONTOLOGY = Ontology(
    entity_types=(EntityType(name="Person"), EntityType(name="Organization")),
    relation_types=(RelationType(name="WORKS_FOR", source=("Person",), target=("Organization",)),),
)
RETRY_FAST = 0.01


@pytest.fixture
def server() -> Iterator[LoopbackLLMServer]:
    with LoopbackLLMServer("anthropic") as srv:
        yield srv


def _extractor(server: LoopbackLLMServer, **kwargs: Any) -> TransportExtractor:
    kwargs.setdefault("timeout_s", 1.0)
    kwargs.setdefault("max_retries", 2)
    return TransportExtractor(
        AnthropicTransport(
            model="claude-test", api_key=TEST_API_KEY, base_url=server.base_url, **kwargs
        )
    )


def _extract(
    extractor: Extractor, episode: Episode = EPISODE, options: ExtractOptions = OPTIONS
) -> ExtractionOutcome:
    async def go() -> ExtractionOutcome:
        try:
            return await extractor.extract(episode, options)
        finally:
            await extractor.aclose()

    return run_sync(go)


def _failure(extractor: Extractor, options: ExtractOptions = OPTIONS) -> ExtractionFailed:
    with pytest.raises(ExtractionFailed) as err:
        _extract(extractor, options=options)
    assert isinstance(err.value.failure, FailureRecord)
    return err.value


def _msg(payload: Any, **kwargs: Any) -> Reply:
    return anthropic_message(payload if isinstance(payload, str) else json.dumps(payload), **kwargs)


def _listed_entities(request: ReceivedRequest) -> list[dict[str, Any]]:
    match = re.search(r"<entities>\n(.*?)\n</entities>", request.user_prompt or "", re.DOTALL)
    assert match, request.user_prompt
    return json.loads(match.group(1))


# -- clean, recovered and malformed structured output ------------------------------------------


def test_clean_json_both_stages(server: LoopbackLLMServer) -> None:
    server.enqueue(
        _msg(ENTITIES, input_tokens=11, output_tokens=22),
        _msg(EDGES, input_tokens=33, output_tokens=44),
    )
    outcome = _extract(_extractor(server))

    assert [(e.name, e.type, e.summary, e.quote) for e in outcome.result.entities] == [
        ("Alice", "Person", "Works for Acme.", "Alice"),
        ("Acme", "Organization", "Employs Alice.", "Acme"),
    ]
    assert [(e.source, e.target, e.relation, e.fact, e.quote) for e in outcome.result.edges] == [
        ("Alice", "Acme", "WORKS_FOR", "Alice works for Acme.", "Alice works for Acme")
    ]
    stats = outcome.stats
    assert stats.requests == 2
    assert (stats.input_tokens, stats.output_tokens) == (11 + 33, 22 + 44)
    assert stats.structured_output.model_dump() == {"clean": 2, "recovered": 0, "malformed": 0}
    assert stats.truncated.model_dump() == {"retry_succeeded": 0, "exhausted": 0}
    assert outcome.failures == ()
    assert (outcome.provider, outcome.model) == ("anthropic", "claude-test")
    assert [t.stage for t in outcome.transcript] == ["entities", "edges"]
    assert outcome.transcript[0].attempts[0].finish_reason == "end_turn"

    entity_req, edge_req = server.requests
    assert [r.path for r in server.requests] == ["/v1/messages", "/v1/messages"]
    assert all(r.model == "claude-test" for r in server.requests)
    assert (entity_req.max_tokens, edge_req.max_tokens) == (100, 60)
    assert "extracts ENTITIES" in (entity_req.system_prompt or "")
    assert "extracts RELATIONS" in (edge_req.system_prompt or "")
    assert EPISODE.body in (entity_req.user_prompt or "")
    assert _listed_entities(edge_req) == [
        {"name": "Alice", "type": "Person"},
        {"name": "Acme", "type": "Organization"},
    ]
    # The installed SDK sends the key as `authorization: Bearer`; ReceivedRequest reads either.
    assert all(r.api_key == TEST_API_KEY for r in server.requests)


def test_deterministic_responder_round_trip() -> None:
    with LoopbackLLMServer("anthropic", responder=anthropic_responder) as server:
        outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme", "Bob"]
    assert {(e.source, e.target) for e in outcome.result.edges} == {
        ("Alice", "Acme"),
        ("Alice", "Bob"),
    }
    assert outcome.stats.structured_output.clean == 2
    assert _listed_entities(server.requests[1]) == [
        {"name": n, "type": "Thing"} for n in ("Alice", "Acme", "Bob")
    ]


def test_recovered_json_fence_and_trailing_prose(server: LoopbackLLMServer) -> None:
    server.enqueue(
        _msg("Here you go:\n```json\n" + json.dumps(ENTITIES) + "\n```\n"),
        _msg(json.dumps(EDGES) + "\n\nI found one relation."),
    )
    outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert [e.relation for e in outcome.result.edges] == ["WORKS_FOR"]
    assert outcome.stats.structured_output.model_dump() == {
        "clean": 0,
        "recovered": 2,
        "malformed": 0,
    }


@pytest.mark.parametrize("stage", ["entities", "edges"])
def test_malformed_json_text(server: LoopbackLLMServer, stage: str) -> None:
    # Long and non-ASCII, to show the sidecar's raw body is the whole body, byte for byte.
    bad = _msg("Désolé, I cannot produce {that JSON " + "x" * 20_000, output_tokens=77)
    server.enqueue(*([_msg(ENTITIES)] if stage == "edges" else []), bad)

    err = _failure(_extractor(server))
    failure = err.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "malformed"
    assert failure.call_type == stage
    assert failure.raw_body == bad.body.decode("utf-8")
    assert failure.finish_reason == "end_turn"
    assert failure.completion_tokens == 77
    assert failure.max_tokens == (100 if stage == "entities" else 60)
    assert failure.chunk_key == EPISODE.name
    assert failure.model == "claude-test"
    assert err.stats.structured_output.malformed == 1
    assert len(server.requests) == (1 if stage == "entities" else 2)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"", b"[]", b"{}", b'{"type": "message", "content": "abc"}'],
    ids=["text", "empty", "array", "empty-object", "wrong-shape"],
)
def test_non_message_200_body_is_malformed(server: LoopbackLLMServer, body: bytes) -> None:
    server.enqueue(Reply(raw=body))
    failure = _failure(_extractor(server)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "malformed"
    assert failure.call_type == "entities"
    assert failure.raw_body == body.decode()
    assert len(server.requests) == 1  # a 200 is never retried by the SDK


# -- truncation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["entities", "edges"])
def test_truncation_then_success_doubles_max_tokens(server: LoopbackLLMServer, stage: str) -> None:
    cut = _msg('{"entities": [{"name": "Al', stop_reason="max_tokens", output_tokens=100)
    if stage == "entities":
        server.enqueue(cut, _msg(ENTITIES), _msg(EDGES))
    else:
        server.enqueue(_msg(ENTITIES), cut, _msg(EDGES))
    outcome = _extract(_extractor(server))

    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert len(outcome.result.edges) == 1
    first, retry = server.requests[:2] if stage == "entities" else server.requests[1:]
    budget = 100 if stage == "entities" else 60
    assert (first.max_tokens, retry.max_tokens) == (budget, 2 * budget)
    assert first.user_prompt == retry.user_prompt and first.system_prompt == retry.system_prompt
    assert outcome.stats.truncated.model_dump() == {"retry_succeeded": 1, "exhausted": 0}
    assert outcome.stats.requests == 3
    assert outcome.stats.structured_output.clean == 2
    transcript = {t.stage: t.attempts for t in outcome.transcript}
    assert [a.truncated for a in transcript[stage]] == [True, False]
    assert [a.max_tokens for a in transcript[stage]] == [budget, 2 * budget]


def test_truncation_exhausted_on_entities_is_fatal(server: LoopbackLLMServer) -> None:
    cut = _msg('{"entities": [', stop_reason="max_tokens", output_tokens=200)
    server.enqueue(cut, cut)
    err = _failure(_extractor(server))
    failure = err.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "truncation"
    assert failure.call_type == "entities"
    assert failure.max_tokens == 200
    assert failure.finish_reason == "max_tokens"
    assert failure.completion_tokens == 200
    assert json.loads(failure.raw_body)["stop_reason"] == "max_tokens"
    assert err.stats.truncated.model_dump() == {"retry_succeeded": 0, "exhausted": 1}
    assert [r.max_tokens for r in server.requests] == [100, 200]  # no edge call


def test_truncation_exhausted_on_edges_keeps_entities(server: LoopbackLLMServer) -> None:
    cut = _msg('{"edges": [', stop_reason="max_tokens", output_tokens=120)
    server.enqueue(_msg(ENTITIES), cut, cut)
    outcome = _extract(_extractor(server))

    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert outcome.result.edges == ()
    (failure,) = outcome.failures
    assert (failure.call_type, failure.classification) == ("edges", "truncation")
    assert failure.max_tokens == 120
    assert failure.finish_reason == "max_tokens"
    assert outcome.stats.truncated.exhausted == 1
    assert [r.max_tokens for r in server.requests] == [100, 60, 120]


# -- HTTP failures and retries -----------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 529, 520])
def test_retryable_status_then_success(server: LoopbackLLMServer, status: int) -> None:
    server.enqueue(anthropic_error(status, retry_after=RETRY_FAST), _msg(ENTITIES), _msg(EDGES))
    outcome = _extract(_extractor(server, max_retries=2))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert len(server.requests) == 3  # the server saw the extra request
    assert server.requests[0].user_prompt == server.requests[1].user_prompt
    assert outcome.stats.requests == 3  # what the server saw: the retried request counts


@pytest.mark.parametrize("stage", ["entities", "edges"])
@pytest.mark.parametrize("status", [500, 529])
def test_persistent_server_error_is_http_error(
    server: LoopbackLLMServer, stage: str, status: int
) -> None:
    error = anthropic_error(status, retry_after=RETRY_FAST)
    max_retries = 2
    server.enqueue(*([_msg(ENTITIES)] if stage == "edges" else []), *[error] * (max_retries + 1))
    failure = _failure(_extractor(server, max_retries=max_retries)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.call_type == stage
    assert failure.raw_body == error.body.decode()
    assert json.loads(failure.raw_body)["type"] == "error"
    assert failure.finish_reason is None
    assert failure.completion_tokens is None
    stage_requests = [
        r
        for r in server.requests
        if ("ENTITIES" in (r.system_prompt or "")) == (stage == "entities")
    ]
    assert len(stage_requests) == max_retries + 1
    assert server.queued == 0


@pytest.mark.parametrize(("status", "said", "requests"), [(500, "false", 1), (400, "true", 2)])
def test_the_servers_x_should_retry_decides_over_the_status(
    server: LoopbackLLMServer, status: int, said: str, requests: int
) -> None:
    """The SDK reads `x-should-retry` before the status (`_should_retry`); with its retries
    off, the transport had ignored it: a 500 the API said not to retry was sent three times."""
    error = anthropic_error(status, retry_after=RETRY_FAST, headers={"x-should-retry": said})
    server.enqueue(error, _msg(ENTITIES), _msg(EDGES))
    extractor = _extractor(server, max_retries=2)
    if said == "true":
        assert [e.name for e in _extract(extractor).result.entities] == ["Alice", "Acme"]
    else:
        assert _failure(extractor).failure.classification == "http_error"
    assert len([r for r in server.requests if "ENTITIES" in (r.system_prompt or "")]) == requests


def test_a_reply_cut_by_the_context_window_is_not_sent_again(server: LoopbackLLMServer) -> None:
    """`model_context_window_exceeded` is no budget the doubled retry can raise: the same input
    leaves the same room, so the retry had only paid for the same cut again."""
    cut = _msg('{"entities": [', stop_reason="model_context_window_exceeded", output_tokens=90)
    server.enqueue(cut, _msg(ENTITIES), _msg(EDGES))
    err = _failure(_extractor(server))
    assert isinstance(err.failure, FailureRecord)
    assert err.failure.classification == "truncation"
    assert err.failure.finish_reason == "model_context_window_exceeded"
    assert len(server.requests) == 1


def test_bad_request_is_not_retried(server: LoopbackLLMServer) -> None:
    error = anthropic_error(400, message="max_tokens: too large")
    server.enqueue(error, _msg(ENTITIES), _msg(EDGES))
    failure = _failure(_extractor(server, max_retries=2)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.raw_body == error.body.decode()
    assert len(server.requests) == 1


def test_timeout_is_http_error_after_bounded_attempts(server: LoopbackLLMServer) -> None:
    slow = dataclasses.replace(_msg(ENTITIES), delay_s=0.6)
    server.enqueue(slow, slow, slow)
    failure = _failure(_extractor(server, timeout_s=0.1, max_retries=1)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.call_type == "entities"
    assert failure.finish_reason is None
    assert failure.raw_body.startswith("anthropic timeout")  # said as one, not a reset
    assert len(server.requests) == 2  # max_retries + 1


@pytest.mark.parametrize("reason", ["refusal", "pause_turn"])
def test_a_refused_or_paused_reply_is_a_failure_not_an_empty_extraction(
    server: LoopbackLLMServer, reason: str
) -> None:
    server.enqueue(_msg({"entities": []}, stop_reason=reason))  # had scored as "found none"
    err = _failure(_extractor(server))
    assert isinstance(err.failure, FailureRecord)
    assert err.failure.classification == "malformed"
    assert err.failure.finish_reason == reason  # the sidecar says why
    assert len(server.requests) == 1


def test_a_reply_cut_off_by_the_context_window_is_truncation(server: LoopbackLLMServer) -> None:
    cut = _msg({"entities": []}, stop_reason="model_context_window_exceeded")
    server.enqueue(cut, cut)
    err = _failure(_extractor(server))
    assert isinstance(err.failure, FailureRecord)
    assert err.failure.classification == "truncation"
    assert err.stats.truncated.model_dump() == {"retry_succeeded": 0, "exhausted": 1}


def test_a_reply_without_usage_counts_no_tokens_as_an_openai_one_does(
    server: LoopbackLLMServer,
) -> None:
    for payload in (ENTITIES, EDGES):
        reply = _msg(payload)
        assert isinstance(reply.json, dict)
        del reply.json["usage"]  # a gateway's: the chunk had failed as malformed
        server.enqueue(reply)
    outcome = _extract(_extractor(server))
    assert outcome.result.entities and outcome.stats.input_tokens == 0


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_not_followed(server: LoopbackLLMServer, status: int) -> None:
    """The SDK's client had followed it: a 301/302 re-sent the POST as a bodiless GET, a
    307/308 the prompt to wherever it pointed, each counted as one request."""
    moved = Reply(status=status, headers={"location": f"{server.base_url}/elsewhere"}, raw=b"")
    server.enqueue(moved, _msg(ENTITIES), _msg(EDGES))
    err = _failure(_extractor(server, max_retries=0))
    assert isinstance(err.failure, FailureRecord)
    assert err.failure.classification == "http_error"
    assert err.failure.raw_body == f"anthropic HTTP {status}"
    assert len(server.requests) == 1 and err.stats.requests == 1


def test_a_base_urls_password_reaches_no_log_line(
    server: LoopbackLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK logs each request's URL at DEBUG, and its httpx at INFO, user info and all: a
    gateway's password in `base_url` went into the run's log on every call."""
    server.enqueue(_msg(ENTITIES), _msg(EDGES))
    base = server.base_url.replace("://", "://gateway:pw-ANTH-URL-9c2e@", 1)
    caplog.set_level("DEBUG")
    outcome = _extract(
        TransportExtractor(
            AnthropicTransport(model="claude-test", api_key=TEST_API_KEY, base_url=base)
        )
    )
    assert outcome.result.entities  # the call went through, logged
    assert server.requests[0].headers["authorization"].startswith("Basic ")  # the URL's auth
    logged = {r.name for r in caplog.records if "HTTP Request: POST" in r.getMessage()}
    assert {"anthropic._base_client"} <= logged and len(logged) >= 2  # the SDK and its httpx
    basic = base64.b64encode(b"gateway:pw-ANTH-URL-9c2e").decode()
    assert "pw-ANTH-URL-9c2e" not in caplog.text and basic not in caplog.text


def test_the_whole_call_is_bounded_by_the_timeout() -> None:
    """The SDK's timeout bounds each read: a server sending its body a byte at a time, each
    within the timeout, would hold the call open for as long as it liked."""
    body = json.dumps(anthropic_message(json.dumps(ENTITIES)).json).encode()

    # over 10 s in all, each byte well within the 0.5 s timeout: far past the bound below, which
    # leaves a loaded machine seconds of slack
    with raw_http_server(trickled_json(body, per_byte_s=0.04)) as base:
        transport = AnthropicTransport(
            model="claude-test", api_key=TEST_API_KEY, base_url=base, timeout_s=0.5, max_retries=0
        )
        import anthropic  # noqa: F401 - its import (~1.5 s, on first use) is not the call's time

        started = time.perf_counter()
        failure = _failure(TransportExtractor(transport)).failure
        elapsed = time.perf_counter() - started
    assert isinstance(failure, FailureRecord)
    assert failure.raw_body.startswith("anthropic timeout")
    assert elapsed < 4.0, elapsed


def test_a_retry_after_of_an_hour_waits_only_the_cap(server: LoopbackLLMServer) -> None:
    # The SDK's own retries would sleep for whatever Retry-After says, up to ~50 days.
    server.enqueue(anthropic_error(529, retry_after=3600), _msg(ENTITIES), _msg(EDGES))
    extractor = _extractor(server, max_retry_after_s=0.05)

    async def go() -> ExtractionOutcome:
        try:
            return await asyncio.wait_for(extractor.extract(EPISODE, OPTIONS), 20.0)
        finally:
            await extractor.aclose()

    outcome = run_sync(go)
    assert outcome.stats.requests == 3
    assert server.requests[1].received_at - server.requests[0].received_at < 1.0


def test_retry_after_is_honoured_over_backoff(server: LoopbackLLMServer) -> None:
    # The exponential backoff alone would wait ~5 s; Retry-After says 10 ms, on a rate limit, a
    # server error and an overload alike.
    server.enqueue(
        anthropic_error(429, retry_after=RETRY_FAST),
        anthropic_error(500, retry_after=RETRY_FAST),
        anthropic_error(529, headers={"retry-after-ms": "10"}),
        _msg(ENTITIES),
        _msg(EDGES),
    )
    outcome = _extract(_extractor(server, backoff_s=5.0, max_backoff_s=5.0, max_retries=3))
    assert outcome.stats.requests == 5
    arrivals = [r.received_at for r in server.requests[:4]]
    assert all(b - a < 1.0 for a, b in itertools.pairwise(arrivals))


def test_a_reset_connection_is_retried_then_succeeds(server: LoopbackLLMServer) -> None:
    server.enqueue(Reply(reset=True), _msg(ENTITIES), _msg(EDGES))
    outcome = _extract(_extractor(server, backoff_s=0.01))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert len(server.requests) == 3 and outcome.stats.requests == 3


@pytest.mark.parametrize(
    "broken",
    [Reply(reset=True), dataclasses.replace(_msg(ENTITIES), truncate_body_at=20)],
    ids=["reset", "truncated"],
)
def test_a_connection_that_keeps_failing_is_one_typed_failure(
    server: LoopbackLLMServer, broken: Reply
) -> None:
    server.enqueue(broken, broken, broken)
    error = _failure(_extractor(server, max_retries=2, backoff_s=0.01))
    failure = error.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error" and failure.call_type == "entities"
    assert failure.raw_body.startswith("anthropic connection failed")
    assert TEST_API_KEY not in failure.raw_body
    assert len(server.requests) == 3  # max_retries + 1, then no more
    # Each was seen, so each counts: a reset is not a connection never made (which the SDK's
    # aiohttp client would call a ConnectError too; this pins the transport new_client builds).
    assert isinstance(error.stats, CallStats) and error.stats.requests == 3


def test_a_refused_connection_is_retried_and_counts_no_request() -> None:
    """No server saw it: the report's requests are what a server saw (through the SDK)."""
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = AnthropicTransport(
        model="claude-test",
        api_key=TEST_API_KEY,
        base_url=f"http://127.0.0.1:{port}",
        timeout_s=1.0,
        max_retries=1,
        backoff_s=0.01,
    )
    error = _failure(TransportExtractor(transport))
    assert isinstance(error.failure, FailureRecord)
    assert error.failure.raw_body.startswith("anthropic connection failed: ConnectError")
    assert isinstance(error.stats, CallStats) and error.stats.requests == 0


def test_an_error_body_that_echoes_the_key_is_redacted(server: LoopbackLLMServer) -> None:
    server.enqueue(Reply(status=400, raw=f'{{"error": "bad key {TEST_API_KEY}"}}'.encode()))
    failure = _failure(_extractor(server, max_retries=0)).failure
    assert isinstance(failure, FailureRecord)
    assert TEST_API_KEY not in failure.raw_body and "bad key ***" in failure.raw_body


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"content": null, "usage": null}',
        # A negative count had become negative tokens, and a negative cost, in the report.
        _msg(ENTITIES, input_tokens=-5).body,
        # A count too large for an int had raised OverflowError, which stopped the whole run.
        _msg(ENTITIES, input_tokens=12345).body.replace(b"12345", b"1e400"),
    ],
)
def test_a_broken_200_reply_is_malformed(server: LoopbackLLMServer, body: bytes) -> None:
    server.enqueue(Reply(raw=body))
    failure = _failure(_extractor(server, max_retries=0)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "malformed"


# -- ontology regimes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "entity_heading", "relation_heading"),
    [
        ("strict", "Allowed entity types (closed list)", "Allowed relation types (closed list"),
        ("open", "Suggested entity types", "Suggested relation types"),
    ],
)
def test_ontology_reaches_the_system_prompt(
    server: LoopbackLLMServer, mode: Any, entity_heading: str, relation_heading: str
) -> None:
    server.enqueue(_msg(ENTITIES), _msg(EDGES))
    _extract(_extractor(server), options=ExtractOptions.for_mode(mode, ONTOLOGY))
    entity_system = server.requests[0].system_prompt or ""
    edge_system = server.requests[1].system_prompt or ""
    assert f"{entity_heading}:\n- Person\n- Organization" in entity_system
    assert relation_heading in edge_system
    assert "- WORKS_FOR (Person -> Organization)" in edge_system
    other = "Suggested" if mode == "strict" else "closed list"
    assert other not in entity_system and other not in edge_system


def test_freeform_prompt_has_no_vocabulary(server: LoopbackLLMServer) -> None:
    server.enqueue(_msg(ENTITIES), _msg(EDGES))
    _extract(_extractor(server), options=ExtractOptions())
    for request in server.requests:
        assert "closed list" not in (request.system_prompt or "")
        assert "Suggested" not in (request.system_prompt or "")


# -- concurrency, loops, specs ------------------------------------------------------------------

NAMES = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi")
DELAY_S = 0.2


def _max_in_flight(requests: list[ReceivedRequest], delay_s: float) -> int:
    """Most requests the server held at once: each is busy for [received_at, +delay_s)."""
    events = sorted(
        [(r.received_at, 1) for r in requests] + [(r.received_at + delay_s, -1) for r in requests],
        key=lambda e: (e[0], e[1]),  # an end sorts before a start at the same instant
    )
    current = peak = 0
    for _t, step in events:
        current += step
        peak = max(peak, current)
    return peak


def test_extract_all_bounds_requests_in_flight() -> None:
    def slow(request: ReceivedRequest) -> Reply:
        return dataclasses.replace(anthropic_responder(request), delay_s=DELAY_S)

    episodes = [Episode(name=f"ep-{i}", body=f"{n} works at Acme.") for i, n in enumerate(NAMES)]
    with LoopbackLLMServer("anthropic", responder=slow) as server:
        extractor = _extractor(server, timeout_s=2.0)

        async def go() -> list[Any]:
            try:
                return await extract_all(extractor, episodes, OPTIONS, concurrency=4)
            finally:
                await extractor.aclose()

        runs = run_sync(go)
    assert len(server.requests) == 2 * len(episodes)
    assert 2 <= _max_in_flight(server.requests, DELAY_S) <= 4
    assert [r.episode.name for r in runs] == [e.name for e in episodes]
    assert all(r.ok for r in runs)
    assert [[e.name for e in r.outcome.result.entities] for r in runs if r.outcome] == [
        [n, "Acme"] for n in NAMES
    ]


def test_one_transport_across_event_loops(server: LoopbackLLMServer) -> None:
    extractor = _extractor(server)
    server.enqueue(_msg(ENTITIES), _msg(EDGES), _msg(ENTITIES), _msg(EDGES))
    first = run_sync(lambda: extractor.extract(EPISODE, OPTIONS))
    second = _extract(extractor)  # a second asyncio.run must not reuse the closed loop's client
    assert first.result == second.result
    assert len(server.requests) == 4


def test_anthropic_spec_needs_the_api_key() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        build_extractor(parse_backend_spec("anthropic"))


def test_anthropic_spec_with_env_key(
    server: LoopbackLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    server.enqueue(_msg(ENTITIES), _msg(EDGES))
    extractor = build_extractor(
        parse_backend_spec("anthropic:model=claude-spec-test"),
        anthropic_base_url=server.base_url,
        timeout_s=1.0,
    )
    assert (extractor.provider, extractor.model) == ("anthropic", "claude-spec-test")
    outcome = _extract(extractor)
    assert len(outcome.result.edges) == 1
    assert [r.model for r in server.requests] == ["claude-spec-test"] * 2
    assert all(r.api_key == TEST_API_KEY for r in server.requests)


def test_base_url_from_environment(
    server: LoopbackLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", server.base_url)
    server.enqueue(_msg(ENTITIES), _msg(EDGES))
    extractor = TransportExtractor(AnthropicTransport(model="m", api_key=TEST_API_KEY))
    assert len(_extract(extractor).result.entities) == 2
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "url",
    [
        "htps://u:PW-SECRET@127.0.0.1:1",
        "u:PW-SECRET@127.0.0.1:8000/v1",  # no scheme: the URL redaction had let it through
        "http:/u:PW-SECRET@proxy.local",
        "http://u:PW-SECRET@h:port/",
    ],
)
def test_a_mistyped_base_url_is_refused_before_any_call(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    """A typo in EVALS_ANTHROPIC_BASE_URL had run, every call failing as an error rate (exit 0):
    the transport, the judge and the plan each refuse it, naming the variable."""
    from evals_pipeline.core.judge.cache import JudgeCache
    from evals_pipeline.core.judge.client import JudgeClient
    from evals_pipeline.core.plan import plan_run

    monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", url)
    for build in (
        lambda: AnthropicTransport(model="m", api_key=TEST_API_KEY),
        lambda: JudgeClient(JudgeCache("unused.jsonl"), api_key=TEST_API_KEY),
    ):
        with pytest.raises(ConfigError, match="EVALS_ANTHROPIC_BASE_URL '") as err:
            build()
        assert "SECRET" not in str(err.value)
    config = make_config(Path("."), {"oracle": "oracle", "a": "anthropic:model=m"})
    with pytest.raises(ConfigError, match="EVALS_ANTHROPIC_BASE_URL"):
        plan_run(config, [], None, corpus_path="c", corpus_digest="d", environ={})
    with pytest.raises(ConfigError, match="base_url 'htps://x'"):
        AnthropicTransport(model="m", api_key=TEST_API_KEY, base_url="htps://x")


@pytest.mark.parametrize("status", [200, 529])
def test_a_body_past_the_ceiling_is_refused_through_the_sdk(
    server: LoopbackLLMServer, status: int
) -> None:
    """The SDK's client runs over a capped transport (of the httpx fork it uses): a reply or
    an error body past `max_body_bytes` fails typed, not retried, and none of it is kept."""
    pad = "x" * 200_000
    huge = (
        _msg({"entities": [], "pad": pad}) if status == 200 else Reply(status=529, raw=pad.encode())
    )
    server.enqueue(huge, huge, huge)
    failure = _failure(_extractor(server, max_body_bytes=100_000)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.raw_body.startswith("anthropic response body over 100,000 bytes")
    assert "xxxx" not in failure.raw_body
    assert len(server.requests) == 1


def _gzipped(reply: Reply) -> Reply:
    headers = {**reply.headers, "Content-Encoding": "gzip"}
    return dataclasses.replace(reply, json=None, raw=gzip.compress(reply.body), headers=headers)


def test_a_gzipped_message_is_read_through_the_sdk(server: LoopbackLLMServer) -> None:
    """The SDK's capped transport asks for gzip, deflate and inflates them itself; the SDK
    (httpx2) reads the inflated Message and does not decode it again."""
    server.enqueue(_gzipped(_msg(ENTITIES)), _gzipped(_msg(EDGES)))
    outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert all(r.headers["accept-encoding"] == "gzip, deflate" for r in server.requests)


def test_a_gzipped_message_with_a_non_ascii_header_is_read(server: LoopbackLLMServer) -> None:
    """A latin-1 header value (allowed on the wire) survives the headers rebuilt after
    inflating; built from text, it had raised UnicodeEncodeError inside the SDK's send."""
    headers = {"X-Served-By": "caf\u00e9-proxy"}
    server.enqueue(
        *(_gzipped(dataclasses.replace(_msg(p), headers=headers)) for p in (ENTITIES, EDGES))
    )
    outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]


@pytest.mark.parametrize("status", [200, 529])
def test_a_gzip_bomb_is_cut_off_through_the_sdk(server: LoopbackLLMServer, status: int) -> None:
    """A reply or an error body that is small on the wire but past `max_body_bytes` inflated
    fails typed, not retried (the SDK's httpx2 had inflated it whole)."""
    pad = " " * 20_000_000
    huge = (
        _msg({"entities": [], "pad": pad}) if status == 200 else Reply(status=529, raw=pad.encode())
    )
    bomb = _gzipped(huge)
    assert len(bomb.body) < 100_000
    server.enqueue(bomb, bomb, bomb)
    failure = _failure(_extractor(server, max_body_bytes=100_000)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.raw_body.startswith("anthropic response body, decoded, over 100,000 bytes")
    assert len(server.requests) == 1


# -- proxies and gateway credentials (found by review) ----------------------------------------


def test_requests_go_through_the_environment_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given a transport of ours, httpx reads no proxy variable: the SDK's calls had gone
    straight to the host, failing where only the proxy reaches it."""
    clear_proxy_env(monkeypatch)
    # The loopback server stands in for the proxy: it records the request line it is sent.
    with LoopbackLLMServer("anthropic", responder=anthropic_responder) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        target = "http://models.example.invalid"
        transport = AnthropicTransport(model="m", api_key=TEST_API_KEY, base_url=target)
        outcome = _extract(TransportExtractor(transport))
    assert outcome.result.entities
    assert [r.path for r in proxy.requests] == [f"{target}/v1/messages"] * 2  # absolute form


def test_no_proxy_exempts_the_anthropic_host(
    server: LoopbackLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server.enqueue(_msg(ENTITIES), _msg(EDGES))
    assert _extract(_extractor(server)).result.entities
    assert [r.path for r in server.requests] == ["/v1/messages"] * 2


GATEWAY_PASSWORD = "pw-gateway-51d7"
GATEWAY_BASIC = base64.b64encode(f"gw:{GATEWAY_PASSWORD}".encode()).decode()


@pytest.mark.parametrize("status", [500, 200])
def test_a_body_echoing_the_base_urls_basic_auth_is_redacted(
    server: LoopbackLLMServer, status: int
) -> None:
    """A gateway echoing its request headers showed the URL's password, base64 in the Basic
    header, in the failure sidecar: only the API key had been cut (the OpenAI-compatible
    transport cut both). An error body, and a 200 body that is not a Message."""
    echoed = (
        f'{{"headers": {{"authorization": "Basic {GATEWAY_BASIC}"}}, "pw": "{GATEWAY_PASSWORD}"}}'
    )
    server.enqueue(Reply(status=status, raw=echoed.encode()))
    base = server.base_url.replace("://", f"://gw:{GATEWAY_PASSWORD}@", 1)
    transport = AnthropicTransport(model="m", api_key=TEST_API_KEY, base_url=base, max_retries=0)
    failure = _failure(TransportExtractor(transport)).failure
    assert server.requests[0].headers["authorization"] == f"Basic {GATEWAY_BASIC}"  # as sent
    assert GATEWAY_BASIC not in failure.raw_body and GATEWAY_PASSWORD not in failure.raw_body
    assert failure.raw_body.count("***") == 2


def test_an_error_body_echoing_the_proxys_credentials_is_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clear_proxy_env(monkeypatch)
    proxy_basic = base64.b64encode(f"pu:{GATEWAY_PASSWORD}".encode()).decode()
    with LoopbackLLMServer("anthropic") as proxy:
        proxy.enqueue(Reply(status=407, raw=f'{{"saw": "Basic {proxy_basic}"}}'.encode()))
        monkeypatch.setenv(
            "HTTP_PROXY", proxy.base_url.replace("://", f"://pu:{GATEWAY_PASSWORD}@")
        )
        transport = AnthropicTransport(
            model="m", api_key=TEST_API_KEY, base_url="http://models.example.invalid", max_retries=0
        )
        failure = _failure(TransportExtractor(transport)).failure
    assert proxy.requests[0].headers["proxy-authorization"] == f"Basic {proxy_basic}"
    assert proxy_basic not in failure.raw_body and '"saw": "Basic ***"' in failure.raw_body


def test_the_judge_redacts_the_base_urls_basic_auth_too(server: LoopbackLLMServer) -> None:
    from evals_pipeline.core.errors import TransportError
    from evals_pipeline.core.judge.cache import JudgeCache
    from evals_pipeline.core.judge.client import JudgeClient

    server.enqueue(Reply(status=400, raw=f'{{"saw": "Basic {GATEWAY_BASIC}"}}'.encode()))
    base = server.base_url.replace("://", f"://gw:{GATEWAY_PASSWORD}@", 1)
    judge = JudgeClient(JudgeCache("unused.jsonl"), api_key=TEST_API_KEY, base_url=base)

    async def go() -> None:
        try:
            await judge.judge("p", "system", "user", ExtractionResult)
        finally:
            await judge.aclose()

    with pytest.raises(TransportError) as err:
        run_sync(go)
    assert GATEWAY_BASIC not in (err.value.body or "") and "Basic ***" in (err.value.body or "")


@pytest.mark.parametrize(
    "reply",
    [
        Reply(json={"echo": {"x-api-key": TEST_API_KEY}}),  # a 200 that is not a Message
        _msg(f"I was called with {TEST_API_KEY}"),  # no JSON in the reply
        _msg(f"key {TEST_API_KEY}", stop_reason="max_tokens"),  # cut off, and again
    ],
    ids=["not-a-message", "unparsed", "truncated"],
)
def test_a_200_body_that_echoes_the_key_reaches_no_sidecar(
    server: LoopbackLLMServer, reply: Reply
) -> None:
    """A 200 that failed to parse, or was cut off, had gone into the failure record as
    received, key and all."""
    server.enqueue(reply, reply)
    failure = _failure(_extractor(server, max_retries=0)).failure
    assert TEST_API_KEY not in failure.raw_body and "***" in failure.raw_body


def test_a_reply_that_echoes_the_key_is_recorded_without_it(
    server: LoopbackLLMServer, tmp_path: Path
) -> None:
    """A reply's text is what a cassette keeps: a key echoed into it had been recorded."""
    from evals_pipeline.core.cassettes.record import RecordingExtractor

    leaked = json.loads(json.dumps(ENTITIES))
    leaked["entities"][0]["summary"] = f"Called with {TEST_API_KEY}."
    server.enqueue(_msg(leaked), _msg(EDGES))
    cassette = tmp_path / "c.jsonl"
    outcome = _extract(RecordingExtractor(_extractor(server), cassette))
    assert outcome.result.entities[0].summary == "Called with ***."
    assert TEST_API_KEY not in cassette.read_text()


def test_a_lone_surrogate_in_a_reply_is_recorded_as_the_replacement_character(
    server: LoopbackLLMServer, tmp_path: Path
) -> None:
    """Half an emoji escaped in the body's JSON (`\\ud83d`) decodes to text no UTF-8 file
    holds: recording it had raised a pydantic serialisation error out of the run."""
    from evals_pipeline.core.cassettes.record import RecordingExtractor

    message = _msg(json.dumps(ENTITIES) + " \ud83d")  # after the JSON: in the text itself
    server.enqueue(Reply(raw=json.dumps(message.json).encode()), _msg(EDGES))
    cassette = tmp_path / "c.jsonl"
    outcome = _extract(RecordingExtractor(_extractor(server), cassette))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert ']} \ufffd"' in cassette.read_text(encoding="utf-8")  # the text as recorded
