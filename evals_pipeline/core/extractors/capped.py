"""A ceiling on a response body's size, for every transport (httpx/aiohttp and the SDK's).

A misbehaving server or proxy can send a body of any size; read whole, it fills memory and
then the failure sidecar. A chat completion or Message is a few kilobytes, so a body past
`MAX_BODY_BYTES` is a fault: reading stops there, and the call fails with a typed error
(not retried, since the same server would send it again).

The ceiling holds for the body as decoded, not only as sent: a gzip body of 32 KB can inflate
to 32 MB (a "zip bomb"), and httpx would inflate it whole. So the capped transport asks for
gzip or deflate only, inflates them itself a bounded step at a time, and hands the client a
body with no Content-Encoding left to decode; any other coding is refused.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import httpx

from ..errors import exception_chain

MAX_BODY_BYTES = 32 * 1024 * 1024

# The codings the capped transport asks for and can inflate under the ceiling (zlib's).
ACCEPTED_ENCODINGS = "gzip, deflate"


class RefusedBody(Exception):
    """A response body the capped transport would not read; what was read of it is dropped."""


class ResponseTooLarge(RefusedBody):
    """The body passed the ceiling (as sent, or as decoded)."""

    def __init__(self, limit: int, announced: int | None = None, *, decoded: bool = False) -> None:
        self.limit = limit
        said = f" (Content-Length {announced:,})" if announced is not None else ""
        what = "response body, decoded," if decoded else "response body"
        super().__init__(f"{what} over {limit:,} bytes{said}; not read further")


class UnsupportedEncoding(RefusedBody):
    """The body came in a Content-Encoding that was not asked for and cannot be bounded."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        super().__init__(
            f"response Content-Encoding {encoding!r} not accepted (asked for {ACCEPTED_ENCODINGS})"
        )


def refused_body(exc: BaseException) -> RefusedBody | None:
    """The RefusedBody `exc` is or wraps (an SDK wraps what its send raised), or None."""
    return next((e for e in exception_chain(exc) if isinstance(e, RefusedBody)), None)


def _codings(header: str) -> list[str]:
    """The Content-Encoding codings in the order they were applied, identity dropped."""
    named = (part.strip().lower() for part in header.split(","))
    return [coding for coding in named if coding and coding != "identity"]


class TrailingBytes(zlib.error):
    """Bytes after a compressed stream's end that start no further gzip member."""


class _Inflater:
    """One gzip or deflate layer, inflated at most `limit` bytes in all."""

    def __init__(self, coding: str, limit: int) -> None:
        self._coding = coding
        self._room = limit
        self._limit = limit
        # deflate: RFC 9110 means the zlib wrapping, which some servers omit; tried first, as
        # httpx does, and a raw stream is inflated if the first bytes are not a zlib header.
        # That is told from two bytes, so they are gathered first (a read may bring fewer).
        wbits = zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._inflater = zlib.decompressobj(wbits)
        self._head = b""  # deflate's first bytes, until there are two
        self._started = False

    def feed(self, data: bytes) -> bytes:
        if not self._started:
            self._head += data
            if self._coding == "deflate" and len(self._head) < 2:
                return b""
            data, self._head = self._head, b""
            if not data:
                return b""
            self._started = True
            try:
                return self._inflate(data)
            except zlib.error as exc:
                if self._coding != "deflate" or isinstance(exc, TrailingBytes):
                    raise
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._inflate(data)

    def _inflate(self, data: bytes) -> bytes:
        """`data` inflated. Past a stream's end marker, a gzip body may hold another member
        (RFC 1952: they are concatenated) and zero padding, as `gzip.decompress` reads them;
        any other bytes there are a malformed body, not to be dropped unseen, as httpx's
        decoder drops them."""
        out = self._spend(self._inflater.decompress(data, self._room + 1))
        while self._inflater.eof and (rest := self._inflater.unused_data):
            if self._coding != "deflate":
                # (an ended stream keeps what it is fed after, so later zeros are seen here)
                rest = rest.lstrip(b"\0")
                if not rest:
                    break
            if self._coding == "deflate" or not b"\x1f\x8b".startswith(rest[:2]):
                raise TrailingBytes(
                    f"{len(rest)} bytes follow the end of the {self._coding} stream"
                )
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
            out += self._spend(self._inflater.decompress(rest, self._room + 1))
        return out

    def finish(self) -> bytes:
        if self._head:  # a deflate body of one byte: no zlib header, so raw (which fails)
            self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            self._started = True
            self._inflate(self._head)
        rest = self._spend(self._inflater.flush())
        if self._started and not self._inflater.eof:
            # httpx passes a cut-off stream as whatever inflated; a reply cut short is a fault
            raise zlib.error("the stream ends before its end marker (the body was cut short)")
        return rest

    def _spend(self, out: bytes) -> bytes:
        if len(out) > self._room:
            raise ResponseTooLarge(self._limit, decoded=True)
        self._room -= len(out)
        return out


