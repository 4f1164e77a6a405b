"""The capped transport's inflater, fed as a socket may feed it: in reads of any size.

The transport end to end (through loopback servers and both SDK clients) is in the backends'
tests; here are the stream edges a server cannot be made to produce on demand.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable

import pytest

from evals_pipeline.core.extractors.capped import ResponseTooLarge, TrailingBytes, _Inflater

BODY = json.dumps({"choices": [{"message": {"content": "x" * 500}}]}).encode()


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def _inflate(coding: str, reads: list[bytes], limit: int = 1_000_000) -> bytes:
    layer = _Inflater(coding, limit)
    return b"".join(layer.feed(read) for read in reads) + layer.finish()


def _split(data: bytes, *sizes: int) -> list[bytes]:
    reads, at = [], 0
    for size in sizes:
        reads.append(data[at : at + size])
        at += size
    return [*reads, data[at:]]


@pytest.mark.parametrize(
    "reads",
    [
        lambda body: [body],
        lambda body: _split(body, 0, 1),  # an empty read, then one byte: neither tells
        lambda body: _split(body, 1, 0, 1),
        lambda body: [body[i : i + 1] for i in range(len(body))],
    ],
    ids=["whole", "empty-then-one-byte", "one-empty-one", "byte-by-byte"],
)
@pytest.mark.parametrize("wrapped", [True, False], ids=["zlib", "raw"])
def test_deflate_in_either_wrapping_however_it_is_read(
    reads: Callable[[bytes], list[bytes]], wrapped: bool
) -> None:
    """Whether a deflate body has the zlib wrapping is told from its first two bytes; it had
    been decided on the first read, so an empty or one-byte first read of a raw stream took it
    for zlib and failed on the rest."""
    body = zlib.compress(BODY) if wrapped else _raw_deflate(BODY)
    assert _inflate("deflate", reads(body)) == BODY


def test_gzip_read_byte_by_byte() -> None:
    body = gzip.compress(BODY)
    assert _inflate("gzip", [body[i : i + 1] for i in range(len(body))]) == BODY


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_a_stream_cut_before_its_end_is_an_error(coding: str) -> None:
    body = gzip.compress(BODY) if coding == "gzip" else zlib.compress(BODY)
    with pytest.raises(zlib.error, match="cut short"):
        _inflate(coding, [body[: len(body) - 6]])


def _bytewise(body: bytes) -> list[bytes]:
    return [body[i : i + 1] for i in range(len(body))]


@pytest.mark.parametrize("reads", [lambda body: [body], _bytewise], ids=["whole", "byte-by-byte"])
@pytest.mark.parametrize(
    "compress",
    [gzip.compress, zlib.compress, _raw_deflate],
    ids=["gzip", "deflate-zlib", "deflate-raw"],
)
def test_bytes_after_the_stream_end_are_an_error(
    compress: Callable[[bytes], bytes], reads: Callable[[bytes], list[bytes]]
) -> None:
    """A body with bytes past its end marker is malformed; they had been dropped unseen."""
    coding = "gzip" if compress is gzip.compress else "deflate"
    with pytest.raises(TrailingBytes, match=f"follow the end of the {coding} stream"):
        _inflate(coding, reads(compress(BODY) + b"<html>proxy error</html>"))


@pytest.mark.parametrize("reads", [lambda body: [body], _bytewise], ids=["whole", "byte-by-byte"])
def test_a_gzip_body_of_several_members_is_read_whole(
    reads: Callable[[bytes], list[bytes]],
) -> None:
    """RFC 1952 lets members follow one another; each is inflated, as `gzip.decompress` does."""
    body = gzip.compress(BODY[:100]) + gzip.compress(BODY[100:])
    assert _inflate("gzip", reads(body)) == BODY


def test_a_later_gzip_member_cut_short_is_an_error() -> None:
    second = gzip.compress(BODY[100:])
    with pytest.raises(zlib.error, match="cut short"):
        _inflate("gzip", [gzip.compress(BODY[:100]) + second[: len(second) - 6]])
    with pytest.raises(zlib.error, match="cut short"):  # no more than its first magic byte
        _inflate("gzip", [gzip.compress(BODY[:100]) + b"\x1f"])


def test_the_ceiling_counts_every_gzip_member() -> None:
    with pytest.raises(ResponseTooLarge, match="decoded"):
        _inflate("gzip", [gzip.compress(b" " * 600) * 2], limit=1_000)


def test_an_empty_body_is_empty() -> None:
    """No bytes at all (an error reply that says gzip and sends nothing) is no stream to end."""
    assert _inflate("gzip", [b""]) == b""
    assert _inflate("deflate", []) == b""


def test_the_ceiling_counts_decoded_bytes() -> None:
    with pytest.raises(ResponseTooLarge, match="decoded"):
        _inflate("deflate", [zlib.compress(b" " * 10_000)], limit=1_000)


@pytest.mark.parametrize("reads", [lambda body: [body], _bytewise], ids=["whole", "byte-by-byte"])
def test_zero_padding_after_a_gzip_body_is_read_as_gzip_reads_it(
    reads: Callable[[bytes], list[bytes]],
) -> None:
    """`gzip.decompress` passes over zero bytes after a member (and reads a member after
    them); a padded body had been refused once trailing bytes were."""
    padded = gzip.compress(BODY) + b"\0" * 8
    assert gzip.decompress(padded) == BODY
    assert _inflate("gzip", reads(padded)) == BODY
    assert _inflate("gzip", reads(padded + gzip.compress(b"!"))) == BODY + b"!"
    with pytest.raises(TrailingBytes):
        _inflate("gzip", reads(padded + b"junk"))
    with pytest.raises(TrailingBytes):
        _inflate("deflate", reads(zlib.compress(BODY) + b"\0"))  # deflate has no padding
