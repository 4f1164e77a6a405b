"""Keeping credentials out of errors, error bodies, sidecars and logs.

Shared by the live transports: whatever a provider, a proxy or a connection error says back is
passed through `redacted` before it becomes a message or a failure record.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

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


# A spec's url= value runs to the next parameter or the end: a password can hold a comma. The
# parser strips spaces around a name, so `, url =` is a url= too.
_URL_VALUE = re.compile(
    r"(?:^|[:,])\s*url\s*=(.*?)(?=,\s*(?:model|timeout|retries|url|path)\s*=|$)"
)
# What comes before a URL's user info however mistyped: a scheme and its slashes (`http://`,
# `http:/`, `htps://`), or nothing.
_SCHEME = re.compile(r"^\s*[A-Za-z][\w+.-]*:/+")
_AUTHORITY_END = re.compile(r"[/?#]")


def url_userinfo(url: str) -> str | None:
    """The user info of `url` however it is mistyped (no scheme, one slash, an `@` or a comma
    in the password): everything before the last `@` of the part that names the host, which
    ends at the first `/`, `?` or `#` after the scheme (so an `@` in a path or a query, as in
    `/v1/@latest` or `?user=me@corp.com`, is not user info). None when there is none."""
    scheme = _SCHEME.match(url)
    rest = url[scheme.end() :] if scheme else url
    end = _AUTHORITY_END.search(rest)
    authority = rest[: end.start()] if end else rest
    return authority[: authority.rindex("@") + 1] if "@" in authority else None


def without_userinfo(url: str) -> str:
    """`url`, however mistyped, without its user info (see url_userinfo) or query string."""
    userinfo = url_userinfo(url)
    return without_url_secrets(url.replace(userinfo, "", 1) if userinfo else url)


def spec_userinfo(spec: str) -> list[str]:
    """The user info of a spec's url= value (see url_userinfo), and each comma-split piece of
    it: the text a spec error must not echo (its problem quotes a piece when a comma in the
    password split the spec). A well-formed URL's is `without_url_secrets`'s too."""
    found = _URL_VALUE.search(spec)
    userinfo = url_userinfo(found.group(1)) if found else None
    if not userinfo:
        return []
    # A piece too short to be worth hiding would only garble the message where it recurs.
    return [userinfo, *(piece for piece in userinfo.split(",") if len(piece) >= 3)]


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
