"""Credentials out of messages: the pieces the transports' end-to-end tests cannot all reach
(aiohttp 3.14 formats its own proxy errors without the connection key, but an older or newer
one, or another exception type, may not)."""

import aiohttp
import pytest

from evals_pipeline.core.extractors.openai_compat import OpenAICompatTransport, _transport_failure
from evals_pipeline.core.extractors.redaction import redacted, without_url_secrets
from evals_pipeline_tests.support.hermetic import clear_proxy_env

PROXY_PASSWORD = "pw-123456-proxy"
KEY_REPR = (
    "ConnectionKey(host='api.example', port=443, is_ssl=True, proxy=URL('http://proxy:3128'), "
    f"proxy_auth=BasicAuth(login='user', password='{PROXY_PASSWORD}', encoding='latin1'))"
)


def test_url_user_info_query_and_fragment_are_dropped() -> None:
    text = "Cannot connect to https://u:s3cret-pass@h.example:8443/v1/chat?api-key=k-123#frag now"
    assert without_url_secrets(text) == "Cannot connect to https://h.example:8443/v1/chat now"


def test_a_basic_auth_object_is_dropped_whoever_holds_it() -> None:
    cleaned = without_url_secrets(KEY_REPR)
    assert PROXY_PASSWORD not in cleaned and "BasicAuth(...)" in cleaned
    assert "host='api.example'" in cleaned  # the rest still says where it went


def test_known_secrets_are_replaced_but_placeholders_are_not() -> None:
    text = "key sk-ant-0123456789 rejected; key x and EMPTY are fine"
    assert redacted(text, ("sk-ant-0123456789", "x", "EMPTY", None)) == (
        "key *** rejected; key x and EMPTY are fine"
    )


def test_a_generic_client_error_carrying_a_connection_key_is_redacted() -> None:
    error = _transport_failure("oai-http", aiohttp.ClientError(KEY_REPR))
    assert PROXY_PASSWORD not in str(error) and "transport error" in str(error)


def test_the_environment_proxys_credentials_are_secrets_of_the_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clear_proxy_env(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", f"http://proxy-user:{PROXY_PASSWORD}@127.0.0.1:9")
    transport = OpenAICompatTransport(url="https://models.example/v1/chat/completions")
    said = aiohttp.ClientError(f"proxy said: bad password {PROXY_PASSWORD}")
    error = _transport_failure("oai-http", said, transport._secrets)
    assert PROXY_PASSWORD not in str(error) and "bad password ***" in str(error)
