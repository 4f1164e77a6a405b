"""The OpenAI-compatible backend end to end, over 127.0.0.1 TCP and over a Unix socket.

Every test scripts a LoopbackLLMServer speaking chat completions and runs the shared extraction
flow through `OpenAICompatTransport` (httpx plus tenacity retries), so timeouts, resets and short
bodies are real socket events, not mocks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import gzip
import itertools
import json
import re
import shutil
import socket
import ssl
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

from evals_pipeline.core.cassettes.record import RecordingExtractor
from evals_pipeline.core.cassettes.sidecar import sidecar_path
from evals_pipeline.core.errors import ExtractionFailed
from evals_pipeline.core.extractors.base import Extractor, TransportExtractor
from evals_pipeline.core.extractors.openai_compat import OpenAICompatTransport, _transport_failure
from evals_pipeline.core.extractors.specs import build_extractor, parse_backend_spec
from evals_pipeline.core.models import CallStats, Episode, ExtractionOutcome, FailureRecord
from evals_pipeline.core.ontology import EntityType, Ontology, RelationType
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline.core.runner import extract_all, run_sync
from evals_pipeline_tests.conftest import TEST_OAI_KEY
from evals_pipeline_tests.support.deterministic_backend import openai_responder
from evals_pipeline_tests.support.hermetic import clear_proxy_env
from evals_pipeline_tests.support.llm_servers import (
    LoopbackLLMServer,
    ReceivedRequest,
    Reply,
    openai_completion,
    openai_error,
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
def uds_dir() -> Iterator[Path]:
    """A short directory under /tmp: AF_UNIX paths are limited to ~107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="oai", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _start(kind: str, uds_dir: Path, **kwargs: Any) -> LoopbackLLMServer:
    uds_path = uds_dir / "oai.sock" if kind == "uds" else None
    return LoopbackLLMServer("openai", uds_path=uds_path, **kwargs).start()


@pytest.fixture(params=["tcp", "uds"])
def server(request: pytest.FixtureRequest, uds_dir: Path) -> Iterator[LoopbackLLMServer]:
    srv = _start(request.param, uds_dir)
    try:
        yield srv
    finally:
        srv.stop()


def _extractor(server: LoopbackLLMServer, **kwargs: Any) -> TransportExtractor:
    kwargs.setdefault("timeout_s", 1.0)
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("max_backoff_s", 0.05)
    kwargs.setdefault("api_key", TEST_OAI_KEY)
    uds = str(server.uds_path) if server.uds_path is not None else None
    return TransportExtractor(
        OpenAICompatTransport(url=server.base_url, uds_path=uds, model="m-test", **kwargs)
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


def _completion(payload: Any, **kwargs: Any) -> Reply:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return openai_completion(text, **kwargs)


def _listed_entities(request: ReceivedRequest) -> list[dict[str, Any]]:
    match = re.search(r"<entities>\n(.*?)\n</entities>", request.user_prompt or "", re.DOTALL)
    assert match, request.user_prompt
    return json.loads(match.group(1))


def _is_entity_call(request: ReceivedRequest) -> bool:
    return "extracts ENTITIES" in (request.system_prompt or "")


# -- clean, recovered and malformed structured output ------------------------------------------


def test_clean_json_both_stages(server: LoopbackLLMServer) -> None:
    server.enqueue(
        _completion(ENTITIES, prompt_tokens=11, completion_tokens=22),
        _completion(EDGES, prompt_tokens=33, completion_tokens=44),
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
    expected_provider = "oai-uds" if server.uds_path is not None else "oai-http"
    assert (outcome.provider, outcome.model) == (expected_provider, "m-test")
    assert outcome.transcript[0].attempts[0].finish_reason == "stop"

    entity_req, edge_req = server.requests
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
    assert all(r.model == "m-test" for r in server.requests)
    assert [m["role"] for m in entity_req.messages] == ["system", "user"]
    assert entity_req.json["temperature"] == 0.0
    assert (entity_req.max_tokens, edge_req.max_tokens) == (100, 60)
    assert _is_entity_call(entity_req) and not _is_entity_call(edge_req)
    assert EPISODE.body in (entity_req.user_prompt or "")
    assert _listed_entities(edge_req) == [
        {"name": "Alice", "type": "Person"},
        {"name": "Acme", "type": "Organization"},
    ]
    assert all(r.headers.get("authorization") == f"Bearer {TEST_OAI_KEY}" for r in server.requests)
    assert server.connections == 1  # keep-alive: both calls share one connection


def test_no_key_sends_no_authorization(server: LoopbackLLMServer) -> None:
    server.enqueue(_completion(ENTITIES), _completion(EDGES))
    _extract(_extractor(server, api_key=None))
    assert all("authorization" not in r.headers for r in server.requests)


def test_deterministic_responder_round_trip(uds_dir: Path) -> None:
    srv = _start("uds", uds_dir, responder=openai_responder)
    try:
        outcome = _extract(_extractor(srv))
    finally:
        srv.stop()
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme", "Bob"]
    assert {(e.source, e.target) for e in outcome.result.edges} == {
        ("Alice", "Acme"),
        ("Alice", "Bob"),
    }


def test_recovered_json_fence_and_trailing_prose(server: LoopbackLLMServer) -> None:
    server.enqueue(
        _completion("```json\n" + json.dumps(ENTITIES) + "\n```"),
        _completion(json.dumps(EDGES) + "\nThat is the only relation."),
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
    bad = _completion("Désolé: {entities: [Alice] " + "y" * 20_000, completion_tokens=55)
    server.enqueue(*([_completion(ENTITIES)] if stage == "edges" else []), bad)

    err = _failure(_extractor(server))
    failure = err.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "malformed"
    assert failure.call_type == stage
    assert failure.raw_body == bad.body.decode("utf-8")
    assert failure.finish_reason == "stop"
    assert failure.completion_tokens == 55
    assert failure.max_tokens == (100 if stage == "entities" else 60)
    assert failure.chunk_key == EPISODE.name
    assert failure.model == "m-test"
    assert err.stats.structured_output.malformed == 1
    assert len(server.requests) == (1 if stage == "entities" else 2)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"choices": []}',
        b'{"choices": [{"finish_reason": "stop"}]}',
        b'{"choices": [{"message": {"content": "{}"}}], "usage": {"prompt_tokens": "many"}}',
        b'{"choices": [{"message": {"content": "{}"}}], "usage": "lots"}',
        b'{"choices": [{"message": {"content": {"entities": []}}}]}',
        # A negative count had become negative tokens, and a negative cost, in the report.
        b'{"choices": [{"message": {"content": "{}"}}], "usage": {"completion_tokens": -7}}',
    ],
    ids=[
        "text",
        "no-choice",
        "no-message",
        "bad-usage-count",
        "bad-usage",
        "content-object",
        "negative-usage-count",
    ],
)
def test_non_completion_200_body_is_malformed(server: LoopbackLLMServer, body: bytes) -> None:
    server.enqueue(Reply(raw=body))
    failure = _failure(_extractor(server)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "malformed"
    assert failure.call_type == "entities"
    assert failure.raw_body == body.decode()
    assert len(server.requests) == 1  # a 200 is never retried


# -- truncation (finish_reason "length") --------------------------------------------------------


@pytest.mark.parametrize("stage", ["entities", "edges"])
def test_truncation_then_success_doubles_max_tokens(server: LoopbackLLMServer, stage: str) -> None:
    cut = _completion('{"edges": [{"sou', finish_reason="length", completion_tokens=60)
    if stage == "entities":
        server.enqueue(cut, _completion(ENTITIES), _completion(EDGES))
    else:
        server.enqueue(_completion(ENTITIES), cut, _completion(EDGES))
    outcome = _extract(_extractor(server))

    assert len(outcome.result.entities) == 2 and len(outcome.result.edges) == 1
    first, retry = server.requests[:2] if stage == "entities" else server.requests[1:]
    budget = 100 if stage == "entities" else 60
    assert (first.max_tokens, retry.max_tokens) == (budget, 2 * budget)
    assert first.messages == retry.messages
    assert outcome.stats.truncated.model_dump() == {"retry_succeeded": 1, "exhausted": 0}
    assert outcome.stats.requests == 3
    transcript = {t.stage: t.attempts for t in outcome.transcript}
    assert [(a.finish_reason, a.truncated) for a in transcript[stage]] == [
        ("length", True),
        ("stop", False),
    ]


def test_a_pooled_connection_the_server_closed_is_no_request_and_spends_no_retry() -> None:
    """A server that closes after each whole reply without saying `Connection: close` (its
    keep-alive ran out): the edges request, written to the dead pooled connection, never
    left; it had been counted as a request the server saw, and failed with retries=0."""
    bodies: list[bytes] = []

    def answer(conn: socket.socket, head: bytes) -> None:
        found = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
        assert found is not None
        body = head.split(b"\r\n\r\n", 1)[1]
        while len(body) < int(found.group(1)):
            body += conn.recv(65536)
        bodies.append(body)
        reply = openai_completion(json.dumps(ENTITIES if len(bodies) == 1 else EDGES))
        data = json.dumps(reply.json).encode()
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
        )  # and the server closes the connection

    with raw_http_server(answer) as base:
        transport = OpenAICompatTransport(url=f"{base}/v1/chat/completions", max_retries=0)
        outcome = _extract(TransportExtractor(transport))
    assert len(outcome.result.edges) == 1
    assert outcome.stats.requests == len(bodies) == 2


