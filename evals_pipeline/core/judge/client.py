"""The judge model over the official anthropic SDK, always behind the judge cache."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from ..errors import TransportError
from ..extractors.anthropic import BASE_URL_ENV
from ..extractors.base import LoopBound
from .cache import JudgeCache, judge_key

if TYPE_CHECKING:
    import anthropic

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
        self._clients = LoopBound(self._new_client)
        self._concurrency = concurrency
        self._gates: LoopBound[asyncio.Semaphore] = LoopBound(
            lambda: asyncio.Semaphore(self._concurrency)
        )
        self.calls = 0
        self.hits = 0

    def _new_client(self) -> anthropic.AsyncAnthropic:
        import anthropic  # on first use: importing the SDK costs ~1.5 s, most runs never call it

        return anthropic.AsyncAnthropic(
            api_key=self._key,
            base_url=self._base_url,
            timeout=self._timeout_s,
            max_retries=self._max_retries,
        )

    async def judge(self, prompt_name: str, system: str, user: str) -> str:
        key = judge_key(prompt_name, system, user, self.model)
        cached = self.cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        import anthropic  # only for a call the cache cannot answer, as in _new_client

        async with self._gates.get():
            self.calls += 1
            try:
                message = await self._clients.get().messages.create(
                    model=self.model,
                    max_tokens=self._max_tokens,
                    system=system,
                    messages=[{"role": "user", "content": user}],
                )
            except anthropic.APIStatusError as exc:
                raise TransportError(
                    f"judge HTTP {exc.status_code}", status=exc.status_code, body=exc.response.text
                ) from exc
            except anthropic.APIConnectionError as exc:
                raise TransportError(f"judge connection failed: {exc!r}") from exc
        text = "".join(b.text for b in message.content if b.type == "text")
        self.cache.put(key, prompt_name, self.model, text)
        return text

    async def aclose(self) -> None:
        await self._clients.aclose(lambda c: c.close())