def _capped_transport_class(http: ModuleType) -> type:
    """CappedTransport for an httpx-shaped module: httpx itself, or the `httpx2` fork the
    anthropic SDK 2.x runs on (it refuses httpx objects), whose classes are the same."""

    class CappedStream(http.AsyncByteStream):  # type: ignore[name-defined]
        def __init__(self, inner: Any, limit: int, codings: list[str]) -> None:
            self._inner = inner
            self._limit = limit
            self._codings = codings

        async def __aiter__(self) -> AsyncIterator[bytes]:
            # Applied in header order, so undone last first.
            layers = [_Inflater(coding, self._limit) for coding in reversed(self._codings)]
            read = 0
            try:
                async for chunk in self._inner:
                    read += len(chunk)
                    if read > self._limit:
                        raise ResponseTooLarge(self._limit)
                    for layer in layers:
                        chunk = layer.feed(chunk)
                    if chunk:
                        yield chunk
                for at, layer in enumerate(layers):
                    rest = layer.finish()
                    for later in layers[at + 1 :]:
                        rest = later.feed(rest)
                    if rest:
                        yield rest
            except zlib.error as exc:  # as httpx's own decoders report it
                raise http.DecodingError(f"response body not {self._codings}: {exc}") from None

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(http.AsyncBaseTransport):  # type: ignore[name-defined]
        """Wraps a transport so that no response body past `limit` bytes, as sent or as
        decoded, is read: refused up front by its Content-Length, or cut off mid-read."""

        def __init__(self, inner: Any, limit: int = MAX_BODY_BYTES) -> None:
            self._inner = inner
            self._limit = limit

        async def handle_async_request(self, request: Any) -> Any:
            request.headers["Accept-Encoding"] = ACCEPTED_ENCODINGS
            response = await self._inner.handle_async_request(request)
            announced = response.headers.get("content-length", "")
            if announced.isdigit() and int(announced) > self._limit:
                await response.aclose()
                raise ResponseTooLarge(self._limit, int(announced))
            headers = response.headers
            codings = _codings(headers.get("content-encoding", ""))
            if unknown := [c for c in codings if c not in ("gzip", "x-gzip", "deflate")]:
                await response.aclose()
                raise UnsupportedEncoding(", ".join(unknown))
            if codings:  # decoded here: the client must not decode it again
                # As sent, in bytes: a value need not be ASCII (latin-1 is allowed on the wire)
                headers = http.Headers(
                    [
                        (name, value)
                        for name, value in headers.raw
                        if name.lower() not in (b"content-encoding", b"content-length")
                    ],
                    encoding=headers.encoding,
                )
            return http.Response(
                status_code=response.status_code,
                headers=headers,
                stream=CappedStream(response.stream, self._limit, codings),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedTransport


CappedTransport = _capped_transport_class(httpx)


def sdk_capped_transport(
    client_class: type, limit: int = MAX_BODY_BYTES, proxy: str | None = None
) -> Any:
    """A capped default transport for an SDK whose client class is `client_class` (a subclass
    of httpx's or httpx2's AsyncClient), through `proxy` if given: built from that package's
    own classes."""
    package = next(
        base.__module__.partition(".")[0]
        for base in client_class.__mro__
        if base.__name__ == "AsyncClient" and base.__module__.partition(".")[0] != "anthropic"
    )
    http = importlib.import_module(package)
    return _capped_transport_class(http)(http.AsyncHTTPTransport(proxy=proxy), limit)
