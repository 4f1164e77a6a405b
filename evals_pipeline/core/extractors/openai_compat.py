"""OpenAI-compatible chat completions over httpx, on TCP (`oai-http`) or a Unix socket (`oai-uds`).

Any server speaking `POST /v1/chat/completions` (vLLM, llama.cpp, mlx_lm.server, Ollama) is a
backend, so a new local model needs a spec string, not code.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from ..errors import MalformedReply, TransportError, exception_chain
from ..models import Attempt, ChatRequest
from ..parsing import valid_text
from .base import LoopBound, Reply, counted_reply
from .capped import MAX_BODY_BYTES, CappedTransport, RefusedBody
from .credentials import checked_key, credential_secrets, environment_proxy
from .redaction import redact_client_logs, redacted, reply_without_secrets
from .retries import Retryable, Tries, retry_after_seconds, should_retry, with_retries

API_KEY_ENV = "EVALS_OAI_API_KEY"

# Connections per event loop: httpx's default cap.
MAX_CONNECTIONS = 100


def _never_sent(exc: BaseException) -> bool:
    """Whether `exc` is, or was raised from, aiohttp's error for a request it could not write:
    the connection was closed under it (no response can follow; the server acted on nothing).
    httpx-aiohttp hands it over as the cause of an httpx error (a ConnectTimeout)."""
    return any(
        isinstance(e, aiohttp.ClientOSError) and "Can not write request body" in str(e)
        for e in exception_chain(exc)
    )


def _never_connected(exc: BaseException) -> bool:
    """Whether `exc` comes from a connection that was never made (refused, no such host or
    socket, a failed TLS handshake, a proxy that cannot be reached): no server saw the request.
    Read from aiohttp's error in the chain, not httpx's class: httpx-aiohttp calls a reset a
    ConnectTimeout too. A connect that hangs is counted: the attempt's own timeout (the same
    length) ends it first, and cannot tell a connect from a reply that never came."""
    return any(isinstance(e, aiohttp.ClientConnectorError) for e in exception_chain(exc))


def _transport_failure(
    provider: str, exc: Exception, secrets: tuple[str, ...] = (), socket: str | None = None
) -> TransportError:
    """A typed error naming what failed: a timeout, or the connection (reset, short body,
    refused, a response that is not HTTP), with no URL secret or header in its message.

    httpx-aiohttp maps aiohttp's connection errors, a reset included, to `httpx.ConnectTimeout`
    (a short body to `ReadError`, a read timeout to `ReadTimeout`) and chains the original,
    which says what it was; a malformed response (`ClientResponseError`) comes through
    unmapped. Its repr would show the request's headers, so it is described by status and
    message only, and a failed connection by where it went and the OS error: its repr would
    show the proxy's credentials. `secrets` are removed from whatever is left; `socket` is the
    Unix socket's path, for a connection to it that failed.
    """
    cause = exc.__cause__ if isinstance(exc, httpx.TransportError) else exc
    shown: str
    if isinstance(cause, aiohttp.ClientResponseError):
        timed_out, shown = False, f"{type(cause).__name__}({cause.status}, {cause.message!r})"
    elif isinstance(cause, aiohttp.ClientConnectorError):
        timed_out = False
        where = f"socket {socket}" if socket else f"{cause.host}:{cause.port}"
        shown = f"{type(cause).__name__}({where}, {cause.os_error!r})"
    elif isinstance(cause, aiohttp.ClientError):
        timed_out, shown = isinstance(cause, TimeoutError), repr(cause)
    elif isinstance(exc, httpx.DecodingError):  # e.g. a body that is not the gzip it claims
        timed_out, shown = False, f"DecodingError({exc})"
    else:
        timed_out, shown = isinstance(exc, httpx.TimeoutException | TimeoutError), repr(exc)
    kind = "timeout" if timed_out else "transport error"
    return TransportError(f"{provider} {kind}: {redacted(shown, secrets)}")


class OpenAICompatTransport:
    """Chat completions with bounded retries on 408/409/429/5xx, timeouts, resets, short bodies
    and malformed responses.

    The waits follow `retries.py`: Retry-After up to `max_retry_after_s`, else a backoff doubling
    from `backoff_s` up to `max_backoff_s`.
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
        max_retry_after_s: float = 60.0,
        temperature: float = 0.0,
        max_body_bytes: int = MAX_BODY_BYTES,
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
        self._max_retry_after_s = max_retry_after_s
        self._temperature = temperature
        self._uds_path = uds_path
        self._timeout_s = timeout_s
        self._max_body_bytes = max_body_bytes
        key = (
            api_key
            if api_key is not None
            else checked_key(os.environ.get(API_KEY_ENV), API_KEY_ENV)
        )
        self._headers = {"authorization": f"Bearer {key}"} if key else {}
        self._ssl: ssl.SSLContext | None = None
        self._proxy = None if uds_path else environment_proxy(self._url)
        self._secrets, self._text_secrets = credential_secrets(parsed, key, self._proxy)
        self._clients = LoopBound(self._new_client)

    def _new_client(self) -> httpx.AsyncClient:
        """An httpx client over aiohttp's connection pool and C HTTP parser (httpx-aiohttp).

        httpx's own transport (httpcore, anyio, h11) spent ~1.6 ms of CPU per call at
        concurrency 32, more than the HTTP exchange: its pool rescans and polls every connection
        on each request (encode/httpx#3215). The aiohttp transport, the one the anthropic SDK
        offers as `DefaultAioHttpClient`, halves that, and one pool serves 32+ connections.
        """
        redact_client_logs()  # httpx logs each request's URL at INFO, query string and all
        # One TLS context for every client: building one loads the CA bundle (tens of ms). Plain
        # HTTP (a local server, a Unix socket) has no TLS, so it loads none.
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context(verify=self._url.scheme == "https")
        limits = httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
        )
        return httpx.AsyncClient(
            transport=CappedTransport(
                AiohttpTransport(
                    uds=self._uds_path,
                    verify=self._ssl,
                    limits=limits,
                    proxy=self._proxy,
                ),
                self._max_body_bytes,
            ),
            headers=self._headers,
            auth=self._auth,
            timeout=httpx.Timeout(self._timeout_s),
        )

    async def complete(self, request: ChatRequest) -> Reply:
        async def call(tries: Tries) -> tuple[Attempt, str]:
            reply = await with_retries(
                lambda: self._send_once(request),
                max_retries=self._max_retries,
                backoff_s=self._backoff_s,
                max_backoff_s=self._max_backoff_s,
                max_retry_after_s=self._max_retry_after_s,
                tries=tries,
            )
            return reply.attempt, reply.raw_body

        return await counted_reply(call)

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
            # httpx's timeout bounds each read; this bounds the whole exchange (a server that
            # trickles its body a byte at a time would otherwise hold the call open).
            async with asyncio.timeout(self._timeout_s):
                try:
                    response = await self._post(payload)
                except (aiohttp.ClientOSError, httpx.TransportError) as exc:
                    if not _never_sent(exc):
                        raise
                    # A pooled connection the server had closed (its keep-alive ran out as the
                    # request went): the request never left, so it is sent again at once on a
                    # new connection, neither counted as one the server saw nor spending a retry.
                    response = await self._post(payload)
        except (httpx.RequestError, aiohttp.ClientError, TimeoutError) as exc:
            failure = _transport_failure(self.provider, exc, self._secrets, self._uds_path)
            raise Retryable(failure, sent=not _never_connected(exc)) from exc
        except RefusedBody as exc:  # not retried: the server would send it again
            raise TransportError(f"{self.provider} {exc}") from None
        latency_ms = (time.perf_counter() - started) * 1000.0
        body = response.text
        if response.status_code != 200:
            error = TransportError(
                f"{self.provider} HTTP {response.status_code}",
                status=response.status_code,
                body=redacted(body, self._secrets),  # a proxy may echo the key
            )
            if should_retry(response.status_code, response.headers):
                raise Retryable(error, retry_after_seconds(response.headers))
            raise error
        try:
            attempt = self._attempt(body, request, latency_ms)
        except MalformedReply as exc:
            exc.body = redacted(exc.body, self._secrets)  # a proxy may echo the key in a 200
            raise
        return Reply(*reply_without_secrets(attempt, body, self._secrets, self._text_secrets))

    async def _post(self, payload: dict[str, object]) -> httpx.Response:
        return await self._clients.get().post(self._url, json=payload)

    def _attempt(self, body: str, request: ChatRequest, latency_ms: float) -> Attempt:
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            message = choice["message"]
            text = valid_text(message["content"] or "")
            # A refusal comes as content null, its text in `refusal`, finish_reason "stop":
            # no answer (NOT_AN_ANSWER), where it had read as a malformed JSON reply.
            refused = message.get("refusal")
            finish_reason = "refusal" if refused else choice.get("finish_reason")
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
        except (
            ValueError,
            KeyError,
            IndexError,
            TypeError,
            AttributeError,
            OverflowError,  # a usage count of 1e400
            RecursionError,  # JSON nested deeper than the parser goes
        ) as exc:
            raise MalformedReply(
                f"{self.provider} returned a body that is not a chat completion: {exc!r}", body=body
            ) from exc

    async def aclose(self) -> None:
        await self._clients.aclose(lambda client: client.aclose())
