"""The hosted baseline: Anthropic's Messages API through the official SDK.

Retries (429/5xx/529 with Retry-After, timeouts, resets) are the SDK's own, bounded by
`max_retries`. `base_url` (or EVALS_ANTHROPIC_BASE_URL) points it at a test server.
"""

from __future__ import annotations

import os
import time

import anthropic

from ..errors import ConfigError, MalformedReply, TransportError
from ..models import Attempt, ChatRequest
from .base import Reply

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
        self._client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=base_url or os.environ.get(BASE_URL_ENV) or None,
            timeout=timeout_s,
            max_retries=max_retries,
        )

    async def complete(self, request: ChatRequest) -> Reply:
        started = time.perf_counter()
        try:
            raw = await self._client.messages.with_raw_response.create(
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
        text = "".join(block.text for block in message.content if block.type == "text")
        return Reply(
            attempt=Attempt(
                text=text,
                finish_reason=message.stop_reason,
                truncated=message.stop_reason == "max_tokens",
                input_tokens=message.usage.input_tokens,
                output_tokens=message.usage.output_tokens,
                max_tokens=request.max_tokens,
                latency_ms=latency_ms,
            ),
            raw_body=body,
        )

    async def aclose(self) -> None:
        await self._client.close()
