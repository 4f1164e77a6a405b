"""The loopback servers speak the real wire protocols to the real clients over real sockets."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from .llm_servers import (
    LoopbackLLMServer,
    ReceivedRequest,
    Reply,
    TripwireListener,
    anthropic_error,
    anthropic_message,
    openai_completion,
    openai_error,
)

API_KEY = "sk-test-not-a-real-key"
SHORT_TIMEOUT_S = 0.3


@pytest.fixture
def uds_dir() -> Iterator[Path]:
    """A short directory under /tmp: AF_UNIX paths are limited to ~107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="llm", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["tcp", "uds"])
def openai_server(request: pytest.FixtureRequest, uds_dir: Path) -> Iterator[LoopbackLLMServer]:
    uds_path = uds_dir / "oa.sock" if request.param == "uds" else None
    with LoopbackLLMServer("openai", uds_path=uds_path) as server:
        yield server


def _client_for(server: LoopbackLLMServer, **kwargs: Any) -> httpx.AsyncClient:
    transport = (
        httpx.AsyncHTTPTransport(uds=str(server.uds_path)) if server.uds_path is not None else None
    )
    return httpx.AsyncClient(transport=transport, timeout=kwargs.pop("timeout", 1.0), **kwargs)


async def _post(server: LoopbackLLMServer, payload: Any, **kwargs: Any) -> httpx.Response:
    async with _client_for(server, **kwargs) as client:
        return await client.post(server.base_url, json=payload)


def _anthropic_client(server: LoopbackLLMServer, **kwargs: Any) -> anthropic.AsyncAnthropic:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 1.0)
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key=API_KEY, **kwargs)


async def _create_message(
    client: anthropic.AsyncAnthropic, **kwargs: Any
) -> anthropic.types.Message:
    async with client:
        message: anthropic.types.Message = await client.messages.create(
            model=kwargs.pop("model", "claude-test"),
            max_tokens=kwargs.pop("max_tokens", 64),
            messages=kwargs.pop("messages", [{"role": "user", "content": "hi"}]),
            **kwargs,
        )
    return message


# -- Anthropic Messages API via the official SDK --------------------------------------------


def test_anthropic_round_trip_through_the_sdk() -> None:
    with LoopbackLLMServer("anthropic") as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        server.enqueue(
            anthropic_message('{"entities": ["x"]}', input_tokens=5, output_tokens=7, model="m1")
        )
        message = asyncio.run(
            _create_message(
                _anthropic_client(server),
                model="m1",
                max_tokens=123,
                system=[{"type": "text", "text": "You extract."}],
                messages=[{"role": "user", "content": [{"type": "text", "text": "Doc text"}]}],
            )
        )

    assert message.content[0].type == "text"
    assert message.content[0].text == '{"entities": ["x"]}'
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens == 5
    assert message.usage.output_tokens == 7
    assert message.model == "m1"
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    # anthropic 2.x sends the key as "Authorization: Bearer", not as x-api-key.
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.api_key == API_KEY
    assert "anthropic-version" in request.headers
    assert request.system_prompt == "You extract."
    assert request.user_prompt == "Doc text"
    assert request.max_tokens == 123
    assert request.model == "m1"
    assert server.connections == 1


def test_anthropic_429_then_200_is_retried_by_the_sdk() -> None:
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(anthropic_error(429, retry_after=0.01), anthropic_message("done"))
        message = asyncio.run(_create_message(_anthropic_client(server, max_retries=1)))

    assert message.content[0].type == "text"
    assert message.content[0].text == "done"
    assert len(server.requests) == 2
    assert server.queued == 0


def test_anthropic_529_surfaces_as_status_error() -> None:
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(anthropic_error(529))
        with pytest.raises(anthropic.APIStatusError) as excinfo:
            asyncio.run(_create_message(_anthropic_client(server)))

    assert excinfo.value.status_code == 529
    assert excinfo.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded."},
    }
    assert len(server.requests) == 1


def test_anthropic_delay_beyond_client_timeout_raises_timeout() -> None:
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(dataclasses.replace(anthropic_message("late"), delay_s=5.0))
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            asyncio.run(_create_message(_anthropic_client(server, timeout=SHORT_TIMEOUT_S)))
    # stop() interrupts the pending delay, so neither side waits the full 5 s.
    assert time.monotonic() - started < 2.0


def test_anthropic_unknown_path_is_a_json_404() -> None:
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(anthropic_message("unused"))
        response = asyncio.run(_post_to(server.origin + "/v1/nope", {}))
        assert server.queued == 1

    assert response.status_code == 404
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "not_found_error"


async def _post_to(url: str, payload: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=1.0) as client:
        return await client.post(url, json=payload)


def test_anthropic_default_reply_and_responder() -> None:
    seen: list[ReceivedRequest] = []

    def responder(request: ReceivedRequest) -> Reply:
        seen.append(request)
        return anthropic_message(f"echo: {request.user_prompt}", stop_reason="max_tokens")

    with LoopbackLLMServer("anthropic") as server:
        default = asyncio.run(_create_message(_anthropic_client(server), model="claude-x"))
        server.responder = responder
        echoed = asyncio.run(
            _create_message(
                _anthropic_client(server),
                system="plain system",
                messages=[
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": "second"},
                ],
            )
        )

    assert default.content[0].type == "text"
    assert json.loads(default.content[0].text) == {"entities": []}
    assert default.model == "claude-x"
    assert echoed.content[0].type == "text"
    assert echoed.content[0].text == "echo: second"
    assert echoed.stop_reason == "max_tokens"
    assert [r.system_prompt for r in seen] == ["plain system"]