def test_a_filtered_reply_is_a_failure_not_an_empty_extraction(server: LoopbackLLMServer) -> None:
    """`{"entities": []}` under finish_reason content_filter had scored as a clean chunk in
    which the model found nothing."""
    server.enqueue(_completion({"entities": []}, finish_reason="content_filter"))
    err = _failure(_extractor(server))
    assert isinstance(err.failure, FailureRecord)
    assert err.failure.classification == "malformed"
    assert err.failure.finish_reason == "content_filter"  # the sidecar says why
    assert (err.stats.requests, err.stats.output_tokens) == (1, 20)  # paid for: counted
    assert '"finish_reason": "content_filter"' in err.failure.raw_body
    assert len(server.requests) == 1  # not retried: it would be filtered again


def test_a_refusal_is_no_answer_not_a_malformed_reply(server: LoopbackLLMServer) -> None:
    """Chat Completions sends a refusal as content null, its text in `message.refusal`, under
    finish_reason "stop": it had been counted a malformed JSON reply, labelled `stop`."""
    refusal = _completion("")
    message = refusal.json["choices"][0]["message"]  # type: ignore[index]
    message.update(content=None, refusal="I can't help with that.")
    server.enqueue(refusal)
    err = _failure(_extractor(server))
    assert isinstance(err.failure, FailureRecord)
    assert err.failure.finish_reason == "refusal"  # the sidecar says why
    assert err.stats.structured_output.malformed == 0  # no JSON failure: no answer at all
    assert "I can't help with that." in err.failure.raw_body
    assert len(server.requests) == 1  # not retried: it would be refused again


@pytest.mark.parametrize(("status", "said", "requests"), [(500, "false", 1), (400, "true", 2)])
def test_the_servers_x_should_retry_decides_over_the_status(
    server: LoopbackLLMServer, status: int, said: str, requests: int
) -> None:
    """Both SDKs obey `x-should-retry` before the status; it had been ignored: a 500 the
    server said not to retry was sent three times, a 400 it said to retry failed at once."""
    error = openai_error(status, retry_after=RETRY_FAST, headers={"x-should-retry": said})
    server.enqueue(error, _completion(ENTITIES), _completion(EDGES))
    extractor = _extractor(server, max_retries=2)
    if said == "true":
        outcome = _extract(extractor)
        assert outcome.stats.requests == 3  # the retried request, then edges
    else:
        assert _failure(extractor).failure.classification == "http_error"
    assert len([r for r in server.requests if "ENTITIES" in (r.system_prompt or "")]) == requests


