import asyncio
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from evals_pipeline.core.errors import TransportError
from evals_pipeline.core.extractors.retries import (
    Retryable,
    retry_after_seconds,
    retryable_status,
    with_retries,
)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 520, 529])
def test_retryable_statuses(status: int) -> None:
    assert retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_client_errors_are_final(status: int) -> None:
    assert not retryable_status(status)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the finer one first
        ({"retry-after-ms": "-1", "retry-after": "3"}, 3.0),  # a bad ms form falls through
        ({}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "-inf", "soon", ""])
@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
def test_a_retry_after_that_is_no_time_is_ignored(header: str, value: str) -> None:
    """Ignored, so the backoff applies: nan would sleep forever, a negative number not at all."""
    assert retry_after_seconds({header: value}) is None


def test_an_http_date_retry_after() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    seconds = retry_after_seconds({"retry-after": later})
    assert seconds is not None and 25 <= seconds <= 31
    earlier = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert retry_after_seconds({"retry-after": earlier}) == 0.0


def test_bounded_attempts_then_the_last_error() -> None:
    seen: list[float] = []

    async def attempt() -> str:
        seen.append(time.monotonic())
        raise Retryable(TransportError(f"HTTP 503 #{len(seen)}", status=503))

    with pytest.raises(TransportError, match="#3") as err:
        asyncio.run(with_retries(attempt, max_retries=2, backoff_s=0.01, max_backoff_s=0.01))
    assert len(seen) == 3 and err.value.__cause__ is None  # not chained: no request repr


def test_waits_follow_retry_after_capped_else_the_jittered_backoff() -> None:
    seen: list[float] = []

    async def attempt() -> str:
        seen.append(time.monotonic())
        if len(seen) == 1:
            raise Retryable(TransportError("429"), retry_after=30.0)  # capped to 0.05
        if len(seen) == 2:
            raise Retryable(TransportError("503"))  # backoff: 0.4 * 2 = 0.8, jittered 0.6-0.8
        return "ok"

    assert (
        asyncio.run(
            with_retries(
                attempt, max_retries=3, backoff_s=0.4, max_backoff_s=0.8, max_retry_after_s=0.05
            )
        )
        == "ok"
    )
    first, second = seen[1] - seen[0], seen[2] - seen[1]
    assert first < 0.5
    assert 0.55 <= second < 1.5


def test_other_errors_are_not_retried() -> None:
    calls = 0

    async def attempt() -> str:
        nonlocal calls
        calls += 1
        raise TransportError("HTTP 400", status=400)

    with pytest.raises(TransportError):
        asyncio.run(with_retries(attempt, max_retries=5, backoff_s=0.01, max_backoff_s=0.01))
    assert calls == 1