def test_responder_failure_is_a_500_and_recorded() -> None:
    def responder(request: ReceivedRequest) -> Reply:
        raise RuntimeError("boom")

    with LoopbackLLMServer("openai", responder=responder) as server:
        response = asyncio.run(_post(server, {"messages": []}))

    assert response.status_code == 500
    assert "boom" in response.json()["error"]["message"]
    assert [type(e) for e in server.errors] == [RuntimeError]


# -- OpenAI-compatible chat completions via httpx, over TCP and UDS -------------------------


def test_openai_round_trip(openai_server: LoopbackLLMServer) -> None:
    server = openai_server
    assert server.base_url.endswith("/v1/chat/completions")
    server.enqueue(
        openai_completion("partial", finish_reason="length", prompt_tokens=3, completion_tokens=4)
    )
    payload = {
        "model": "local-7b",
        "max_completion_tokens": 16,
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": [{"type": "text", "text": "Extract this."}]},
        ],
    }
    response = asyncio.run(_post(server, payload))

    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "partial"}
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.json == payload
    assert request.system_prompt == "Be terse."
    assert request.user_prompt == "Extract this."
    assert request.max_tokens == 16
    assert request.model == "local-7b"


def test_openai_keep_alive_reuses_one_connection(openai_server: LoopbackLLMServer) -> None:
    async def three_requests() -> list[int]:
        async with _client_for(openai_server) as client:
            return [
                (await client.post(openai_server.base_url, json={"n": i})).status_code
                for i in range(3)
            ]

    assert asyncio.run(three_requests()) == [200, 200, 200]
    assert len(openai_server.requests) == 3
    assert openai_server.connections == 1


def test_openai_error_with_retry_after(openai_server: LoopbackLLMServer) -> None:
    openai_server.enqueue(openai_error(429, retry_after=2, headers={"retry-after-ms": "2000"}))
    response = asyncio.run(_post(openai_server, {}))

    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.headers["retry-after-ms"] == "2000"
    assert response.json() == {
        "error": {
            "message": "Rate limit exceeded.",
            "type": "rate_limit_error",
            "param": None,
            "code": None,
        }
    }


def test_openai_malformed_body(openai_server: LoopbackLLMServer) -> None:
    openai_server.enqueue(Reply(raw=b'{"choices": [{"mess'))
    response = asyncio.run(_post(openai_server, {}))

    assert response.status_code == 200
    assert response.content == b'{"choices": [{"mess'
    with pytest.raises(json.JSONDecodeError):
        response.json()


def test_openai_truncated_body(openai_server: LoopbackLLMServer) -> None:
    openai_server.enqueue(dataclasses.replace(openai_completion("x" * 50), truncate_body_at=10))
    with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
        asyncio.run(_post(openai_server, {}))
    # The server survives the fault; the next request works on a fresh connection.
    assert asyncio.run(_post(openai_server, {})).status_code == 200
    assert openai_server.connections == 2


def test_openai_connection_reset(openai_server: LoopbackLLMServer) -> None:
    openai_server.enqueue(Reply(reset=True))
    with pytest.raises(httpx.TransportError):
        asyncio.run(_post(openai_server, {}))
    assert len(openai_server.requests) == 1
    assert asyncio.run(_post(openai_server, {})).status_code == 200


def test_tcp_reset_is_a_real_rst() -> None:
    with LoopbackLLMServer("openai") as server:
        server.enqueue(Reply(reset=True))
        # An RST surfaces as ECONNRESET (ReadError), not as a clean EOF (RemoteProtocolError).
        with pytest.raises(httpx.ReadError):
            asyncio.run(_post(server, {}))


def test_openai_delay_beyond_timeout(openai_server: LoopbackLLMServer) -> None:
    openai_server.enqueue(dataclasses.replace(openai_completion("late"), delay_s=5.0))
    with pytest.raises(httpx.ReadTimeout):
        asyncio.run(_post(openai_server, {}, timeout=SHORT_TIMEOUT_S))


# -- Tripwire --------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "uds"])
def test_tripwire_counts_connections_after_server_stopped(transport: str, uds_dir: Path) -> None:
    uds_path = uds_dir / "tw.sock" if transport == "uds" else None
    server = LoopbackLLMServer("openai", uds_path=uds_path)
    with server:
        assert asyncio.run(_post(server, {})).status_code == 200
    if uds_path is not None:
        assert not uds_path.exists()

    with TripwireListener.replacing(server) as tripwire:
        assert tripwire.connections == 0
        with pytest.raises(httpx.TransportError):
            asyncio.run(_post(server, {}))
        assert tripwire.connections == 1
    assert tripwire.connections == 1
    if uds_path is not None:
        assert not uds_path.exists()


def test_tripwire_requires_exactly_one_address() -> None:
    with pytest.raises(ValueError):
        TripwireListener()
    with pytest.raises(ValueError):
        TripwireListener(1234, uds_path="/tmp/x.sock")


def test_server_rejects_double_start_and_stop_is_idempotent() -> None:
    server = LoopbackLLMServer("anthropic").start()
    try:
        with pytest.raises(RuntimeError):
            server.start()
    finally:
        server.stop()
    server.stop()
    assert not server.running
