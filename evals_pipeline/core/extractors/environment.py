"""The environment variables a live transport reads, checked before a run makes any call.

A key is sent as an HTTP header and a proxy variable names where every request goes: a key
with a control or non-ASCII character (a pasted newline, a curly quote) or a proxy URL httpx
cannot use failed the first extraction step, with an error (`UnicodeEncodeError`, "Unknown
scheme for proxy URL") that named neither the variable nor the backend. `check_environment`
names both. No message shows a key or a proxy's credentials.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from .anthropic import API_KEY_ENV as ANTHROPIC_KEY_ENV
from .anthropic import check_base_url_in_use
from .credentials import checked_key, checked_proxy_url
from .openai_compat import API_KEY_ENV as OAI_KEY_ENV
from .specs import BackendSpec


def check_environment(
    specs: Iterable[tuple[str, BackendSpec]],
    *,
    judging: bool,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Each key and proxy variable a call of `specs` (field, spec: `backends.local`) or the
    judge (when `judging`) will read: a ConfigError naming the variable and who reads it.
    First EVALS_ANTHROPIC_BASE_URL, where something sends to it (`check_base_url_in_use`)."""
    env = os.environ if environ is None else environ
    specs = list(specs)
    anthropic_url = check_base_url_in_use((spec for _f, spec in specs), judging=judging) or ""
    sends: list[tuple[str, str, str]] = []  # (who, key variable, URL it is sent to)
    for field, spec in specs:
        if spec.kind == "oai-http":
            sends.append((field, OAI_KEY_ENV, spec.params["url"]))
        elif spec.kind == "oai-uds":  # a socket: no proxy, but the key is a header all the same
            sends.append((field, OAI_KEY_ENV, ""))
        elif spec.kind == "anthropic":
            sends.append((field, ANTHROPIC_KEY_ENV, anthropic_url))
    if judging:
        sends.append(("the judge", ANTHROPIC_KEY_ENV, anthropic_url))
    for who, variable, url in sends:
        checked_key(env.get(variable), variable, who)
        if url:  # the SDK's transport is httpx's own; the OpenAI-compatible one is aiohttp's
            checked_proxy_url(url, sdk=variable == ANTHROPIC_KEY_ENV, who=who)
