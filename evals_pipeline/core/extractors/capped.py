"""A ceiling on a response body's size, for every transport (httpx/aiohttp and the SDK's).

A misbehaving server or proxy can send a body of any size; read whole, it fills memory and
then the failure sidecar. A chat completion or Message is a few kilobytes, so a body past
`MAX_BODY_BYTES` is a fault: reading stops there, and the call fails with a typed error
(not retried, since the same server would send it again).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import httpx

MAX_BODY_BYTES = 32 * 1024 * 1024


class ResponseTooLarge(Exception):
    """The body passed the ceiling; what was read of it is dropped."""

    def __init__(self, limit: int, announced: int | None = None) -> None:
        self.limit = limit
        said = f" (Content-Length {announced:,})" if announced is not None else ""
        super().__init__(f"response body over {limit:,} bytes{said}; not read further")


def too_large(exc: BaseException) -> ResponseTooLarge | None:
    """The ResponseTooLarge `exc` is or wraps (an SDK wraps what its send raised), or None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ResponseTooLarge):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _capped_transport_class(http: ModuleType) -> type:
    """CappedTransport for an httpx-shaped module: httpx itself, or the `httpx2` fork the
    anthropic SDK 2.x runs on (it refuses httpx objects), whose classes are the same."""

    class CappedStream(http.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, limit: int) -> None:
            self._inner = inner
            self._limit = limit

        async def __aiter__(self) -> AsyncIterator[bytes]:
            read = 0
            async for chunk in self._inner:
                read += len(chunk)
                if read > self._limit:
                    raise ResponseTooLarge(self._limit)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(http.AsyncBaseTransport):  # type: ignore[name-defined]
        """Wraps a transport so that no response body past `limit` bytes (as sent, before any
        decompression) is read: refused up front by its Content-Length, or cut off mid-read."""

        def __init__(self, inner: Any, limit: int = MAX_BODY_BYTES) -> None:
            self._inner = inner
            self._limit = limit

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            announced = response.headers.get("content-length", "")
            if announced.isdigit() and int(announced) > self._limit:
                await response.aclose()
                raise ResponseTooLarge(self._limit, int(announced))
            return http.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=CappedStream(response.stream, self._limit),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedTransport


CappedTransport = _capped_transport_class(httpx)


def sdk_capped_transport(client_class: type, limit: int = MAX_BODY_BYTES) -> Any:
    """A capped default transport for an SDK whose client class is `client_class` (a subclass
    of httpx's or httpx2's AsyncClient): built from that package's own classes."""
    package = next(
        base.__module__.partition(".")[0]
        for base in client_class.__mro__
        if base.__name__ == "AsyncClient" and base.__module__.partition(".")[0] != "anthropic"
    )
    http = importlib.import_module(package)
    return _capped_transport_class(http)(http.AsyncHTTPTransport(), limit)