def test_a_malformed_retry_after_truncation_recovered_nothing(server: LoopbackLLMServer) -> None:
    """The report reads `retry_succeeded` as "the doubled budget saved the call": a retry that
    comes back unparseable is a malformed reply, not a recovery."""
    cut = _completion('{"entities": [', finish_reason="length", completion_tokens=100)
    server.enqueue(cut, _completion("not json at all"))
    err = _failure(_extractor(server))
    assert isinstance(err.failure, FailureRecord)
    assert err.failure.classification == "malformed"
    assert err.failure.max_tokens == 200
    assert err.stats.truncated.model_dump() == {"retry_succeeded": 0, "exhausted": 0}
    assert err.stats.structured_output.malformed == 1


def test_truncation_exhausted_on_entities_is_fatal(server: LoopbackLLMServer) -> None:
    first = _completion('{"entities": [', finish_reason="length", completion_tokens=100)
    second = _completion('{"entities": [{', finish_reason="length", completion_tokens=200)
    server.enqueue(first, second)
    err = _failure(_extractor(server))
    failure = err.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "truncation"
    assert failure.call_type == "entities"
    assert failure.max_tokens == 200
    assert failure.finish_reason == "length"
    assert failure.completion_tokens == 200
    assert failure.raw_body == second.body.decode()
    assert err.stats.truncated.model_dump() == {"retry_succeeded": 0, "exhausted": 1}
    assert [r.max_tokens for r in server.requests] == [100, 200]


def test_truncation_exhausted_on_edges_keeps_entities(server: LoopbackLLMServer) -> None:
    cut = _completion('{"edges": [', finish_reason="length", completion_tokens=120)
    server.enqueue(_completion(ENTITIES), cut, cut)
    outcome = _extract(_extractor(server))

    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert outcome.result.edges == ()
    (failure,) = outcome.failures
    assert (failure.call_type, failure.classification) == ("edges", "truncation")
    assert (failure.max_tokens, failure.finish_reason) == (120, "length")
    assert outcome.stats.truncated.exhausted == 1
    assert [r.max_tokens for r in server.requests] == [100, 60, 120]


# -- HTTP failures and retries ------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 529, 503, 408, 501, 520])
def test_retryable_status_then_success(server: LoopbackLLMServer, status: int) -> None:
    server.enqueue(
        openai_error(status, retry_after=RETRY_FAST), _completion(ENTITIES), _completion(EDGES)
    )
    outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert len(server.requests) == 3  # the server saw the extra request
    assert server.requests[0].messages == server.requests[1].messages
    assert outcome.stats.requests == 3  # what the server saw: the retried request counts
    assert [a.http_requests for t in outcome.transcript for a in t.attempts] == [2, 1]


def test_retry_after_is_honoured_over_backoff(server: LoopbackLLMServer) -> None:
    # The exponential backoff alone would wait 5 s; Retry-After (ms form, then seconds) says
    # 10 ms, on a rate limit, a server error and an overload alike.
    server.enqueue(
        openai_error(429, headers={"retry-after-ms": "10"}),
        openai_error(500, retry_after=RETRY_FAST),
        openai_error(529, retry_after=RETRY_FAST),
        _completion(ENTITIES),
        _completion(EDGES),
    )
    _extract(_extractor(server, backoff_s=5.0, max_backoff_s=5.0, max_retries=3))
    arrivals = [r.received_at for r in server.requests[:4]]
    assert all(b - a < 1.0 for a, b in itertools.pairwise(arrivals))


def test_retry_after_is_capped_by_max_retry_after(server: LoopbackLLMServer) -> None:
    server.enqueue(openai_error(429, retry_after=30), _completion(ENTITIES), _completion(EDGES))
    _extract(_extractor(server, max_retry_after_s=0.01))
    assert server.requests[1].received_at - server.requests[0].received_at < 1.0


