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
import urllib.request

import httpx


def environment_proxy_url(url: httpx.URL | str) -> str | None:
    """The proxy that HTTP(S)_PROXY / ALL_PROXY name for `url`, unless NO_PROXY exempts it."""
    url = httpx.URL(str(url))
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    host = f"{url.host}:{url.port}" if url.port else url.host
    if not proxy or urllib.request.proxy_bypass(host):
        return None
    return proxy


def environment_proxy(url: httpx.URL | str) -> httpx.Proxy | None:
    """`environment_proxy_url` as httpx's Proxy (its credentials become a header of it)."""
    proxy = environment_proxy_url(url)
    return httpx.Proxy(proxy) if proxy else None


def basic_token(username: str, password: str) -> str:
    """The credentials of a Basic Authorization header, as httpx encodes them."""
    return base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def credential_secrets(
    url: httpx.URL | str, key: str | None, proxy: httpx.Proxy | None
) -> tuple[str, ...]:
    """What no error message may show of a transport's call to `url`: the key, the URL's
    password and query values, the proxy's credentials, and the Basic auth headers made of them
    (a server or proxy that echoes its request headers shows them base64-encoded)."""
    parsed = httpx.URL(str(url))
    proxy_auth = (proxy.raw_auth if proxy else None) or ()
    secrets = [key, parsed.password, *(part.decode("latin-1") for part in proxy_auth)]
    secrets += [value for _name, value in parsed.params.multi_items()]
    # ... and as written in the URL (percent-encoded), as a server echoing its path shows.
    secrets += [part.partition("=")[2] for part in parsed.query.decode("ascii").split("&")]
    if parsed.userinfo:
        secrets.append(basic_token(parsed.username, parsed.password))
    if proxy_auth:
        secrets.append(base64.b64encode(b":".join(proxy_auth)).decode("ascii"))
    return tuple(secret for secret in secrets if secret)


def userinfo_replaces_key(url: str) -> bool:
    """Whether `url` carries user info, which httpx sends as Basic auth in place of the key's
    Authorization header (the key is then not sent at all)."""
    try:
        return bool(httpx.URL(url).userinfo)
    except (httpx.InvalidURL, TypeError):
        return False
