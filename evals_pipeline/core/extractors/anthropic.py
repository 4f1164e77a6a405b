"""The hosted baseline: Anthropic's Messages API through the official SDK.

Retries (429/5xx/529 with Retry-After, timeouts, resets) follow `retries.py`, bounded by
`max_retries` and `max_backoff_s`; the SDK's own are off (it would wait out any Retry-After).
`base_url` (or EVALS_ANTHROPIC_BASE_URL) points it at a test server or a gateway; the
environment's HTTP(S)_PROXY is honoured, as by the OpenAI-compatible transport. `messages_call`
is shared with the judge.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import ConfigError, MalformedReply, TransportError, exception_chain
from ..models import Attempt, ChatRequest
from ..parsing import valid_text
from .base import LoopBound, Reply, counted_reply
from .capped import MAX_BODY_BYTES, refused_body, sdk_capped_transport
from .credentials import (
    checked_key,
    credential_secrets,
    environment_proxy,
    environment_proxy_url,
)
from .redaction import redact_client_logs, redacted, reply_without_secrets, without_userinfo
from .retries import Retryable, Tries, retry_after_seconds, should_retry, with_retries
from .specs import DEFAULT_MODELS, BackendSpec, url_problem

if TYPE_CHECKING:
    import anthropic

DEFAULT_MODEL = DEFAULT_MODELS["anthropic"]
API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "EVALS_ANTHROPIC_BASE_URL"
# Where the SDK sends requests when given no base_url (its own variable, then its default).
SDK_BASE_URL_ENV = "ANTHROPIC_BASE_URL"
SDK_DEFAULT_BASE_URL = "https://api.anthropic.com"


def anthropic_base_url(base_url: str | None = None) -> str | None:
    """`base_url`, else EVALS_ANTHROPIC_BASE_URL, else None (the SDK's); a URL that is not
    http(s) with a host is a ConfigError naming where it came from, before any call (a typo
    had run, every call failing as an error rate, exit 0)."""
    url = base_url or os.environ.get(BASE_URL_ENV) or None
    if url is not None and (problem := url_problem(url)) is not None:
        where = "base_url" if base_url else BASE_URL_ENV
        raise ConfigError(f"{where} {without_userinfo(url)!r} {problem}")
    return url


def check_base_url_in_use(specs: Iterable[BackendSpec], *, judging: bool) -> str | None:
    """`anthropic_base_url()` where something will send to it (an anthropic backend among
    `specs`, or the judge): a mistyped EVALS_ANTHROPIC_BASE_URL is then an error before any
    step, while a run that never calls Anthropic ignores the variable. Returns the URL the
    SDK will send to (`sdk_base_url`), or None where nothing will."""
    if judging or any(spec.kind == "anthropic" for spec in specs):
        return sdk_base_url(anthropic_base_url())
    return None


def sdk_base_url(base_url: str | None) -> str:
    """The URL the SDK's client sends to, given `base_url` (None: the SDK's choice)."""
    return base_url or os.environ.get(SDK_BASE_URL_ENV) or SDK_DEFAULT_BASE_URL


def client_secrets(key: str, base_url: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What no message of a call through `new_client(key, base_url, ...)` may show, and what no
    reply's text may (`credential_secrets` with and without query values). Both clients ask it
    as they are built, so a key or proxy the SDK cannot send with is a ConfigError naming its
    variable then, not the first call's UnicodeEncodeError."""
    url = sdk_base_url(base_url)
    checked_key(key, API_KEY_ENV)
    # By the SDK's rules: checked by aiohttp's, a SOCKS proxy the SDK can use was refused.
    proxy = environment_proxy(url, sdk=True)
    return credential_secrets(url, key, proxy)


def new_client(
    key: str, base_url: str | None, timeout_s: float, max_body_bytes: int = MAX_BODY_BYTES
) -> anthropic.AsyncAnthropic:
    """An SDK client that makes one attempt per call: `messages_call` does the retrying."""
    import anthropic  # on first use: importing the SDK costs ~1.5 s, most runs never call it

    redact_client_logs()  # the SDK logs each request's URL (at DEBUG), query string and all
    # The SDK's own client class, over a transport that caps response bodies (capped.py).
    # Redirects are not followed, as the OpenAI-compatible transport does not: the SDK's client
    # followed them, re-sending a POST as a bodiless GET on a 301/302, the prompt to another
    # host on a 307/308, and counted the hops as one request. Given a transport, httpx reads no
    # proxy variable: the transport is given the proxy they name.
    proxy = environment_proxy_url(sdk_base_url(base_url))
    http_client = anthropic.DefaultAsyncHttpxClient(
        transport=sdk_capped_transport(anthropic.DefaultAsyncHttpxClient, max_body_bytes, proxy),
        follow_redirects=False,
    )
    return anthropic.AsyncAnthropic(
        api_key=key, base_url=base_url, timeout=timeout_s, max_retries=0, http_client=http_client
    )


