"""Keeping credentials out of errors, error bodies, sidecars and logs.

Shared by the live transports: whatever a provider, a proxy or a connection error says back is
passed through `redacted` before it becomes a message or a failure record.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

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


# A spec's NAME=VALUE items: a value runs to the next `,NAME=` (a password can hold a comma).
_SPEC_VALUE = re.compile(r"(?:^|[:,])\s*[A-Za-z_][\w-]*\s*=(.*?)(?=,\s*[A-Za-z_][\w-]*\s*=|$)")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:/+")


def url_secrets(url: str) -> list[str]:
    """What of `url` an error must not echo: its user info and its query string or fragment.
    A URL that parses has them where `urlsplit` says. One that does not (no scheme, `http:/`,
    a `/`, `?` or `@` in the password) is read warily: everything before its last `@` (after a
    scheme) is user info, and everything from a `?` or `#` after that is query."""
    from .specs import url_problem  # (specs imports this module's users, not this module)

    secrets: list[str] = []
    if url_problem(url) is None:
        parts = urlsplit(url)
        if "@" in parts.netloc:
            secrets.append(parts.netloc[: parts.netloc.rindex("@") + 1])
        tail = url[len(urlunsplit(parts._replace(query="", fragment=""))) :]
        secrets += [tail] if tail else []
        return secrets
    scheme = _SCHEME.match(url)
    rest = url[scheme.end() :] if scheme else url
    if "@" in rest:
        secrets.append(rest[: rest.rindex("@") + 1])
        rest = rest[rest.rindex("@") + 1 :]
    query = re.search(r"[?#].*", rest)
    secrets += [query.group(0)] if query else []
    return secrets


def without_userinfo(url: str) -> str:
    """`url`, however mistyped, without what `url_secrets` finds in it."""
    for secret in url_secrets(url):
        url = url.replace(secret, "", 1)
    return url


def spec_userinfo(spec: str) -> list[str]:
    """What a spec error must not echo: each URL-like value's `url_secrets` (a value holding an
    `@` after a `:`, or a `?`, whatever its parameter is called: a typo `URL=` or a second
    `url=` too),
    each comma-split piece of them (a problem quotes a piece when a comma in the password split
    the spec), and their repr forms (a problem quotes values with !r)."""
    found: list[str] = []
    for match in _SPEC_VALUE.finditer(spec):
        value = match.group(1)
        if ("@" in value and ":" in value[: value.rindex("@")]) or "?" in value:
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
