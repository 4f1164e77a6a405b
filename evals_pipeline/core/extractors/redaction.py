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


# A spec's url= value runs to the next parameter or the end: a password can hold a comma.
_URL_VALUE = re.compile(r"(?:^|[:,])url=(.*?)(?=,(?:model|timeout|retries|url|path)=|$)")


def spec_userinfo(spec: str) -> list[str]:
    """The user info of a spec's url= value however the URL is mistyped (no scheme, `http:/`,
    an `@` or a comma in the password), and each comma-split piece of it: the text a spec
    error must not echo. A well-formed URL's is `without_url_secrets`'s too."""
    found = _URL_VALUE.search(spec)
    if found is None or "@" not in found.group(1):
        return []
    value = found.group(1)
    value = value.split("://", 1)[1] if "://" in value else value
    userinfo = value[: value.rindex("@") + 1]
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