@pytest.mark.parametrize("stage", ["entities", "edges"])
@pytest.mark.parametrize("status", [500, 529])
def test_persistent_server_error_is_http_error(
    server: LoopbackLLMServer, stage: str, status: int
) -> None:
    error = openai_error(status, retry_after=RETRY_FAST)
    max_retries = 2
    prefix = [_completion(ENTITIES)] if stage == "edges" else []
    server.enqueue(*prefix, *[error] * (max_retries + 2))
    failed = _failure(_extractor(server, max_retries=max_retries))
    failure = failed.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.call_type == stage
    assert isinstance(failed.stats, CallStats)
    assert failed.stats.requests == len(server.requests)  # the failed ones count too
    assert failure.raw_body == error.body.decode()
    assert "error" in json.loads(failure.raw_body)
    assert failure.finish_reason is None
    assert failure.completion_tokens is None
    stage_requests = [r for r in server.requests if _is_entity_call(r) == (stage == "entities")]
    assert len(stage_requests) == max_retries + 1
    assert server.queued == 1  # the spare error reply was never asked for


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_error_is_not_retried(server: LoopbackLLMServer, status: int) -> None:
    error = openai_error(status)
    server.enqueue(error, _completion(ENTITIES), _completion(EDGES))
    failure = _failure(_extractor(server)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.raw_body == error.body.decode()
    assert len(server.requests) == 1


def test_timeout_is_http_error_after_bounded_attempts(server: LoopbackLLMServer) -> None:
    slow = dataclasses.replace(_completion(ENTITIES), delay_s=0.5)
    server.enqueue(*[slow] * 4)
    failure = _failure(_extractor(server, timeout_s=0.1, max_retries=2)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.call_type == "entities"
    assert "timeout" in failure.raw_body
    assert failure.finish_reason is None
    assert len(server.requests) == 3  # max_retries + 1


@pytest.mark.parametrize("fault", ["truncated-body", "reset"])
def test_broken_connection_is_retried_then_succeeds(server: LoopbackLLMServer, fault: str) -> None:
    good = _completion(ENTITIES)
    broken = (
        dataclasses.replace(good, truncate_body_at=25)
        if fault == "truncated-body"
        else Reply(reset=True)
    )
    server.enqueue(broken, good, _completion(EDGES))
    outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert len(outcome.result.edges) == 1
    assert len(server.requests) == 3
    assert server.connections >= 2  # the broken connection was replaced
    assert outcome.stats.requests == 3
    assert outcome.stats.structured_output.clean == 2


def test_persistent_reset_is_http_error(server: LoopbackLLMServer) -> None:
    server.enqueue(*[Reply(reset=True)] * 3)
    error = _failure(_extractor(server, max_retries=1))
    failure = error.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert len(server.requests) == 2
    assert isinstance(error.stats, CallStats) and error.stats.requests == 2  # each was seen
    # A reset is a connection failure, not a timeout (httpx-aiohttp calls both ConnectTimeout).
    assert re.match(r"oai-(http|uds) transport error: ", failure.raw_body)
    assert "Timeout" not in failure.raw_body


def test_truncated_body_names_the_short_read(server: LoopbackLLMServer) -> None:
    short = dataclasses.replace(_completion(ENTITIES), truncate_body_at=25)
    server.enqueue(*[short] * 2)
    failure = _failure(_extractor(server, max_retries=1)).failure
    assert isinstance(failure, FailureRecord)
    assert re.match(r"oai-(http|uds) transport error: ", failure.raw_body)
    assert "ClientPayloadError" in failure.raw_body  # the body ended before its length


def test_refused_connection_is_retried_and_counts_no_request() -> None:
    """No server saw a refused connection: it is retried (a server restarting), and neither try
    is counted as a request (the report's requests are what the server saw)."""
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = OpenAICompatTransport(
        url=f"http://127.0.0.1:{port}/v1/chat/completions",
        max_retries=1,
        timeout_s=1.0,
        backoff_s=0.01,
    )
    error = _failure(TransportExtractor(transport))
    failure = error.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.raw_body.startswith("oai-http transport error: ClientConnectorError")
    assert isinstance(error.stats, CallStats) and error.stats.requests == 0


def test_a_refused_connection_is_tried_again_until_the_server_is_up() -> None:
    """The retry is real: a server that starts listening between two tries answers the call,
    and the requests counted are the ones it saw."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = LoopbackLLMServer("openai", responder=openai_responder, port=port)
    transport = OpenAICompatTransport(
        url=f"http://127.0.0.1:{port}/v1/chat/completions",
        max_retries=2,
        timeout_s=2.0,
        backoff_s=1.0,  # the first retry waits 0.75-1 s: the server is up by then
        max_backoff_s=1.0,
    )
    starter = threading.Timer(0.2, server.start)
    starter.start()
    try:
        outcome = _extract(TransportExtractor(transport))
    finally:
        starter.join()
        server.stop()
    assert outcome.stats.requests == len(server.requests) == 2  # entities, edges


def test_a_missing_unix_socket_counts_no_request(uds_dir: Path) -> None:
    transport = OpenAICompatTransport(
        url="http://localhost/v1/chat/completions",
        uds_path=str(uds_dir / "nobody-listens.sock"),
        max_retries=1,
        backoff_s=0.01,
    )
    error = _failure(TransportExtractor(transport))
    assert isinstance(error.stats, CallStats) and error.stats.requests == 0


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
    server.enqueue(_completion(ENTITIES), _completion(EDGES))
    _extract(_extractor(server), options=ExtractOptions.for_mode(mode, ONTOLOGY))
    entity_system = server.requests[0].system_prompt or ""
    edge_system = server.requests[1].system_prompt or ""
    assert f"{entity_heading}:\n- Person\n- Organization" in entity_system
    assert relation_heading in edge_system
    assert "- WORKS_FOR (Person -> Organization)" in edge_system
    other = "Suggested" if mode == "strict" else "closed list"
    assert other not in entity_system and other not in edge_system


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


@pytest.mark.parametrize("kind", ["tcp", "uds"])
def test_extract_all_bounds_requests_in_flight(kind: str, uds_dir: Path) -> None:
    def slow(request: ReceivedRequest) -> Reply:
        return dataclasses.replace(openai_responder(request), delay_s=DELAY_S)

    episodes = [Episode(name=f"ep-{i}", body=f"{n} works at Acme.") for i, n in enumerate(NAMES)]
    srv = _start(kind, uds_dir, responder=slow)
    try:
        extractor = _extractor(srv, timeout_s=2.0)

        async def go() -> list[Any]:
            try:
                return await extract_all(extractor, episodes, OPTIONS, concurrency=4)
            finally:
                await extractor.aclose()

        runs = run_sync(go)
    finally:
        srv.stop()
    assert len(srv.requests) == 2 * len(episodes)
    assert 2 <= _max_in_flight(srv.requests, DELAY_S) <= 4
    assert [r.episode.name for r in runs] == [e.name for e in episodes]
    assert all(r.ok for r in runs)
    assert [[e.name for e in r.outcome.result.entities] for r in runs if r.outcome] == [
        [n, "Acme"] for n in NAMES
    ]


def test_one_transport_across_event_loops(server: LoopbackLLMServer) -> None:
    extractor = _extractor(server)
    server.enqueue(*[_completion(ENTITIES), _completion(EDGES)] * 2)
    first = run_sync(lambda: extractor.extract(EPISODE, OPTIONS))
    second = _extract(extractor)  # a second asyncio.run must not reuse the closed loop's client
    assert first.result == second.result
    assert len(server.requests) == 4


def test_oai_uds_spec(uds_dir: Path) -> None:
    srv = _start("uds", uds_dir, responder=openai_responder)
    try:
        spec = parse_backend_spec(f"oai-uds:path={srv.uds_path},model=m")
        extractor = build_extractor(spec, timeout_s=1.0)
        assert (extractor.provider, extractor.model) == ("oai-uds", "m")
        outcome = _extract(extractor)
    finally:
        srv.stop()
    assert len(outcome.result.entities) == 3
    assert [r.model for r in srv.requests] == ["m", "m"]
    assert all(r.path == "/v1/chat/completions" for r in srv.requests)


def test_oai_http_spec_reads_key_from_env(uds_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALS_OAI_API_KEY", TEST_OAI_KEY)
    srv = _start("tcp", uds_dir, responder=openai_responder)
    try:
        extractor = build_extractor(
            parse_backend_spec(f"oai-http:url={srv.base_url},model=m"), timeout_s=1.0
        )
        assert (extractor.provider, extractor.model) == ("oai-http", "m")
        outcome = _extract(extractor)
    finally:
        srv.stop()
    assert len(outcome.result.edges) == 2
    assert [r.model for r in srv.requests] == ["m", "m"]
    assert all(r.api_key == TEST_OAI_KEY for r in srv.requests)


def test_user_info_in_the_url_is_sent_as_basic_auth(server: LoopbackLLMServer) -> None:
    # aiohttp refuses credentials in a URL next to an Authorization header; httpx sends them as
    # Basic auth, in place of the bearer key, and so does the transport.
    url = server.base_url.replace("://", "://user:s%40cret@", 1)
    uds = str(server.uds_path) if server.uds_path is not None else None
    transport = OpenAICompatTransport(url=url, uds_path=uds, api_key=TEST_OAI_KEY, max_retries=0)
    server.enqueue(_completion(ENTITIES), _completion(EDGES))
    _extract(TransportExtractor(transport))
    expected = "Basic " + base64.b64encode(b"user:s@cret").decode()
    assert [r.headers["authorization"] for r in server.requests] == [expected, expected]


@pytest.mark.parametrize(("scheme", "verified"), [("https", True), ("http", False)])
def test_only_an_https_backend_loads_a_verifying_tls_context(scheme: str, verified: bool) -> None:
    # Plain HTTP has no TLS to verify; loading the CA bundle cost tens of ms per client.
    transport = OpenAICompatTransport(url=f"{scheme}://models.example/v1/chat/completions")

    async def context() -> ssl.SSLContext:
        client = transport._new_client()
        await client.aclose()
        assert transport._ssl is not None
        return transport._ssl

    tls = run_sync(context)
    assert (tls.verify_mode == ssl.CERT_REQUIRED) is verified
    assert tls.check_hostname is verified


def _not_http_server() -> contextlib.AbstractContextManager[str]:
    """Answers every request with a line that is not HTTP, then closes."""
    return raw_http_server(lambda conn, _head: conn.sendall(b"HELLO WORLD\r\n\r\n"))


def test_a_reply_that_is_not_http_is_a_transport_error_without_secrets() -> None:
    secret = "sk-query-secret-1c9e"
    with _not_http_server() as base:
        transport = OpenAICompatTransport(
            url=f"{base}/v1/chat/completions?api-key={secret}",
            api_key=TEST_OAI_KEY,
            max_retries=1,
            backoff_s=0.01,
        )
        err = _failure(TransportExtractor(transport))
    failure = err.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.raw_body.startswith("oai-http transport error: ClientResponseError(400, ")
    for text in (failure.raw_body, str(err)):
        assert secret not in text and TEST_OAI_KEY not in text


def test_a_url_in_an_aiohttp_message_loses_its_secrets() -> None:
    # aiohttp names the URL in some messages: "Connection timeout to host <url>".
    url = "http://user:pw-secret@models.example:8000/v1/chat/completions?api-key=q-secret#frag"
    cause = aiohttp.ConnectionTimeoutError(f"Connection timeout to host {url}")
    wrapped = httpx.ConnectTimeout(str(cause))
    wrapped.__cause__ = cause
    error = _transport_failure("oai-http", wrapped)
    assert str(error) == (
        "oai-http timeout: ConnectionTimeoutError('Connection timeout to host "
        "http://models.example:8000/v1/chat/completions')"
    )


def test_requests_go_through_the_environment_proxy(
    uds_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear_proxy_env(monkeypatch)
    # The loopback server stands in for the proxy: it records the request line it is sent.
    proxy = _start("tcp", uds_dir, responder=openai_responder)
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        target = "http://models.example.invalid/v1/chat/completions"
        outcome = _extract(TransportExtractor(OpenAICompatTransport(url=target, max_retries=0)))
    finally:
        proxy.stop()
    assert outcome.result.entities
    assert [r.path for r in proxy.requests] == [target] * 2  # absolute form: proxied requests


def test_no_proxy_exempts_a_host(uds_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxy_env(monkeypatch)
    srv = _start("tcp", uds_dir, responder=openai_responder)
    try:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        outcome = _extract(TransportExtractor(OpenAICompatTransport(url=srv.url, max_retries=0)))
    finally:
        srv.stop()
    assert outcome.result.entities
    assert [r.path for r in srv.requests] == ["/v1/chat/completions"] * 2


# -- faults found by review: each once escaped the typed-error contract ----------------------


def _run_bounded(extractor: Extractor, seconds: float = 20.0) -> ExtractionOutcome:
    """`_extract`, failing (not hanging) if the call does not end within `seconds`."""

    async def go() -> ExtractionOutcome:
        try:
            return await asyncio.wait_for(extractor.extract(EPISODE, OPTIONS), seconds)
        finally:
            await extractor.aclose()

    return run_sync(go)


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
@pytest.mark.parametrize("value", ["nan", "inf", "-5"])
def test_a_retry_after_that_is_no_time_waits_the_backoff(
    server: LoopbackLLMServer, header: str, value: str
) -> None:
    # float("nan") parses, min(nan, cap) is nan, and asyncio.sleep(nan) never returns.
    server.enqueue(
        openai_error(429, headers={header: value}), _completion(ENTITIES), _completion(EDGES)
    )
    outcome = _run_bounded(_extractor(server, backoff_s=0.01, max_backoff_s=0.05))
    assert outcome.stats.requests == len(server.requests) == 3


def test_a_proxy_password_never_reaches_an_error_or_the_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiohttp's connection errors carry a ConnectionKey whose repr shows the proxy's
    credentials: a proxy that accepts CONNECT and then speaks no TLS fails the handshake."""
    clear_proxy_env(monkeypatch)
    secret = "proxy-pw-7f3a"

    def tunnel_without_tls(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\nthis is not TLS\r\n\r\n")

    with raw_http_server(tunnel_without_tls) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.replace("http://", f"http://agent:{secret}@"))
        transport = OpenAICompatTransport(
            url="https://models.example.invalid/v1/chat/completions", max_retries=0
        )
        recorder = RecordingExtractor(TransportExtractor(transport), tmp_path / "c.jsonl")
        err = _failure(recorder)
    failure = err.failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert failure.raw_body.startswith("oai-http transport error: ClientConnector")
    sidecar = sidecar_path(tmp_path / "c.jsonl").read_text()
    assert sidecar  # the failure was recorded ...
    for text in (failure.raw_body, str(err), sidecar, repr(err.__cause__)):
        assert secret not in text  # ... without the password


def test_the_whole_exchange_is_bounded_by_the_timeout() -> None:
    """httpx's timeout bounds each read: a server sending its body a byte at a time, each
    within the timeout, would hold the call open for as long as it liked."""
    body = json.dumps(
        {"choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}]}
    ).encode()

    # ~7 s in all, each byte well within the 0.5 s timeout: far past the bound below, which
    # leaves a loaded machine seconds of slack
    with raw_http_server(trickled_json(body, per_byte_s=0.1)) as base:
        transport = OpenAICompatTransport(
            url=f"{base}/v1/chat/completions", max_retries=0, timeout_s=0.5
        )
        started = time.perf_counter()
        failure = _failure(TransportExtractor(transport)).failure
        elapsed = time.perf_counter() - started
    assert isinstance(failure, FailureRecord)
    assert failure.raw_body.startswith("oai-http timeout: ")
    assert elapsed < 4.0, elapsed


@pytest.mark.parametrize(
    ("name", "reply"),
    [
        (
            "a body that is not the gzip it says",
            Reply(raw=b"not gzip", headers={"content-encoding": "gzip"}),
        ),
        (
            "a usage count past a float",
            Reply(
                raw=b'{"choices": [{"message": {"content": "{}"}}], '
                b'"usage": {"prompt_tokens": 1e400}}'
            ),
        ),
        ("JSON nested past the parser", Reply(raw=b"[" * 100_000 + b"]" * 100_000)),
    ],
)
def test_a_broken_200_reply_is_one_typed_failure(
    server: LoopbackLLMServer, name: str, reply: Reply
) -> None:
    server.enqueue(reply)
    failure = _failure(_extractor(server, max_retries=0)).failure
    assert isinstance(failure, FailureRecord), name
    assert failure.classification in {"http_error", "malformed"}


def test_a_missing_unix_socket_is_named(uds_dir: Path) -> None:
    socket_path = uds_dir / "nobody-listens.sock"
    transport = OpenAICompatTransport(
        url="http://localhost/v1/chat/completions", uds_path=str(socket_path), max_retries=0
    )
    failure = _failure(TransportExtractor(transport)).failure
    assert isinstance(failure, FailureRecord)
    assert f"socket {socket_path}" in failure.raw_body
    assert "FileNotFoundError" in failure.raw_body


def test_retry_after_waits_up_to_a_minute_and_the_backoff_has_jitter() -> None:
    from evals_pipeline.core.errors import TransportError
    from evals_pipeline.core.extractors import retries

    waits: list[float] = []
    calls = 0

    async def attempt() -> str:
        nonlocal calls
        calls += 1
        raise retries.Retryable(TransportError("429"), 45.0 if calls == 1 else None)

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def go() -> None:
        from unittest import mock

        with mock.patch("asyncio.sleep", sleep):
            await retries.with_retries(attempt, max_retries=3, backoff_s=1.0, max_backoff_s=8.0)

    with pytest.raises(TransportError):
        run_sync(go)
    # A rate limit asking for 45 s gets 45 s (the 8 s cap had burned the retries inside it);
    # the backoff after it doubles, each wait shortened by up to a quarter.
    assert waits[0] == 45.0
    assert 0.75 * 2.0 <= waits[1] <= 2.0 and 0.75 * 4.0 <= waits[2] <= 4.0
    assert retries.retryable_status(520) and not retries.retryable_status(404)


def test_an_error_body_that_echoes_the_key_is_redacted(server: LoopbackLLMServer) -> None:
    echo = Reply(status=400, raw=f'{{"error": "bad key Bearer {TEST_OAI_KEY}"}}'.encode())
    server.enqueue(echo)
    failure = _failure(_extractor(server, max_retries=0)).failure
    assert isinstance(failure, FailureRecord)
    assert TEST_OAI_KEY not in failure.raw_body and "Bearer ***" in failure.raw_body


def test_an_error_body_that_echoes_the_request_keeps_no_url_credential(
    server: LoopbackLLMServer,
) -> None:
    """A server that echoes its request (headers and path) shows the URL's password inside the
    Basic auth header, base64-encoded, and its query token outside any URL: neither reaches the
    sidecar."""
    url = server.base_url.replace("://", "://user:pw-SECRETURL@", 1)
    url += "?token=QSECRET-123&sig=abc%2Fdef%2Bghi%3D%3D"
    basic = base64.b64encode(b"user:pw-SECRETURL").decode()

    def echo(request):  # type: ignore[no-untyped-def]
        said = f"auth was {request.headers.get('authorization')} on {request.path}"
        return Reply(status=500, raw=json.dumps({"error": said}).encode())

    server.responder = echo
    uds = str(server.uds_path) if server.uds_path is not None else None
    transport = OpenAICompatTransport(url=url, uds_path=uds, max_retries=0)
    failure = _failure(TransportExtractor(transport)).failure
    assert isinstance(failure, FailureRecord)
    assert server.requests[0].headers["authorization"] == f"Basic {basic}"  # what was sent
    for secret in (basic, "pw-SECRETURL", "QSECRET-123", "abc%2Fdef%2Bghi%3D%3D"):
        assert secret not in failure.raw_body, secret
    assert "auth was Basic ***" in failure.raw_body


def test_a_query_string_key_reaches_no_log_line(
    server: LoopbackLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx logs every request's URL at INFO, query string and all: a gateway key given as
    `?api-key=...` went into the run's log (Dagster captures it) on every call."""
    server.responder = openai_responder
    uds = str(server.uds_path) if server.uds_path is not None else None
    url = f"{server.base_url}?api-key=QUERY-KEY-5d1e&tenant=t1"
    caplog.set_level("DEBUG")
    _extract(TransportExtractor(OpenAICompatTransport(url=url, uds_path=uds, max_retries=0)))
    assert server.requests[0].path.endswith("?api-key=QUERY-KEY-5d1e&tenant=t1")  # sent
    logged = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert logged and all("HTTP Request: POST" in line for line in logged)
    assert "QUERY-KEY-5d1e" not in caplog.text


# -- a response body past the ceiling -------------------------------------------------------


def test_a_body_announced_past_the_ceiling_is_refused_unread(server: LoopbackLLMServer) -> None:
    """A 200 whose Content-Length passes `max_body_bytes` fails at once, typed, not retried,
    and none of it reaches the sidecar record (a 200 MB body had gone there whole)."""
    huge = _completion({"entities": [], "pad": "x" * 200_000})
    server.enqueue(huge, huge, huge)
    failure = _failure(_extractor(server, max_body_bytes=100_000)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert re.match(r"oai-(http|uds) response body over 100,000 bytes", failure.raw_body)
    assert "xxxx" not in failure.raw_body
    assert len(server.requests) == 1  # not retried: the same server would send it again


def test_a_body_without_a_length_is_cut_off_at_the_ceiling() -> None:
    """A body delimited by the connection's close (no Content-Length) is read only up to the
    ceiling: the server below would send 50 MB."""
    sent: list[int] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"connection: close\r\n\r\n"
                )
                block = b"x" * 65536
                with contextlib.suppress(OSError):
                    for _ in range(800):
                        conn.sendall(block)
                        sent.append(len(block))

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        transport = OpenAICompatTransport(
            url=f"http://127.0.0.1:{port}/v1/chat/completions",
            max_retries=2,
            timeout_s=10.0,
            max_body_bytes=1_000_000,
        )
        failure = _failure(TransportExtractor(transport)).failure
        thread.join(timeout=10)
    assert isinstance(failure, FailureRecord)
    assert failure.raw_body == "oai-http response body over 1,000,000 bytes; not read further"
    assert sum(sent) < 800 * 65536  # the client stopped reading and closed: the rest never went


def test_a_specs_timeout_and_retries_bound_a_hung_server() -> None:
    """`timeout=` and `retries=` in the spec: a server that never answers costs one 0.3 s
    request, not three of the default 120 s."""
    with LoopbackLLMServer("openai") as server:
        server.enqueue(*[dataclasses.replace(_completion(ENTITIES), delay_s=30.0)] * 3)
        spec = parse_backend_spec(f"oai-http:url={server.base_url},timeout=0.3,retries=0")
        started = time.monotonic()
        failure = _failure(build_extractor(spec)).failure
        elapsed = time.monotonic() - started
    assert isinstance(failure, FailureRecord) and failure.classification == "http_error"
    assert "timeout" in failure.raw_body
    assert len(server.requests) == 1 and elapsed < 5.0


def _gzipped(reply: Reply, coding: str = "gzip") -> Reply:
    """`reply` with its body compressed as `coding` says (gzip, or deflate in zlib wrapping)."""
    body = gzip.compress(reply.body) if coding == "gzip" else zlib.compress(reply.body)
    headers = {**reply.headers, "Content-Encoding": coding}
    return dataclasses.replace(reply, json=None, raw=body, headers=headers)


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_compressed_reply_is_inflated_and_read(server: LoopbackLLMServer, coding: str) -> None:
    """A server that compresses its replies (as it may: the client asks for gzip, deflate) is
    read as usual; the capped transport inflates the body, and the client does not again."""
    server.enqueue(_gzipped(_completion(ENTITIES), coding), _gzipped(_completion(EDGES), coding))
    outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert len(outcome.result.edges) == 1
    assert all(r.headers["accept-encoding"] == "gzip, deflate" for r in server.requests)


def test_a_compressed_body_past_the_ceiling_once_inflated_is_cut_off(
    server: LoopbackLLMServer,
) -> None:
    """The ceiling counts the body as decoded: 20 MB of JSON padding gzips to ~20 KB on the
    wire, under a 100 KB ceiling, and had been inflated whole by httpx. It fails typed, not
    retried, and none of it reaches the failure record."""
    bomb = _gzipped(_completion({"entities": [], "pad": " " * 20_000_000}))
    assert len(bomb.body) < 100_000
    server.enqueue(bomb, bomb, bomb)
    failure = _failure(_extractor(server, max_body_bytes=100_000)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert re.match(
        r"oai-(http|uds) response body, decoded, over 100,000 bytes", failure.raw_body
    ), failure.raw_body
    assert len(server.requests) == 1


def test_a_body_in_a_coding_not_asked_for_is_refused(server: LoopbackLLMServer) -> None:
    """A Content-Encoding the transport did not ask for (br, zstd: it cannot inflate them under
    the ceiling) is refused, typed and not retried, rather than passed on undecoded."""
    odd = dataclasses.replace(_completion(ENTITIES), headers={"Content-Encoding": "br"})
    server.enqueue(odd, odd, odd)
    failure = _failure(_extractor(server)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert "Content-Encoding 'br' not accepted" in failure.raw_body
    assert len(server.requests) == 1


def test_a_corrupt_gzip_body_is_a_bounded_retry_then_a_typed_failure(
    server: LoopbackLLMServer,
) -> None:
    """A body that says gzip but is not fails as httpx's own decoding would (a transport
    error, retried within the bound), and a good reply on the retry is read."""
    corrupt = dataclasses.replace(
        _completion(ENTITIES), headers={"Content-Encoding": "gzip"}, json=None, raw=b"not gzip"
    )
    server.enqueue(corrupt, _completion(ENTITIES), _completion(EDGES))
    outcome = _extract(_extractor(server))
    assert len(outcome.result.entities) == 2
    assert len(server.requests) == 3
    server.enqueue(corrupt, corrupt, corrupt)
    failure = _failure(_extractor(server)).failure
    assert isinstance(failure, FailureRecord)
    assert "not ['gzip']" in failure.raw_body, failure.raw_body


def test_a_compressed_reply_with_a_non_ascii_header_is_read(server: LoopbackLLMServer) -> None:
    """A header value need not be ASCII (latin-1 bytes are allowed on the wire); the headers
    handed on after inflating had been rebuilt from text, and such a value raised
    UnicodeEncodeError out of the transport."""
    headers = {"X-Served-By": "caf\u00e9-proxy"}  # sent as latin-1, as http.server does
    entities, edges = (
        _gzipped(dataclasses.replace(_completion(payload), headers=headers))
        for payload in (ENTITIES, EDGES)
    )
    server.enqueue(entities, edges)
    outcome = _extract(_extractor(server))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]


def test_a_gzip_body_cut_short_is_a_typed_failure(server: LoopbackLLMServer) -> None:
    """A complete HTTP reply whose gzip stream stops before its end (a proxy that cut it, with
    a Content-Length to match): httpx passes on whatever inflated; here it is a decoding
    failure, retried within the bound, not a silently short reply."""
    whole = _gzipped(_completion(ENTITIES))
    cut = dataclasses.replace(whole, raw=whole.body[: len(whole.body) // 2])
    server.enqueue(cut, cut, cut)
    failure = _failure(_extractor(server)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert "cut short" in failure.raw_body, failure.raw_body


def test_bytes_after_a_gzip_body_are_a_typed_failure(server: LoopbackLLMServer) -> None:
    """A gzip reply followed by other bytes (a proxy's error page glued on): httpx's decoder
    drops them unseen; here the reply is malformed, retried within the bound, then a failure."""
    whole = _gzipped(_completion(ENTITIES))
    glued = dataclasses.replace(whole, raw=whole.body + b"<html>502</html>")
    server.enqueue(glued, glued, glued)
    failure = _failure(_extractor(server)).failure
    assert isinstance(failure, FailureRecord)
    assert failure.classification == "http_error"
    assert "follow the end of the gzip stream" in failure.raw_body, failure.raw_body


@pytest.mark.parametrize(
    "reply",
    [
        # A gateway's debug echo of the request, sent as a 200: not a chat completion.
        Reply(json={"echo": {"authorization": f"Bearer {TEST_OAI_KEY}"}}),
        _completion(f"I was called with Bearer {TEST_OAI_KEY}"),  # no JSON in the reply
        _completion(f"Bearer {TEST_OAI_KEY}", finish_reason="length"),  # cut off, and again
    ],
    ids=["not-a-completion", "unparsed", "truncated"],
)
def test_a_200_body_that_echoes_the_key_reaches_no_sidecar(
    server: LoopbackLLMServer, reply: Reply
) -> None:
    """Only error statuses' bodies had been redacted: a 200 that failed to parse, or was cut
    off, went into the failure record (and the sidecar) as received, key and all."""
    server.enqueue(reply, reply)
    failure = _failure(_extractor(server, max_retries=0)).failure
    assert isinstance(failure, FailureRecord)
    assert TEST_OAI_KEY not in failure.raw_body and "***" in failure.raw_body


def test_a_reply_that_echoes_the_key_is_recorded_without_it(
    server: LoopbackLLMServer, tmp_path: Path
) -> None:
    """A reply's text is what a cassette keeps: a key echoed into it had been recorded."""
    leaked = json.loads(json.dumps(ENTITIES))
    leaked["entities"][0]["summary"] = f"Called with Bearer {TEST_OAI_KEY}."
    server.enqueue(_completion(leaked), _completion(EDGES))
    cassette = tmp_path / "c.jsonl"
    outcome = _extract(RecordingExtractor(_extractor(server), cassette))
    assert outcome.result.entities[0].summary == "Called with Bearer ***."
    assert TEST_OAI_KEY not in cassette.read_text() and "Bearer ***" in cassette.read_text()


def test_a_lone_surrogate_in_a_reply_is_recorded_as_the_replacement_character(
    server: LoopbackLLMServer, tmp_path: Path
) -> None:
    """A body's JSON may escape half an emoji (`\\ud83d`): the text it decodes to cannot be
    written as UTF-8, and recording it had raised a pydantic serialisation error out of the
    run after the calls were paid for."""
    content = json.dumps(ENTITIES) + " \ud83d"  # after the JSON: the text itself holds it
    server.enqueue(Reply(raw=json.dumps(_completion(content).json).encode()), _completion(EDGES))
    cassette = tmp_path / "c.jsonl"
    outcome = _extract(RecordingExtractor(_extractor(server), cassette))
    assert [e.name for e in outcome.result.entities] == ["Alice", "Acme"]
    assert ']} \ufffd"' in cassette.read_text(encoding="utf-8")  # the text as recorded


def test_a_url_query_value_the_model_writes_is_kept_in_its_reply(
    server: LoopbackLLMServer, tmp_path: Path
) -> None:
    """A URL's query values are cut from error bodies (a gateway key may ride there), not from
    a reply's text: with `?api-version=2024-06-01` every date the model wrote had become ***."""
    said = json.loads(json.dumps(ENTITIES))
    said["entities"][0]["summary"] = f"Joined Acme on 2024-06-01 with {TEST_OAI_KEY}."
    server.enqueue(_completion(said), _completion(EDGES))
    uds = str(server.uds_path) if server.uds_path is not None else None
    transport = OpenAICompatTransport(
        url=f"{server.base_url}?api-version=2024-06-01", uds_path=uds, api_key=TEST_OAI_KEY
    )
    cassette = tmp_path / "c.jsonl"
    outcome = _extract(RecordingExtractor(TransportExtractor(transport), cassette))
    assert outcome.result.entities[0].summary == "Joined Acme on 2024-06-01 with ***."


def test_a_failure_without_a_usage_count_records_its_tokens_as_unknown(
    server: LoopbackLLMServer,
) -> None:
    """The sidecar's completion_tokens is null where the count is unavailable (the design's
    field); a reply cut off with no usage block had been recorded as 0 tokens."""
    for text in (json.dumps(ENTITIES)[:40], ""):  # cut off mid-reply, or before any text
        cut = _completion(text, finish_reason="length")
        assert cut.json is not None
        del cut.json["usage"]
        server.enqueue(cut, cut)
        failure = _failure(_extractor(server)).failure
        assert isinstance(failure, FailureRecord)
        assert (failure.classification, failure.completion_tokens) == ("truncation", None)
