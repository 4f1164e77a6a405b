"""The judge model over the official anthropic SDK, always behind the judge cache.

Only a verdict that parses is cached: a reply cut off by its token budget, refused, or not of
the asked-for shape would be read back as the same judge error on every later run, so it is an
error now (a judge error in the tally) and the next run asks again. A cached entry that does not
parse (written before this rule) is asked again too, and the new verdict is appended after it.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import BaseModel

from ..cassettes.store import off_loop
from ..config import DEFAULT_JUDGE_MODEL
from ..errors import CassetteWriteError, MalformedReply
from ..extractors.anthropic import (
    anthropic_base_url,
    client_secrets,
    messages_call,
    new_client,
)
from ..extractors.base import NOT_AN_ANSWER, LoopBound
from ..parsing import parse_structured
from .cache import JudgeCache, judge_key

V = TypeVar("V", bound=BaseModel)


class JudgeClient:
    """`calls` counts judge calls made (a call retried after a 429 or 5xx is one call); `hits`
    those the cache answered."""

    def __init__(
        self,
        cache: JudgeCache,
        *,
        api_key: str,
        model: str = DEFAULT_JUDGE_MODEL,
        base_url: str | None = None,
        concurrency: int = 8,
        max_tokens: int = 1024,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.cache = cache
        self.model = model
        self._key = api_key
        self._base_url = anthropic_base_url(base_url)
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._max_tokens = max_tokens
        self._secrets, self._text_secrets = client_secrets(api_key, self._base_url)
        self._clients = LoopBound(lambda: new_client(self._key, self._base_url, self._timeout_s))
        self._concurrency = concurrency
        self._gates: LoopBound[asyncio.Semaphore] = LoopBound(
            lambda: asyncio.Semaphore(self._concurrency)
        )
        self.calls = 0
        self.hits = 0
        # The cache could not be written (a full disk): every further verdict would be paid
        # for and lost, so no further call is made. Calls in flight finish.
        self._stopped: CassetteWriteError | None = None
        # key -> the call asking it now: the same prompt asked again meanwhile (a pairwise pair
        # whose two slots hold the same graph asks one prompt in both orders) waits for it.
        self._in_flight: LoopBound[dict[str, asyncio.Future[Any]]] = LoopBound(dict)

    async def judge(self, prompt_name: str, system: str, user: str, shape: type[V]) -> V:
        """The verdict as `shape`; MalformedReply (uncached) when the reply is not one."""
        key = judge_key(prompt_name, system, user, self.model)
        cached = self.cache.verdict(key, shape)
        if cached is not None:
            self.hits += 1
            return cached
        flights = self._in_flight.get()
        if (flight := flights.get(key)) is not None:
            verdict: V = await asyncio.shield(flight)
            self.hits += 1  # answered without a call, as from the cache
            return verdict
        flights[key] = flight = asyncio.get_running_loop().create_future()
        try:
            verdict = await self._call(key, prompt_name, system, user, shape)
        except asyncio.CancelledError:
            flight.cancel()
            raise
        except BaseException as exc:  # waiters get what the call ended in, never hang
            flight.set_exception(exc)
            flight.exception()  # retrieved: no waiter is owed a warning
            raise
        else:
            flight.set_result(verdict)
            return verdict
        finally:
            del flights[key]

    async def _call(self, key: str, prompt_name: str, system: str, user: str, shape: type[V]) -> V:
        # The slot is held until the verdict is cached: a cache that cannot be written stops
        # the judging before the next call (its write, off the loop, lets other tasks run).
        async with self._gates.get():
            if self._stopped is not None:
                raise self._stopped
            self.calls += 1
            attempt, body = await messages_call(
                self._clients.get(),
                label="judge",
                model=self.model,
                system=system,
                user=user,
                max_tokens=self._max_tokens,
                timeout_s=self._timeout_s,
                max_retries=self._max_retries,
                secrets=self._secrets,
                text_secrets=self._text_secrets,
            )
            if attempt.truncated or attempt.finish_reason in NOT_AN_ANSWER:
                # Not a verdict: cached, it would be read back as a malformed one on every run.
                raise MalformedReply(
                    f"judge reply stopped at {attempt.finish_reason!r}, not a whole verdict",
                    body=body,
                )
            verdict, _status = parse_structured(attempt.text, shape)
            if verdict is None:
                raise MalformedReply(f"judge reply is not a {shape.__name__} verdict", body=body)
            try:  # off the loop: another process may hold the cache's lock
                text = attempt.text
                await off_loop(lambda: self.cache.put(key, prompt_name, self.model, text))
            except CassetteWriteError as exc:
                self._stopped = exc
                raise
            return verdict

    async def aclose(self) -> None:
        await self._clients.aclose(lambda c: c.close())
