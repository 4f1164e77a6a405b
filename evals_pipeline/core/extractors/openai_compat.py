"""OpenAI-compatible chat completions over httpx, on TCP (`oai-http`) or a Unix socket (`oai-uds`).

Any server speaking `POST /v1/chat/completions` (vLLM, llama.cpp, mlx_lm.server, Ollama) is a
backend, so a new local model needs a spec string, not code.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import time
import urllib.request
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from ..errors import MalformedReply, TransportError
from ..models import Attempt, ChatRequest
from .base import LoopBound, Reply

RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
API_KEY_ENV = "EVALS_OAI_API_KEY"

# Connections per event loop: httpx's default cap.
MAX_CONNECTIONS = 100


class _Retryable(Exception):
    def __init__(self, error: TransportError, retry_after: float | None) -> None:
        self.error = error
        self.retry_after = retry_after


def _retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Retry-After as seconds: `retry-after-ms`, then seconds, then an HTTP date."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


# A URL in an error message, split so its user info and query string (where a key can hide) can
# be dropped: aiohttp puts the request URL in some messages ("Connection timeout to host ...").
_URL_IN_TEXT = re.compile(r"(\w[\w+.-]*://)(?:[^/\s@'\"]*@)?([^\s?#'\"]*)(?:[?#][^\s'\")]*)?")


def _without_url_secrets(text: str) -> str:
    return _URL_IN_TEXT.sub(r"\1\2", text)


def _environment_proxy(url: httpx.URL) -> httpx.Proxy | None:
    """The proxy that HTTP(S)_PROXY / ALL_PROXY name for `url`, unless NO_PROXY exempts it.

    httpx reads these only for the transport it builds itself; given one, it reads none, and
    aiohttp's session does not either (`trust_env=False`). So the transport asks for it.
    """
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    host = f"{url.host}:{url.port}" if url.port else url.host
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return httpx.Proxy(proxy)


def _transport_failure(provider: str, exc: Exception) -> TransportError:
    """A typed error naming what failed: a timeout, or the connection (reset, short body,
    refused, a response that is not HTTP), with no URL secret or header in its message.

    httpx-aiohttp maps aiohttp's connection errors, a reset included, to `httpx.ConnectTimeout`
    (a short body to `ReadError`, a read timeout to `ReadTimeout`) and chains the original,
    which says what it was; a malformed response (`ClientResponseError`) comes through
    unmapped. Its repr would show the request's headers, so it is described by status and
    message only.
    """
    cause = exc.__cause__ if isinstance(exc, httpx.TransportError) else exc
    shown: str
    if isinstance(cause, aiohttp.ClientResponseError):
        timed_out, shown = False, f"{type(cause).__name__}({cause.status}, {cause.message!r})"
    elif isinstance(cause, aiohttp.ClientError):
        timed_out, shown = isinstance(cause, TimeoutError), repr(cause)
    else:
        timed_out, shown = isinstance(exc, httpx.TimeoutException), repr(exc)
    kind = "timeout" if timed_out else "transport error"
    return TransportError(f"{provider} {kind}: {_without_url_secrets(shown)}")


class OpenAICompatTransport:
    """Chat completions with bounded retries on 408/409/429/5xx, timeouts, resets, short bodies
    and malformed responses.

    The wait honours Retry-After (capped at `max_backoff_s`), else doubles from `backoff_s`.
    """

    def __init__(
        self,
        *,
        url: str,
        model: str = "local",
        uds_path: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        temperature: float = 0.0,
    ) -> None:
        self.provider = "oai-uds" if uds_path else "oai-http"
        self.model = model
        # User info in the URL is sent as Basic auth, as httpx does; aiohttp refuses a URL that
        # carries credentials beside an Authorization header, so the URL itself goes without.
        parsed = httpx.URL(url)
        self._auth = httpx.BasicAuth(parsed.username, parsed.password) if parsed.userinfo else None
        self._url = parsed.copy_with(userinfo=b"") if parsed.userinfo else parsed
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._temperature = temperature
        self._uds_path = uds_path
        self._timeout_s = timeout_s
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        self._headers = {"authorization": f"Bearer {key}"} if key else {}
        self._ssl: ssl.SSLContext | None = None
        self._clients = LoopBound(self._new_client)

    def _new_client(self) -> httpx.AsyncClient:
        """An httpx client over aiohttp's connection pool and C HTTP parser (httpx-aiohttp).

        httpx's own transport (httpcore, anyio, h11) spent ~1.6 ms of CPU per call at
        concurrency 32, more than the HTTP exchange: its pool rescans and polls every connection
        on each request (encode/httpx#3215). The aiohttp transport, the one the anthropic SDK
        offers as `DefaultAioHttpClient`, halves that, and one pool serves 32+ connections.
        """
        # One TLS context for every client: building one loads the CA bundle (tens of ms). Plain
        # HTTP (a local server, a Unix socket) has no TLS, so it loads none.
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context(verify=self._url.scheme == "https")
        limits = httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
        )
        return httpx.AsyncClient(
            transport=AiohttpTransport(
                uds=self._uds_path,
                verify=self._ssl,
                limits=limits,
                proxy=None if self._uds_path else _environment_proxy(self._url),
            ),
            headers=self._headers,
            auth=self._auth,
            timeout=httpx.Timeout(self._timeout_s),
        )

    def _wait(self, retry_state: Any) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return min(exc.retry_after, self._max_backoff_s)
        return min(self._backoff_s * 2 ** (retry_state.attempt_number - 1), self._max_backoff_s)

    async def complete(self, request: ChatRequest) -> Reply:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, _Retryable)),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._send_once(request)
        except _Retryable as exc:
            raise exc.error from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_once(self, request: ChatRequest) -> Reply:
        payload = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
            "max_tokens": request.max_tokens,
            "temperature": self._temperature,
        }
        started = time.perf_counter()
        try:
            response = await self._clients.get().post(self._url, json=payload)
        except (httpx.TransportError, aiohttp.ClientError) as exc:
            raise _Retryable(_transport_failure(self.provider, exc), None) from exc
        latency_ms = (time.perf_counter() - started) * 1000.0
        body = response.text
        if response.status_code != 200:
            error = TransportError(
                f"{self.provider} HTTP {response.status_code}",
                status=response.status_code,
                body=body,
            )
            if response.status_code in RETRYABLE_STATUS:
                raise _Retryable(error, _retry_after_seconds(response.headers))
            raise error
        return Reply(attempt=self._attempt(body, request, latency_ms), raw_body=body)

    def _attempt(self, body: str, request: ChatRequest, latency_ms: float) -> Attempt:
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
            finish_reason = choice.get("finish_reason")
            usage = data.get("usage") or {}
            # Inside the try: a non-numeric usage count or a non-string content is malformed too.
            return Attempt(
                text=text,
                finish_reason=finish_reason,
                truncated=finish_reason == "length",
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
                max_tokens=request.max_tokens,
                latency_ms=latency_ms,
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedReply(
                f"{self.provider} returned a body that is not a chat completion: {exc!r}", body=body
            ) from exc

    async def aclose(self) -> None:
        await self._clients.aclose(lambda client: client.aclose())
