"""Live recording through the real transports (loopback servers), and replay that re-runs the
extractor's validation on each recording only when its prompt fingerprint and input still match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals_pipeline.core.claims import prompt
from evals_pipeline.core.claims.extractor import transport_from_spec
from evals_pipeline.core.claims.golden import load_golden_set
from evals_pipeline.core.claims.prompt import prompt_fingerprint
from evals_pipeline.core.claims.recordings import read_recording, recording_path, text_sha256
from evals_pipeline.core.claims.runner import ReplayResult, record_golden_set, replay_golden_set
from evals_pipeline.core.extractors.specs import parse_backend_spec
from evals_pipeline_tests.conftest import TEST_API_KEY
from evals_pipeline_tests.core.claims.helpers import VERIFIED, make_golden, record, write_example
from evals_pipeline_tests.support.claims_backend import anthropic_claims_responder
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, openai_completion


def test_live_recording_over_openai_http_stores_fingerprint_input_hash_and_reply(
    tmp_path: Path,
) -> None:
    golden_dir = make_golden(tmp_path / "golden")
    result = record(golden_dir)
    assert result.failed == () and len(result.written) == 5
    rec = read_recording(recording_path(golden_dir / "recordings", "v-library"))
    assert rec.fingerprint == prompt_fingerprint()
    assert rec.input_sha256 == text_sha256(VERIFIED["v-library"][0])
    assert rec.model == "rules" and rec.backend.startswith("oai-http:url=http://127.0.0.1:")
    assert json.loads(rec.raw_response_text)["claims"][0]["evidence_span"] == (
        "The library lends 18,000 items a year"
    )
    assert [c.evidence_span for c in rec.claims] == [
        "The library lends 18,000 items a year",
        "It opened in 1964 on Maple Street",
    ]


def test_the_request_on_the_wire_is_our_prompt(tmp_path: Path) -> None:
    golden_dir = make_golden(tmp_path / "golden", pending=False)
    with LoopbackLLMServer("openai") as server:
        server.responder = lambda request: openai_completion('{"claims": []}')
        spec = parse_backend_spec(f"oai-http:url={server.url}")
        record_golden_set(load_golden_set(golden_dir), transport_from_spec(spec), backend="t")
        requests = server.requests
    assert len(requests) == 4
    assert all(r.system_prompt == prompt.CLAIM_SYSTEM_PROMPT for r in requests)
    assert any(VERIFIED["v-vote"][0] in (r.user_prompt or "") for r in requests)


def test_live_recording_through_the_anthropic_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    golden_dir = make_golden(tmp_path / "golden", pending=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    with LoopbackLLMServer("anthropic", responder=anthropic_claims_responder()) as server:
        monkeypatch.setenv("EVALS_ANTHROPIC_BASE_URL", server.base_url)
        spec = parse_backend_spec("anthropic:model=claude-test")
        result = record_golden_set(
            load_golden_set(golden_dir), transport_from_spec(spec), backend=spec.describe()
        )
        assert all(r.api_key == TEST_API_KEY for r in server.requests)
    assert result.failed == () and len(result.written) == 4
    rec = read_recording(recording_path(golden_dir / "recordings", "v-fair"))
    assert TEST_API_KEY not in rec.model_dump_json()
    assert len(rec.claims) == 3


def test_a_failed_live_call_writes_no_recording(tmp_path: Path) -> None:
    golden_dir = make_golden(tmp_path / "golden", pending=False)
    with LoopbackLLMServer("openai") as server:
        server.responder = lambda request: openai_completion("", finish_reason="stop")
        spec = parse_backend_spec(f"oai-http:url={server.url}/nope")  # 404: not retried
        result = record_golden_set(
            load_golden_set(golden_dir), transport_from_spec(spec), backend="t"
        )
    assert result.written == () and len(result.failed) == 4
    assert "HTTP 404" in result.failed[0][1]
    assert not (golden_dir / "recordings").exists()


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_recording_that_cannot_be_written_stops_recording(
    tmp_path: Path, concurrency: int
) -> None:
    """Not one example's failure: every call still waiting would be paid for and lost. Calls in
    flight finish; none starts after; the error is raised, naming where it could not write."""
    from evals_pipeline.core.errors import OutputPathError

    golden_dir = make_golden(tmp_path / "golden", pending=False)
    blocked = tmp_path / "recordings"
    blocked.write_text("a file where the recordings folder goes")
    with LoopbackLLMServer("openai") as server:
        server.responder = lambda request: openai_completion('{"claims": []}')
        spec = parse_backend_spec(f"oai-http:url={server.url}")
        with pytest.raises(OutputPathError, match="cannot write here") as err:
            record_golden_set(
                load_golden_set(golden_dir),
                transport_from_spec(spec),
                backend="t",
                recordings_dir=blocked,
                concurrency=concurrency,
            )
        sent = len(server.requests)
    assert blocked in err.value.path.parents
    assert sent <= concurrency < 4  # of four examples


def test_replay_reproduces_the_live_claims_without_any_connection(tmp_path: Path) -> None:
    golden_dir = make_golden(tmp_path / "golden")
    record(golden_dir)  # the server is stopped once this returns
    replay = replay_golden_set(load_golden_set(golden_dir))
    assert all(r.status == "current" for r in replay.runs)
    for run in replay.runs:
        rec = read_recording(recording_path(golden_dir / "recordings", run.id))
        assert run.claims == rec.claims
    assert ReplayResult.from_dict(json.loads(json.dumps(replay.to_dict()))) == replay


def test_replay_runs_validation_again_rather_than_trusting_stored_claims(tmp_path: Path) -> None:
    golden_dir = make_golden(tmp_path / "golden", pending=False)
    record(golden_dir)
    path = recording_path(golden_dir / "recordings", "v-vote")
    data = json.loads(path.read_text())
    data["claims"] = [{"claim": "Invented claim with a made up span.", "evidence_span": "nowhere"}]
    path.write_text(json.dumps(data))
    run = {r.id: r for r in replay_golden_set(load_golden_set(golden_dir)).runs}["v-vote"]
    assert [c.evidence_span for c in run.claims] == [
        "The council voted 7 to 2 to approve the budget on Tuesday"
    ]


def test_a_prompt_edit_makes_every_recording_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    golden_dir = make_golden(tmp_path / "golden")
    record(golden_dir)
    monkeypatch.setattr(prompt, "CLAIM_PROMPT_VERSION", "claims/2")
    replay = replay_golden_set(load_golden_set(golden_dir))
    assert {r.status for r in replay.runs} == {"stale"}
    assert all(r.extraction is None for r in replay.runs)
    assert "claims/1" in replay.runs[0].detail


def test_an_input_text_edit_makes_that_recording_stale(tmp_path: Path) -> None:
    golden_dir = make_golden(tmp_path / "golden")
    record(golden_dir)
    text, claims = VERIFIED["v-vote"]
    write_example(golden_dir, "v-vote", text + " Two members abstained.", claims)
    runs = {r.id: r for r in replay_golden_set(load_golden_set(golden_dir)).runs}
    assert runs["v-vote"].status == "stale" and "input_text changed" in runs["v-vote"].detail
    assert runs["v-library"].status == "current"


def test_missing_and_invalid_recordings_are_reported(tmp_path: Path) -> None:
    golden_dir = make_golden(tmp_path / "golden")
    record(golden_dir)
    recordings = golden_dir / "recordings"
    recording_path(recordings, "v-vote").unlink()
    bad = json.loads(recording_path(recordings, "v-fair").read_text())
    del bad["fingerprint"]
    recording_path(recordings, "v-fair").write_text(json.dumps(bad))
    runs = {r.id: r for r in replay_golden_set(load_golden_set(golden_dir)).runs}
    assert runs["v-vote"].status == "missing"
    assert runs["v-fair"].status == "invalid" and "fingerprint" in runs["v-fair"].detail
