"""A live transport's credentials besides its key, and the strings of them no message may show.

Both live transports (the OpenAI-compatible one over httpx-aiohttp, the Anthropic SDK's over
its httpx) are handed a transport of ours, and httpx reads the proxy variables only for a
transport it builds itself: each asks `environment_proxy_url` (or `environment_proxy`) for
the proxy the environment names.
A URL's user info is sent as Basic auth, which takes the Authorization header the key would
have had: `userinfo_replaces_key` says so in the plan.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import urllib.request

import httpx

from ..errors import ConfigError
from .redaction import without_userinfo


def environment_proxy_url(url: httpx.URL | str) -> str | None:
    """The proxy that HTTP(S)_PROXY / ALL_PROXY name for `url`, unless NO_PROXY exempts it."""
    url = httpx.URL(str(url))
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    host = f"{url.host}:{url.port}" if url.port else url.host
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    # `host:port` with no scheme is an HTTP proxy, as httpx, curl and requests read it.
    return proxy if "://" in proxy else f"http://{proxy}"


def checked_proxy_url(url: httpx.URL | str, *, sdk: bool = False, who: str = "") -> str | None:
    """`environment_proxy_url`, or a ConfigError naming the variable when the transport cannot
    use it (`proxy_problem`): httpx's own error named neither the variable nor the backend."""
    proxy = environment_proxy_url(url)
    if proxy is not None and (problem := proxy_problem(proxy, sdk=sdk)) is not None:
        variable = proxy_variable(str(url), proxy)
        shown = without_userinfo(os.environ.get(variable, proxy))  # as set, without a password
        of = f" (the proxy for {who})" if who else ""
        raise ConfigError(f"{variable} {shown!r}{of} {problem}")
    return proxy


def environment_proxy(url: httpx.URL | str, *, sdk: bool = False) -> httpx.Proxy | None:
    """`checked_proxy_url` as httpx's Proxy (its credentials become a header of it), checked
    by the rules of the transport that will use it (`sdk`: the Anthropic SDK's)."""
    proxy = checked_proxy_url(url, sdk=sdk)
    return httpx.Proxy(proxy) if proxy else None


def checked_key(key: str | None, variable: str, who: str = "") -> str | None:
    """`key` (from `variable`), or a ConfigError saying why it cannot be sent (`key_problem`)."""
    if (problem := key_problem(key)) is not None:
        by = f" (read by {who})" if who else ""
        raise ConfigError(f"{variable}{by} {problem}")
    return key


def basic_token(username: str, password: str) -> str:
    """The credentials of a Basic Authorization header, as httpx encodes them."""
    return base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def credential_secrets(
    url: httpx.URL | str, key: str | None, proxy: httpx.Proxy | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What no error message may show of a transport's call to `url`: the key, the URL's
    password and query values, the proxy's credentials, and the Basic auth headers made of them
    (a server or proxy that echoes its request headers shows them base64-encoded). Then the
    same without the query values: what a reply's text is cleared of, where a value such as
    `api-version=2024-06-01` is as likely to be the model's own words."""
    parsed = httpx.URL(str(url))
    proxy_auth = (proxy.raw_auth if proxy else None) or ()
    credentials = [key, parsed.password, *(part.decode("latin-1") for part in proxy_auth)]
    if parsed.userinfo:
        credentials.append(basic_token(parsed.username, parsed.password))
    if proxy_auth:
        credentials.append(base64.b64encode(b":".join(proxy_auth)).decode("ascii"))
    query = [value for _name, value in parsed.params.multi_items()]
    # ... and as written in the URL (percent-encoded), as a server echoing its path shows.
    query += [part.partition("=")[2] for part in parsed.query.decode("ascii").split("&")]
    kept = tuple(secret for secret in credentials if secret)
    return (*kept, *(value for value in query if value)), kept


def userinfo_replaces_key(url: str) -> bool:
    """Whether `url` carries user info, which httpx sends as Basic auth in place of the key's
    Authorization header (the key is then not sent at all)."""
    try:
        return bool(httpx.URL(url).userinfo)
    except (httpx.InvalidURL, TypeError):
        return False


def key_problem(key: str | None) -> str | None:
    """Why `key` cannot be an HTTP header value, or None (also for no key). The key is not
    quoted: where the bad character is, and what it is, is enough to find it."""
    if not key:
        return None
    for index, char in enumerate(key):
        if not char.isascii() or not char.isprintable():
            what = "a non-ASCII character" if not char.isascii() else "a control character"
            return (
                f"has {what} at position {index + 1} of {len(key)}: a key is sent as an HTTP "
                "header, which cannot carry it (a pasted newline or quote?)"
            )
    if key != key.strip():
        return "starts or ends with a space: a key is sent as an HTTP header, which drops it"
    return None


def proxy_problem(proxy: str, *, sdk: bool = False) -> str | None:
    """Why a transport cannot send through `proxy`, or None (httpx's own errors quote the URL,
    password and all). The OpenAI-compatible transport (aiohttp's) speaks HTTP to any proxy,
    a SOCKS one included, so it takes http:// and https:// only; `sdk`, the Anthropic SDK's
    (httpx's), takes socks5:// and socks5h:// too when socksio is installed."""
    try:
        parsed = httpx.Proxy(proxy)
    except ValueError:
        parsed = None
    except httpx.InvalidURL:
        return "does not parse as a URL"
    scheme = parsed.url.scheme if parsed is not None else ""
    if scheme.startswith("socks") and sdk and importlib.util.find_spec("socksio") is None:
        return "is a SOCKS proxy, which the anthropic SDK's httpx needs socksio for (httpx[socks])"
    if parsed is None or (scheme.startswith("socks") and not sdk):
        kinds = "http:// or https://" if not sdk else "http://, https:// or socks5://"
        return f"has a scheme this backend's transport cannot proxy through: use {kinds}"
    if not parsed.url.host:
        return "has no host"
    return None


def proxy_variable(url: str, proxy: str) -> str:
    """The variable that named `proxy` for `url`, as urllib reads them (lower case first)."""
    scheme = httpx.URL(url).scheme
    for base in (f"{scheme}_proxy", "all_proxy"):
        for name in (base, base.upper()):
            if os.environ.get(name) in (proxy, proxy.removeprefix("http://")):
                return name
    return f"{scheme.upper()}_PROXY"  # pragma: no cover - urllib found it under one of these
