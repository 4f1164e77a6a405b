"""The prompt fingerprint: one hash over system prompt, user template, schema and version."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from evals_pipeline.core.claims import prompt
from evals_pipeline.core.claims.extractor import claim_request
from evals_pipeline.core.claims.prompt import current_prompt, prompt_fingerprint


def test_fingerprint_is_sha256_hex_and_stable() -> None:
    first = prompt_fingerprint()
    assert len(first) == 64 and int(first, 16) >= 0
    assert prompt_fingerprint() == first == current_prompt().fingerprint


@pytest.mark.parametrize("part", ["system", "user_template", "version"])
def test_editing_any_text_part_changes_the_fingerprint(part: str) -> None:
    base = current_prompt()
    edited = dataclasses.replace(base, **{part: getattr(base, part) + " "})
    assert edited.fingerprint != base.fingerprint


def test_editing_the_schema_changes_the_fingerprint() -> None:
    base = current_prompt()
    schema = copy.deepcopy(base.schema)
    schema["properties"]["claims"]["items"]["properties"]["claim"]["maxLength"] = 200
    assert dataclasses.replace(base, schema=schema).fingerprint != base.fingerprint


def test_parts_cannot_be_shifted_between_fields_to_collide() -> None:
    base = current_prompt()
    shifted = dataclasses.replace(
        base, system=base.system + base.user_template[:5], user_template=base.user_template[5:]
    )
    assert shifted.fingerprint != base.fingerprint


def test_a_monkeypatched_constant_is_what_requests_and_fingerprint_both_see(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = prompt_fingerprint()
    monkeypatch.setattr(prompt, "CLAIM_SYSTEM_PROMPT", prompt.CLAIM_SYSTEM_PROMPT + "\n- Be brief.")
    assert prompt_fingerprint() != before
    assert claim_request("Some text.").system.endswith("- Be brief.")


def test_the_rendered_request_carries_schema_and_document() -> None:
    request = claim_request("The council voted 7 to 2.")
    assert request.stage == "claims"
    assert "<document>\nThe council voted 7 to 2.\n</document>" in request.user
    assert '"evidence_span"' in request.user
    assert request.system == prompt.CLAIM_SYSTEM_PROMPT
