"""Bounded retries for the live transports (OpenAI-compatible, Anthropic, the judge).

One policy for every provider: 408/409/429 and every 5xx (529 included), timeouts, resets,
short bodies and failed connections (refused, no such host) are tried again at most
`max_retries` times. The wait honours Retry-After up to `max_retry_after_s` (60 s: a rate
limit often asks for 20-60 s; a server asking for a day, or for `nan`, gets the cap or the
backoff); otherwise it doubles from `backoff_s` up to `max_backoff_s`, with jitter so
concurrent calls do not retry in lockstep. The anthropic SDK's own retries are turned off for
this: it honours any Retry-After up to ~50 days.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from ..errors import EvalsError

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every status from 500 up


def retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an error status is retried: as the server's `x-should-retry` says when it says
    (`true` or `false`, as both SDKs read it before the status), else by the status."""
    said = headers.get("x-should-retry")
    if said == "true":
        return True
    if said == "false":
        return False
    return retryable_status(status)


@dataclass
class Tries:
    """How many times `with_retries` tried: the HTTP requests a call sent, failed ones too."""

    count: int = 0


class Retryable(Exception):
    """Raised by one attempt that may be tried again; `error` is what the caller sees if not.
    `sent=False`: no connection was made (refused, no such host or socket), so no server saw
    the request and it is not counted as one."""

    def __init__(
        self, error: EvalsError, retry_after: float | None = None, *, sent: bool = True
    ) -> None:
        self.error = error
        self.retry_after = retry_after
        self.sent = sent


def _seconds(text: str, scale: float = 1.0) -> float | None:
    """A finite, non-negative number of seconds, or None (`nan` would make the wait endless)."""
    try:
        value = float(text) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Retry-After as seconds: `retry-after-ms`, then seconds, then an HTTP date. A value that
    is not a finite, non-negative time is ignored (the backoff applies)."""
    ms = headers.get("retry-after-ms")
    if ms is not None and (seconds := _seconds(ms, 0.001)) is not None:
        return seconds
    value = headers.get("retry-after")
    if value is None:
        return None
    if (seconds := _seconds(value)) is not None:
        return seconds
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


async def with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    backoff_s: float,
    max_backoff_s: float,
    max_retry_after_s: float = 60.0,
    tries: Tries | None = None,
) -> T:
    """`attempt()` until it returns, raises something other than Retryable, or has been tried
    `max_retries + 1` times; then the last Retryable's error is raised. `tries` counts them."""

    def wait(retry_state: Any) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(exc, Retryable) and exc.retry_after is not None:
            return min(float(exc.retry_after), max_retry_after_s)
        backoff = min(backoff_s * 2 ** (retry_state.attempt_number - 1), max_backoff_s)
        return backoff * random.uniform(0.75, 1.0)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(max_retries + 1),
        wait=wait,
        retry=retry_if_exception(lambda e: isinstance(e, Retryable)),
        reraise=True,
    )
    try:
        async for trial in retrying:
            with trial:
                if tries is not None:
                    tries.count += 1
                try:
                    return await attempt()
                except Retryable as exc:
                    if tries is not None and not exc.sent:
                        tries.count -= 1
                    raise
    except Retryable as exc:
        # Not chained: a cause's repr (a connection key, a request) can show credentials.
        raise exc.error from None
    raise AssertionError("unreachable")  # pragma: no cover
