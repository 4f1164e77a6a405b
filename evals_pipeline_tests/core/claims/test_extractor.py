"""Claim validation (schema, verbatim span, 5-15 words, 1:1 spans) and the extractor's flow."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import pytest

from evals_pipeline.core.claims.extractor import (
    ClaimCallFailed,
    ClaimExtraction,
    ClaimExtractor,
    RecordedTransport,
    transport_from_spec,
    validate_claims,
)
from evals_pipeline.core.errors import ConfigError
from evals_pipeline.core.extractors.openai_compat import OpenAICompatTransport
from evals_pipeline.core.extractors.specs import parse_backend_spec
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, openai_error

TEXT = "The council voted 7 to 2 to approve the budget. The library opened in 1964."
GOOD = {"claim": "The council voted 7 to 2 to approve the budget.", "evidence_span": "voted 7 to 2"}


def reply(*claims: Mapping[str, object]) -> str:
    return json.dumps({"claims": list(claims)})


def test_a_valid_claim_is_kept_and_the_reply_parses_clean() -> None:
    out = validate_claims(reply(GOOD), TEXT)
    assert [c.claim for c in out.claims] == [GOOD["claim"]]
    assert out.parse_status == "clean" and out.dropped == ()


def test_a_span_that_is_not_verbatim_is_dropped() -> None:
    paraphrase = {**GOOD, "evidence_span": "voted seven to two"}
    case_changed = {**GOOD, "evidence_span": "the council voted 7 to 2"}
    out = validate_claims(reply(paraphrase, case_changed), TEXT)
    assert out.claims == ()
    assert out.dropped_count("span_not_verbatim") == 2


def test_a_blank_span_is_not_verbatim_even_though_it_is_a_substring() -> None:
    out = validate_claims(reply({**GOOD, "evidence_span": " "}), TEXT)
    assert out.claims == () and out.dropped_count("span_not_verbatim") == 1


@pytest.mark.parametrize(
    ("claim", "kept"),
    [
        ("Council approved the budget.", False),  # 4 words
        ("The council approved the budget.", True),  # 5
        (" ".join(["word"] * 15), True),
        (" ".join(["word"] * 16), False),
    ],
)
def test_claims_must_be_5_to_15_words(claim: str, kept: bool) -> None:
    out = validate_claims(reply({"claim": claim, "evidence_span": "voted 7 to 2"}), TEXT)
    assert bool(out.claims) is kept
    assert out.dropped_count("claim_shape") == (0 if kept else 1)


def test_a_second_claim_on_the_same_span_is_dropped() -> None:
    twin = {
        "claim": "The budget passed with seven votes in favour.",
        "evidence_span": "voted 7 to 2",
    }
    out = validate_claims(reply(GOOD, twin), TEXT)
    assert len(out.claims) == 1 and out.dropped_count("duplicate_span") == 1


@pytest.mark.parametrize(
    "raw",
    [
        "no json here",
        json.dumps({"claims": [{**GOOD, "confidence": 0.9}]}),  # extra key: schema is strict
        json.dumps({"claims": [{"claim": 7, "evidence_span": "voted 7 to 2"}]}),  # not a string
        json.dumps({"items": []}),
        json.dumps([GOOD]),
    ],
)
def test_a_reply_off_the_schema_is_malformed_and_yields_zero_claims(raw: str) -> None:
    out = validate_claims(raw, TEXT)
    assert out.parse_status == "malformed" and out.claims == ()


def test_json_wrapped_in_prose_is_recovered() -> None:
    out = validate_claims("Here you go:\n```json\n" + reply(GOOD) + "\n```", TEXT)
    assert out.parse_status == "recovered" and len(out.claims) == 1


def test_no_llm_configured_means_zero_claims() -> None:
    out = asyncio.run(ClaimExtractor(None).extract(TEXT))
    assert out == ClaimExtraction() and out.parse_status is None


def test_a_truncated_reply_is_retried_once_with_a_doubled_budget() -> None:
    transport = RecordedTransport(text=reply(GOOD)[:20], truncated=True)
    out = asyncio.run(ClaimExtractor(transport, max_tokens=100).extract(TEXT))
    assert [r.max_tokens for r in transport.requests] == [100, 200]
    assert out.truncated and out.parse_status == "malformed" and out.claims == ()


def test_extraction_round_trips_through_its_dict_form() -> None:
    out = validate_claims(reply(GOOD, {**GOOD, "evidence_span": "nope"}), TEXT)
    assert ClaimExtraction.from_dict(json.loads(json.dumps(out.to_dict()))) == out


def test_live_kinds_reuse_the_existing_transports_and_replays_are_refused() -> None:
    spec = parse_backend_spec("oai-http:url=http://127.0.0.1:9/v1/chat/completions,model=m")
    transport = transport_from_spec(spec)
    assert isinstance(transport, OpenAICompatTransport) and transport.model == "m"
    for kind in ("oracle", "cassette:path=x.jsonl"):
        with pytest.raises(ConfigError, match="needs a live backend"):
            transport_from_spec(parse_backend_spec(kind))


def test_an_http_failure_is_a_typed_error_not_zero_claims() -> None:
    with LoopbackLLMServer("openai") as server:
        server.enqueue(openai_error(400, message="bad request"))
        spec = parse_backend_spec(f"oai-http:url={server.url}")
        extractor = ClaimExtractor(transport_from_spec(spec))
        with pytest.raises(ClaimCallFailed, match="HTTP 400"):
            asyncio.run(extractor.extract(TEXT))
