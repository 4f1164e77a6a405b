"""Keeping credentials out of errors, error bodies, sidecars and logs.

Shared by the live transports: whatever a provider, a proxy or a connection error says back is
passed through `redacted` before it becomes a message or a failure record, and a reply's text
through `without_secrets` before it is recorded.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..models import Attempt

# A URL in an error message, split so its user info and query string (where a key can hide) can
# be dropped: aiohttp puts the request URL in some messages ("Connection timeout to host ...").
_URL_IN_TEXT = re.compile(r"(\w[\w+.-]*://)(?:[^/\s@'\"]*@)?([^\s?#'\"]*)(?:[?#][^\s'\")]*)?")
# aiohttp's ConnectionKey (in a connection error's repr) carries the proxy's credentials.
_BASIC_AUTH_IN_TEXT = re.compile(r"BasicAuth\([^)]*\)")
# A placeholder key ("x", "EMPTY", common for local servers) is no secret: replacing it would
# turn every message into asterisks.
SECRET_MIN_LEN = 8


def without_url_secrets(text: str) -> str:
    """`text` with any URL's user info, query string and fragment, and Basic auth objects, gone."""
    return _BASIC_AUTH_IN_TEXT.sub("BasicAuth(...)", _URL_IN_TEXT.sub(r"\1\2", text))


# A spec's NAME=VALUE items after its kind: a value runs to the next `,NAME=` (a password can
# hold a comma).
_SPEC_ITEM = re.compile(
    r"[:,]\s*([A-Za-z_][\w-]*)\s*=(.*?)(?=,\s*[A-Za-z_][\w-]*\s*=|$)", re.DOTALL
)
# Parameters that are never URLs (a model name may hold an @: claude-…@20240620).
_NOT_URLS = frozenset({"model", "path", "timeout", "retries"})
_SCHEME = re.compile(r"^\s*[A-Za-z][\w+.-]*:/+")
_AUTHORITY_END = re.compile(r"[/?#]")


def url_secrets(url: str) -> list[str]:
    """What of `url` an error must not echo, as written (not as `urlsplit` normalises it): its
    user info, and its query string and fragment. In a URL that parses the host part ends at
    the first `/`, `?` or `#` after the scheme. One that does not (no scheme, `http:/`, a `/`,
    `?` or `#` in the password) is read warily: everything before its last `@` (after any
    scheme) is user info."""
    from .specs import url_problem  # (specs imports this module's users, not this module)

    scheme = _SCHEME.match(url)
    rest = url[scheme.end() :] if scheme else url
    if url_problem(url) is None:
        end = _AUTHORITY_END.search(rest)
        authority = rest[: end.start()] if end else rest
    else:
        authority = rest[: rest.rindex("@") + 1] if "@" in rest else ""
    userinfo = authority[: authority.rindex("@") + 1] if "@" in authority else ""
    query = re.search(r"[?#].*", rest[len(authority) :], re.DOTALL)
    found = [userinfo, query.group(0) if query else ""]
    return [secret for secret in found if len(secret.strip()) >= 2]


def without_userinfo(url: str) -> str:
    """`url`, however mistyped, without what `url_secrets` finds in it."""
    for secret in url_secrets(url):
        url = url.replace(secret, "", 1)
    return url


def spec_secrets(spec: str) -> list[str]:
    """What a spec error must not echo: the `url_secrets` of each value that is or may be a URL
    (a url= or uri= in any case, a second url=, or an unknown parameter's value holding an `@`
    after a `:`, a `?` or a `#`), each comma-split piece of them (a problem quotes a piece when a
    comma split the spec), and their repr forms (a problem quotes values with !r)."""
    found: list[str] = []
    for match in _SPEC_ITEM.finditer(spec):
        name, value = match.group(1).lower(), match.group(2)
        if name in _NOT_URLS:
            continue
        may_be_url = name in ("url", "uri") or "?" in value or "#" in value
        if may_be_url or ("@" in value and ":" in value[: value.rindex("@")]):
            found += url_secrets(value)
    # A piece too short to be worth hiding would only garble the message where it recurs.
    pieces = [piece for secret in found for piece in secret.split(",") if len(piece) >= 3]
    every = [*found, *pieces]
    return sorted({*every, *(repr(s)[1:-1] for s in every)}, key=len, reverse=True)


def redacted(text: str, secrets: Iterable[str | None]) -> str:
    """`without_url_secrets(text)` with each known secret (an API key, a URL's or a proxy's
    password) replaced by `***` wherever it appears."""
    text = without_url_secrets(text)
    for secret in secrets:
        if secret is not None and len(secret) >= SECRET_MIN_LEN:
            text = text.replace(secret, "***")
    return text


def without_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with each known secret replaced by `***`, and nothing else changed: for a reply's
    text, which is recorded and parsed, so its URLs are the model's to keep."""
    for secret in secrets:
        if secret is not None and len(secret) >= SECRET_MIN_LEN and secret in text:
            text = text.replace(secret, "***")
    return text


def reply_without_secrets(
    attempt: Attempt,
    body: str,
    secrets: Iterable[str | None],
    text_secrets: Iterable[str | None],
) -> tuple[Attempt, str]:
    """A 200 reply as it may be kept: the attempt's text (recorded in a cassette) without the
    credentials of `text_secrets`, and the raw body (a failure record's, if it fails to parse)
    `redacted` of `secrets`. A proxy or gateway may echo the request's headers, key and all,
    into a body that is not an error. The text keeps a URL's query values: it is the model's
    answer, where `2024-06-01` (an `api-version=`) is a date."""
    text = without_secrets(attempt.text, text_secrets)
    if text is not attempt.text:
        attempt = attempt.model_copy(update={"text": text})
    return attempt, redacted(body, secrets)


class UrlSecretsFilter(logging.Filter):
    """Drops the user info and query string of every URL in a record's message. httpx logs each
    request's URL at INFO, query string and all, where some gateways take their key."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report
            return True
        clean = without_url_secrets(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


# The loggers of the HTTP clients the transports run on: httpx, and the anthropic SDK with the
# httpx fork it runs on. A logger's filters see only its own records, so each is named.
CLIENT_LOGGERS = ("httpx", "httpx2", "anthropic", "anthropic._base_client")


def redact_client_logs() -> None:
    """Put `UrlSecretsFilter` on the HTTP clients' loggers (once; every transport calls it)."""
    for name in CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, UrlSecretsFilter) for f in logger.filters):
            logger.addFilter(UrlSecretsFilter())