async def messages_call(
    client: anthropic.AsyncAnthropic,
    *,
    label: str,
    model: str,
    system: str,
    user: str,
    max_tokens: int,
    timeout_s: float,
    max_retries: int,
    backoff_s: float = 0.5,
    max_backoff_s: float = 8.0,
    max_retry_after_s: float = 60.0,
    tries: Tries | None = None,
    secrets: tuple[str, ...] = (),
    text_secrets: tuple[str, ...] = (),
) -> tuple[Attempt, str]:
    """One Messages call with bounded retries: the reply as an Attempt, and its raw body.
    `tries` counts the requests sent; `secrets` (`client_secrets`) are cut from error bodies,
    `text_secrets` (the credentials among them) from a reply's text.

    Every failure is typed: TransportError (HTTP status, connection, timeout, after the
    retries) or MalformedReply (a 200 whose body is not a Message). `timeout_s` bounds each
    attempt as a whole, not only each read. Messages name `label`, never the key.
    """
    import anthropic  # loaded by new_client already; this binds the name here

    cut = (client.api_key, *secrets)  # what no error body may show
    cut_text = (client.api_key, *text_secrets)  # what no recorded reply may

    async def once() -> tuple[Attempt, str]:
        try:
            return await attempt()
        except Exception as exc:  # the SDK wraps what its send raised in APIConnectionError
            if (cap := refused_body(exc)) is not None:  # not retried: it would come again
                raise TransportError(f"{label} {cap}") from None
            raise

    async def attempt() -> tuple[Attempt, str]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                raw = await client.messages.with_raw_response.create(
                    model=model,
                    max_tokens=max_tokens,
                    system=system,
                    messages=[{"role": "user", "content": user}],
                )
                body = await raw.text()
        except anthropic.APIStatusError as exc:
            # A proxy or gateway may echo the key, or the Basic auth of the URL's user info.
            body = redacted(exc.response.text, cut)
            error = TransportError(
                f"{label} HTTP {exc.status_code}", status=exc.status_code, body=body
            )
            if should_retry(exc.status_code, exc.response.headers):
                raise Retryable(error, retry_after_seconds(exc.response.headers)) from exc
            raise error from None
        except (anthropic.APITimeoutError, TimeoutError) as exc:
            error = TransportError(f"{label} timeout")
            raise Retryable(error, sent=not _never_connected(exc)) from exc
        except anthropic.APIConnectionError as exc:
            # Described by the type of what failed: the SDK's causes carry the request.
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "no detail"
            error = TransportError(f"{label} connection failed: {cause}")
            raise Retryable(error, sent=not _never_connected(exc)) from exc
        except anthropic.APIResponseValidationError as exc:
            raise MalformedReply(
                f"{label} reply failed validation: {exc}",
                body=redacted(str(exc.body), cut),
            ) from exc
        latency_ms = (time.perf_counter() - started) * 1000.0
        try:
            reply = await _message_attempt(raw, body, label, max_tokens, latency_ms)
            return reply_without_secrets(reply, body, cut, cut_text)  # a 200 may echo the key
        except MalformedReply as exc:
            exc.body = redacted(exc.body, cut)
            raise

    return await with_retries(
        once,
        max_retries=max_retries,
        backoff_s=backoff_s,
        max_backoff_s=max_backoff_s,
        max_retry_after_s=max_retry_after_s,
        tries=tries,
    )


async def _message_attempt(
    raw: anthropic.AsyncAPIResponse[anthropic.types.Message],
    body: str,
    label: str,
    max_tokens: int,
    latency_ms: float,
) -> Attempt:
    import anthropic

    try:
        message = await raw.parse()
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deep
        raise MalformedReply(f"{label} body is not JSON: {exc!r}", body=body) from exc
    if not isinstance(message, anthropic.types.Message):
        raise MalformedReply(f"{label} body is not a Message", body=body)
    # The SDK builds the Message without validating it, so a JSON body of the wrong shape
    # (no content, no usage) only fails here, and must still become a failure record.
    try:
        text = valid_text("".join(b.text for b in message.content if b.type == "text"))
        # A gateway may leave usage out, as OpenAI-compatible servers may: 0, not a failure.
        usage = message.usage
        return Attempt(
            text=text,
            finish_reason=message.stop_reason,
            # The context window ran out mid-reply: cut off, as at the token budget.
            truncated=message.stop_reason in ("max_tokens", "model_context_window_exceeded"),
            input_tokens=int(getattr(usage, "input_tokens", None) or 0),
            output_tokens=int(getattr(usage, "output_tokens", None) or 0),
            max_tokens=max_tokens,
            latency_ms=latency_ms,
        )
    except (AttributeError, TypeError, ValueError, OverflowError) as exc:  # Overflow: 1e400
        raise MalformedReply(f"{label} body is not a Message: {exc!r}", body=body) from exc


def _never_connected(exc: BaseException) -> bool:
    """Whether the SDK's error comes from a connection never made (refused, no such host, a
    failed TLS handshake): no server saw the request. By class name, as the SDK's HTTP package
    (httpx or its fork httpx2) has its own classes. True of the httpx(2) transport `new_client`
    builds, whose ConnectError is raised only while connecting (the SDK's aiohttp client calls
    a reset a ConnectError too; a test pins that a reset is counted)."""
    return any(type(e).__name__ in ("ConnectError", "ConnectTimeout") for e in exception_chain(exc))


class AnthropicTransport:
    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_retry_after_s: float = 60.0,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise ConfigError(f"the anthropic backend needs {API_KEY_ENV} to be set")
        self.provider = "anthropic"
        self.model = model
        self._key = key
        self._base_url = anthropic_base_url(base_url)
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._max_retry_after_s = max_retry_after_s
        self._secrets, self._text_secrets = client_secrets(key, self._base_url)
        self._clients = LoopBound(
            lambda: new_client(self._key, self._base_url, self._timeout_s, max_body_bytes)
        )

    async def complete(self, request: ChatRequest) -> Reply:
        return await counted_reply(
            lambda tries: messages_call(
                self._clients.get(),
                label="anthropic",
                model=self.model,
                system=request.system,
                user=request.user,
                max_tokens=request.max_tokens,
                timeout_s=self._timeout_s,
                max_retries=self._max_retries,
                backoff_s=self._backoff_s,
                max_backoff_s=self._max_backoff_s,
                max_retry_after_s=self._max_retry_after_s,
                tries=tries,
                secrets=self._secrets,
                text_secrets=self._text_secrets,
            )
        )

    async def aclose(self) -> None:
        await self._clients.aclose(lambda client: client.close())
