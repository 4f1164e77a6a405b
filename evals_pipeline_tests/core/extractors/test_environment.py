"""A key or proxy variable a live transport cannot send with is an error naming the variable
and the backend, before any call, and never showing the key or the proxy's credentials."""

from __future__ import annotations

import importlib.util

import pytest

from evals_pipeline.core.errors import ConfigError
from evals_pipeline.core.extractors.anthropic import AnthropicTransport
from evals_pipeline.core.extractors.environment import check_environment
from evals_pipeline.core.extractors.openai_compat import OpenAICompatTransport
from evals_pipeline.core.extractors.specs import parse_backend_spec
from evals_pipeline.core.judge.cache import JudgeCache
from evals_pipeline.core.judge.client import JudgeClient
from evals_pipeline_tests.support.hermetic import clear_proxy_env

LOCAL = [("backends.local", parse_backend_spec("oai-http:url=http://10.0.0.1:8/v1,model=m"))]
CLAUDE = [("backends.claude", parse_backend_spec("anthropic"))]
REPLAY = [("backends.rules", parse_backend_spec("cassette:path=x.jsonl"))]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_proxy_env(monkeypatch)


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("sk-abc\n", "a control character at position 7 of 7"),
        ("sk-\x01bc", "a control character at position 4 of 6"),
        ("sk-“abc”", "a non-ASCII character at position 4 of 8"),
        (" sk-abc", "starts or ends with a space"),
    ],
)
def test_a_key_that_cannot_be_a_header_is_named_not_shown(key: str, problem: str) -> None:
    env = {"EVALS_OAI_API_KEY": key}
    with pytest.raises(ConfigError) as info:
        check_environment(LOCAL, judging=False, environ=env)
    message = str(info.value)
    assert message.startswith("EVALS_OAI_API_KEY (read by backends.local) ")
    assert problem in message and "sk-" not in message and "abc" not in message


def test_good_keys_and_unused_variables_pass() -> None:
    good = {"EVALS_OAI_API_KEY": "sk-abc_DEF.123", "ANTHROPIC_API_KEY": "sk-ant-x"}
    check_environment(LOCAL + CLAUDE, judging=True, environ=good)
    # A key no backend reads is not checked: a replay-only run ignores both.
    bad = {"EVALS_OAI_API_KEY": "é", "ANTHROPIC_API_KEY": "\n"}
    check_environment(REPLAY, judging=False, environ=bad)
    with pytest.raises(ConfigError, match=r"^ANTHROPIC_API_KEY \(read by the judge\)"):
        check_environment(REPLAY, judging=True, environ=bad)


def test_a_proxy_the_transport_cannot_use_is_named_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "ftp://user:hunter2@proxy:1")
    with pytest.raises(ConfigError) as info:
        check_environment(LOCAL, judging=False, environ={})
    message = str(info.value)
    assert message.startswith("HTTP_PROXY 'ftp://proxy:1' (the proxy for backends.local) has a")
    assert "scheme this backend's transport cannot proxy" in message and "hunter2" not in message
    monkeypatch.setenv("HTTP_PROXY", "http://[::1")
    with pytest.raises(ConfigError, match=r"^HTTP_PROXY 'http://\[::1' .* does not parse"):
        check_environment(LOCAL, judging=False, environ={})
    # NO_PROXY exempting the host: the variable is not used, so not checked.
    monkeypatch.setenv("NO_PROXY", "10.0.0.1")
    check_environment(LOCAL, judging=False, environ={})


def test_a_proxy_without_a_scheme_is_an_http_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """`host:port`, as httpx, curl and requests read it (it had been refused as a scheme)."""
    from evals_pipeline.core.extractors.credentials import environment_proxy_url

    monkeypatch.setenv("HTTP_PROXY", "proxy.corp:3128")
    check_environment(LOCAL, judging=False, environ={})
    assert environment_proxy_url("http://10.0.0.1:8/v1") == "http://proxy.corp:3128"
    monkeypatch.setenv("HTTP_PROXY", "proxy.corp:port")
    with pytest.raises(ConfigError, match=r"^HTTP_PROXY 'proxy.corp:port' .* does not"):
        check_environment(LOCAL, judging=False, environ={})


def test_the_variable_named_is_the_one_that_was_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("all_proxy", "gopher://p:1")
    with pytest.raises(ConfigError, match=r"^all_proxy 'gopher://p:1' \(the proxy for the judge"):
        check_environment([], judging=True, environ={"ANTHROPIC_API_KEY": "k"})


def test_a_socks_proxy_is_refused_where_the_transport_would_speak_http_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiohttp (the OpenAI-compatible transport) sends a plain HTTP request to a SOCKS proxy,
    prompt and all, and every call fails; the anthropic SDK's httpx needs socksio for one."""
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    monkeypatch.setenv("HTTP_PROXY", "socks5h://127.0.0.1:1080")
    with pytest.raises(ConfigError, match=r"^HTTP_PROXY .* cannot proxy through: use http:// or"):
        check_environment(LOCAL, judging=False, environ={})
    if importlib.util.find_spec("socksio") is None:
        with pytest.raises(ConfigError, match=r"^HTTPS_PROXY .* needs socksio"):
            check_environment(CLAUDE, judging=False, environ={"ANTHROPIC_API_KEY": "k"})
    else:  # pragma: no cover - socksio is not a dependency
        check_environment(CLAUDE, judging=False, environ={"ANTHROPIC_API_KEY": "k"})
    monkeypatch.setenv("HTTP_PROXY", "https://127.0.0.1:3128")  # an HTTPS proxy is fine
    check_environment(LOCAL, judging=False, environ={})


def test_each_transport_refuses_them_as_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no preflight ran (a Dagster UI run, a program on the library), the step's error
    names the variable, not the first call's UnicodeEncodeError."""
    monkeypatch.setenv("EVALS_OAI_API_KEY", "sk-é")
    with pytest.raises(ConfigError, match=r"^EVALS_OAI_API_KEY has a non-ASCII"):
        OpenAICompatTransport(url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=r"^ANTHROPIC_API_KEY has a control"):
        AnthropicTransport(api_key="sk\n")
    with pytest.raises(ConfigError, match=r"^ANTHROPIC_API_KEY has a control"):
        JudgeClient(JudgeCache("unused.jsonl"), api_key="sk\n")
    monkeypatch.delenv("EVALS_OAI_API_KEY")
    monkeypatch.setenv("HTTP_PROXY", "ftp://p:1")
    monkeypatch.setenv("HTTPS_PROXY", "ftp://p:1")
    with pytest.raises(ConfigError, match=r"^HTTP_PROXY 'ftp://p:1' has a scheme"):
        OpenAICompatTransport(url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=r"^HTTPS_PROXY 'ftp://p:1' has a scheme"):
        AnthropicTransport(api_key="sk")


def test_a_socks_proxy_the_sdk_can_use_is_not_refused_as_it_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With socksio installed the SDK's httpx proxies through SOCKS: the anthropic transport's
    own check had applied aiohttp's rules as well, and refused it as it was built."""
    from evals_pipeline.core.extractors.anthropic import client_secrets

    real = importlib.util.find_spec

    def with_socksio(name: str, *args: object) -> object:
        return object() if name == "socksio" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", with_socksio)
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    client_secrets("sk-test-key-0123456789", None)
    check_environment(CLAUDE, judging=False, environ={"ANTHROPIC_API_KEY": "k"})
