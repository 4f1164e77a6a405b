"""The environment variables the project reads, cleared wherever a run must stay hermetic.

Provider credentials and endpoints, and the cassette switches, would send a test or a benchmark
to a real provider or record into a real cassette; `EVALS_CONFIG` and `DAGSTER_HOME` would point
a subprocess at someone else's project or instance.
"""

from __future__ import annotations

import os

import pytest

# What the suite clears around every test (the in-process code reads these).
PROVIDER_ENV: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "EVALS_ANTHROPIC_BASE_URL",
    "EVALS_OAI_API_KEY",
    "EVALS_RECORD_LLM",
    "EVALS_REPLAY_LLM",
)
# What a subprocess (the CLI, `dagster dev`, a benchmark) must not inherit either.
PROJECT_ENV: tuple[str, ...] = (*PROVIDER_ENV, "EVALS_CONFIG", "DAGSTER_HOME")


def hermetic_environ() -> dict[str, str]:
    """This process's environment without any of PROJECT_ENV, for a subprocess."""
    return {k: v for k, v in os.environ.items() if k not in PROJECT_ENV}


# The proxy variables both live transports honour (in either case, as urllib reads them).
PROXY_ENV: tuple[str, ...] = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def clear_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy variable set, for a test that sets the ones it means."""
    for name in PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
