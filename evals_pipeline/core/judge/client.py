"""The judge model over the official anthropic SDK, always behind the judge cache.

Only a whole verdict is cached: a reply cut off by its token budget or refused would be read
back as a malformed verdict on every later run, so it is an error (a judge error in the tally).
"""

from __future__ import annotations

import asyncio
import os

from ..errors import MalformedReply
from ..extractors.anthropic import BASE_URL_ENV, messages_call, new_client
from ..extractors.base import LoopBound
from .cache import JudgeCache, judge_key

DEFAULT_JUDGE_MODEL = "claude-sonnet-4-6"


class JudgeClient:
    """`calls` counts requests that reached the judge; `hits` those the cache answered."""

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
        self._base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._max_tokens = max_tokens
        self._clients = LoopBound(lambda: new_client(self._key, self._base_url, self._timeout_s))
        self._concurrency = concurrency
        self._gates: LoopBound[asyncio.Semaphore] = LoopBound(
            lambda: asyncio.Semaphore(self._concurrency)
        )
        self.calls = 0
        self.hits = 0

    async def judge(self, prompt_name: str, system: str, user: str) -> str:
        key = judge_key(prompt_name, system, user, self.model)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        async with self._gates.get():
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
            )
        if attempt.truncated or attempt.finish_reason == "refusal":
            # Not a verdict: cached, it would be read back as a malformed one on every run.
            raise MalformedReply(
                f"judge reply stopped at {attempt.finish_reason!r}, not a whole verdict", body=body
            )
        self.cache.put(key, prompt_name, self.model, attempt.text)
        return attempt.text

    async def aclose(self) -> None:
        await self._clients.aclose(lambda c: c.close())
