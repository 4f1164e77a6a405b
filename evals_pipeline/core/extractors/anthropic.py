"""The hosted baseline: Anthropic's Messages API through the official SDK.

Retries (429/5xx/529 with Retry-After, timeouts, resets) are the SDK's own, bounded by
`max_retries`. `base_url` (or EVALS_ANTHROPIC_BASE_URL) points it at a test server.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from ..errors import ConfigError, MalformedReply, TransportError
from ..models import Attempt, ChatRequest
from .base import LoopBound, Reply

if TYPE_CHECKING:
    import anthropic

DEFAULT_MODEL = "claude-sonnet-4-6"
API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "EVALS_ANTHROPIC_BASE_URL"


class AnthropicTransport:
    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            raise ConfigError(f"the anthropic backend needs {API_KEY_ENV} to be set")
        self.provider = "anthropic"
        self.model = model
        self._key = key
        self._base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._clients = LoopBound(self._new_client)

    def _new_client(self) -> anthropic.AsyncAnthropic:
        import anthropic  # on first use: importing the SDK costs ~1.5 s, most runs never call it

        return anthropic.AsyncAnthropic(
            api_key=self._key,
            base_url=self._base_url,
            timeout=self._timeout_s,
            max_retries=self._max_retries,
        )

    async def complete(self, request: ChatRequest) -> Reply:
        import anthropic  # loaded by _new_client already; this binds the name here

        started = time.perf_counter()
        try:
            raw = await self._clients.get().messages.with_raw_response.create(
                model=self.model,
                max_tokens=request.max_tokens,
                system=request.system,
                messages=[{"role": "user", "content": request.user}],
            )
        except anthropic.APIStatusError as exc:
            raise TransportError(
                f"anthropic HTTP {exc.status_code}", status=exc.status_code, body=exc.response.text
            ) from exc
        except anthropic.APIConnectionError as exc:  # includes APITimeoutError
            raise TransportError(f"anthropic connection failed: {exc!r}") from exc
        except anthropic.APIResponseValidationError as exc:
            raise MalformedReply(
                f"anthropic reply failed validation: {exc}", body=str(exc.body)
            ) from exc
        body = await raw.text()
        latency_ms = (time.perf_counter() - started) * 1000.0
        try:
            message = await raw.parse()
        except ValueError as exc:
            raise MalformedReply(f"anthropic body is not JSON: {exc!r}", body=body) from exc
        if not isinstance(message, anthropic.types.Message):
            raise MalformedReply("anthropic body is not a Message", body=body)
        # The SDK builds the Message without validating it, so a JSON body of the wrong shape
        # (no content, no usage) only fails here, and must still become a failure record.
        try:
            text = "".join(block.text for block in message.content if block.type == "text")
            attempt = Attempt(
                text=text,
                finish_reason=message.stop_reason,
                truncated=message.stop_reason == "max_tokens",
                input_tokens=message.usage.input_tokens,
                output_tokens=message.usage.output_tokens,
                max_tokens=request.max_tokens,
                latency_ms=latency_ms,
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise MalformedReply(f"anthropic body is not a Message: {exc!r}", body=body) from exc
        return Reply(attempt=attempt, raw_body=body)

    async def aclose(self) -> None:
        await self._clients.aclose(lambda client: client.close())
