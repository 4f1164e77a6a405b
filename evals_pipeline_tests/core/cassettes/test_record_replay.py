"""Record against real loopback servers, then replay with the servers gone and no key."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from evals_pipeline.core.cassettes.environment import (
    RECORD_ENV,
    REPLAY_ENV,
    extractor_from_environment,
)
from evals_pipeline.core.cassettes.record import RecordingExtractor
from evals_pipeline.core.cassettes.replay import ReplayingExtractor
from evals_pipeline.core.cassettes.sidecar import sidecar_path
from evals_pipeline.core.cassettes.store import load_cassette
from evals_pipeline.core.errors import CassetteMiss, ConfigError, ExtractionFailed
from evals_pipeline.core.extractors.anthropic import AnthropicTransport
from evals_pipeline.core.extractors.base import Extractor, TransportExtractor
from evals_pipeline.core.extractors.openai_compat import OpenAICompatTransport
from evals_pipeline.core.models import (
    CallStats,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
    FailureRecord,
)
from evals_pipeline.core.ontology import EntityType, Ontology, RelationType
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline.core.runner import extract_all, run_sync
from evals_pipeline_tests.conftest import TEST_API_KEY, TEST_OAI_KEY
from evals_pipeline_tests.support import deterministic_backend as rules
from evals_pipeline_tests.support.llm_servers import (
    LoopbackLLMServer,
    TripwireListener,
    anthropic_message,
    openai_completion,
    openai_error,
)

ONTOLOGY = Ontology(
    name="science",
    entity_types=(EntityType(name="Person", description="A human being."),),
    relation_types=(RelationType(name="WORKED_WITH", source=("Person",), target=("Person",)),),
)


def _anthropic(server: LoopbackLLMServer) -> Extractor:
    return TransportExtractor(
        AnthropicTransport(model="claude-test", api_key=TEST_API_KEY, base_url=server.base_url)
    )


def _oai(server: LoopbackLLMServer) -> Extractor:
    return TransportExtractor(
        OpenAICompatTransport(url=server.base_url, model="rules", api_key=TEST_OAI_KEY)
    )


def _run(extractor: Extractor, episodes: list[Episode], options: ExtractOptions):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        try:
            return await extract_all(extractor, episodes, options, concurrency=4)
        finally:
            await extractor.aclose()

    return run_sync(go)


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
@pytest.mark.parametrize("mode", ["freeform", "strict"])
def test_replay_reproduces_recording_with_zero_connections(
    tmp_path: Path, episodes: list[Episode], protocol: str, mode: str
) -> None:
    cassette = tmp_path / "run.jsonl"
    options = ExtractOptions.for_mode(mode, ONTOLOGY)  # type: ignore[arg-type]
    responder = rules.anthropic_responder if protocol == "anthropic" else rules.openai_responder
    server = LoopbackLLMServer(protocol, responder=responder).start()  # type: ignore[arg-type]
    build = _anthropic if protocol == "anthropic" else _oai
    try:
        recorded = _run(
            extractor_from_environment(lambda: build(server), {RECORD_ENV: str(cassette)}),
            episodes,
            options,
        )
    finally:
        server.stop()
    assert len(server.requests) == 2 * len(episodes)
    assert all(run.ok for run in recorded)
    assert recorded[0].outcome is not None and recorded[0].outcome.result.edges
    assert sidecar_path(cassette).exists()  # created eagerly, empty: nothing failed
    assert sidecar_path(cassette).read_text() == ""

    with TripwireListener.replacing(server) as tripwire:
        factory_called = []
        replayer = extractor_from_environment(
            lambda: factory_called.append(1) or build(server), {REPLAY_ENV: str(cassette)}
        )
        replayed = _run(replayer, episodes, options)
    assert factory_called == []  # no provider resolved in replay
    assert tripwire.connections == 0
    assert [r.outcome for r in replayed] == [r.outcome for r in recorded]
    # No sidecar is ever created in replay.
    assert list(tmp_path.glob("*.failures*")) == [sidecar_path(cassette)]


def test_replay_counts_the_requests_a_retried_call_sent(
    tmp_path: Path, episodes: list[Episode]
) -> None:
    """A 429 before the entity reply is a request the server saw: recorded with the reply, so a
    replay reports what the live call sent."""
    cassette = tmp_path / "run.jsonl"
    options = ExtractOptions.for_mode("freeform", None)
    first = [True]

    def responder(request):  # type: ignore[no-untyped-def]
        if first[0]:
            first[0] = False
            return openai_error(429, headers={"retry-after": "0"})
        return rules.openai_responder(request)

    with LoopbackLLMServer("openai", responder=responder) as server:
        recorded = _run(RecordingExtractor(_oai(server), cassette), episodes[:1], options)
        sent = len(server.requests)
    assert sent == 3 and recorded[0].outcome is not None
    assert recorded[0].outcome.stats.requests == 3
    replayed = _run(ReplayingExtractor.from_path(cassette), episodes[:1], options)
    assert replayed[0].outcome == recorded[0].outcome
    # Written only where over 1: a cassette without retries reads as older code wrote it.
    stages = json.loads(cassette.read_text())["response"]["transcript"]
    assert [[a.get("http_requests") for a in s["attempts"]] for s in stages] == [[2], [None]]


def test_record_and_replay_together_is_a_startup_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mutually exclusive"):
        extractor_from_environment(
            lambda: pytest.fail("no provider may be resolved"),
            {RECORD_ENV: str(tmp_path / "a"), REPLAY_ENV: str(tmp_path / "b")},
        )


def _record_rules(cassette: Path, episodes: list[Episode], options: ExtractOptions) -> None:
    with LoopbackLLMServer("openai", responder=rules.openai_responder) as server:
        _run(RecordingExtractor(_oai(server), cassette), episodes, options)


def test_prompt_template_edit_is_a_cassette_miss(
    tmp_path: Path, episodes: list[Episode], monkeypatch: pytest.MonkeyPatch
) -> None:
    from string import Template

    from evals_pipeline.core import prompts

    cassette = tmp_path / "c.jsonl"
    _record_rules(cassette, episodes, ExtractOptions())
    edited = Template(prompts.ENTITY_SYSTEM.template.replace("ENTITIES only", "ENTITIES, only"))
    monkeypatch.setattr(prompts, "ENTITY_SYSTEM", edited)
    replayer = ReplayingExtractor.from_path(cassette)
    with pytest.raises(CassetteMiss) as err:
        _run(replayer, episodes, ExtractOptions())
    assert err.value.call_type == "extract"
    assert len(err.value.key) == 64
    assert err.value.key in str(err.value)


def test_ontology_edit_is_a_cassette_miss(tmp_path: Path, episodes: list[Episode]) -> None:
    cassette = tmp_path / "c.jsonl"
    _record_rules(cassette, episodes, ExtractOptions.for_mode("strict", ONTOLOGY))
    edited = ONTOLOGY.model_copy(
        update={"entity_types": (EntityType(name="Person", description="A person."),)}
    )
    with pytest.raises(CassetteMiss):
        _run(
            ReplayingExtractor.from_path(cassette),
            episodes,
            ExtractOptions.for_mode("strict", edited),
        )
    # And the unedited ontology still replays; a mode change is a miss too.
    assert all(
        r.ok
        for r in _run(
            ReplayingExtractor.from_path(cassette),
            episodes,
            ExtractOptions.for_mode("strict", ONTOLOGY),
        )
    )
    with pytest.raises(CassetteMiss):
        _run(
            ReplayingExtractor.from_path(cassette),
            episodes,
            ExtractOptions.for_mode("open", ONTOLOGY),
        )


def test_an_episode_text_or_group_change_is_a_miss(tmp_path: Path, episodes: list[Episode]) -> None:
    cassette = tmp_path / "c.jsonl"
    _record_rules(cassette, episodes[:1], ExtractOptions())
    changed = episodes[0].model_copy(update={"body": episodes[0].body + " Extra."})
    with pytest.raises(CassetteMiss):
        _run(ReplayingExtractor.from_path(cassette), [changed], ExtractOptions())
    with pytest.raises(CassetteMiss):
        _run(
            ReplayingExtractor.from_path(cassette),
            [episodes[0].model_copy(update={"group_id": "other"})],
            ExtractOptions(),
        )


def test_concatenated_cassettes_replay_as_one(tmp_path: Path, episodes: list[Episode]) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _record_rules(first, episodes[:2], ExtractOptions())
    _record_rules(second, episodes[2:], ExtractOptions())
    joined = tmp_path / "joined.jsonl"
    joined.write_bytes(second.read_bytes() + first.read_bytes())  # order does not matter
    runs = _run(ReplayingExtractor.from_path(joined), list(reversed(episodes)), ExtractOptions())
    assert [r.episode.name for r in runs if r.ok] == ["chunk-2", "chunk-1", "chunk-0"]
    # Several files load as one flat set as well.
    assert len(load_cassette([first, second])) == 3


def test_identical_requests_are_served_fifo(tmp_path: Path, episodes: list[Episode]) -> None:
    cassette = tmp_path / "fifo.jsonl"
    same = [episodes[0]] * 3  # an ingest that sees the same chunk three times
    with LoopbackLLMServer("openai") as server:
        for i in range(3):
            entities = json.dumps({"entities": [{"name": f"Answer{i}", "type": "Thing"}]})
            server.enqueue(openai_completion(entities), openai_completion('{"edges": []}'))
        extractor = RecordingExtractor(_oai(server), cassette)
        for episode in same:  # one at a time, so recorded order is known
            _run(extractor, [episode], ExtractOptions())
    keys = {json.loads(line)["key"] for line in cassette.read_text().splitlines()}
    assert len(keys) == 1
    replayer = ReplayingExtractor.from_path(cassette)
    served = []
    for episode in same:
        (run,) = _run(replayer, [episode], ExtractOptions())
        assert run.outcome is not None
        served.append(run.outcome.result.entities[0].name)
    assert served == ["Answer0", "Answer1", "Answer2"]
    with pytest.raises(CassetteMiss, match="already served"):
        _run(replayer, [same[0]], ExtractOptions())


def test_classify_calls_record_and_replay(tmp_path: Path) -> None:
    cassette = tmp_path / "classify.jsonl"
    entities = [Entity(name="Ada Lovelace", summary="A mathematician.")]
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(anthropic_message('{"types": {"Ada Lovelace": "Person"}}'))
        recorder = RecordingExtractor(_anthropic(server), cassette)
        live = run_sync(lambda: recorder.classify_entities(entities, ["Person", "Place"]))
    record = json.loads(cassette.read_text())
    assert record["call_type"] == "classify_entities"
    assert record["request"] == {
        "items": {"Ada Lovelace": "A mathematician."},
        "types": ["Person", "Place"],
    }
    replayer = ReplayingExtractor.from_path(cassette)
    assert run_sync(lambda: replayer.classify_entities(entities, ["Person", "Place"])) == live
    with pytest.raises(CassetteMiss) as err:
        run_sync(lambda: replayer.classify_entities(entities, ["Person"]))
    assert err.value.call_type == "classify_entities"


def test_a_failed_classify_call_goes_to_the_sidecar_under_its_own_name(tmp_path: Path) -> None:
    cassette = tmp_path / "classify.jsonl"
    entities = [Entity(name="Ada Lovelace", summary="A mathematician.")]
    with LoopbackLLMServer("openai") as server:
        server.enqueue(openai_error(400))
        recorder = RecordingExtractor(_oai(server), cassette)

        async def classify() -> object:
            try:
                return await recorder.classify_entities(entities, ["Person"])
            finally:
                await recorder.aclose()

        with pytest.raises(ExtractionFailed) as err:
            run_sync(classify)
    assert err.value.failure.call_type == "classify_entities"
    assert cassette.read_text() == ""
    failures = [json.loads(x) for x in sidecar_path(cassette).read_text().splitlines()]
    assert [(f["call_type"], f["classification"]) for f in failures] == [
        ("classify_entities", "http_error")
    ]


def test_record_fields_and_no_transport_detail(tmp_path: Path, episodes: list[Episode]) -> None:
    cassette = tmp_path / "c.jsonl"
    with LoopbackLLMServer("anthropic", responder=rules.anthropic_responder) as server:
        _run(RecordingExtractor(_anthropic(server), cassette), episodes[:1], ExtractOptions())
        port = str(server.port)
    text = cassette.read_text()
    record = json.loads(text)
    assert set(record) == {
        "key", "call_type", "provider", "model", "timestamp", "request", "response",
    }  # fmt: skip
    assert record["call_type"] == "extract"
    assert record["provider"] == "anthropic" and record["model"] == "claude-test"
    assert record["timestamp"].endswith("Z") and "T" in record["timestamp"]
    assert record["request"]["episode_body"] == episodes[0].body
    stages = [s["stage"] for s in record["response"]["transcript"]]
    assert stages == ["entities", "edges"]
    assert TEST_API_KEY not in text and "127.0.0.1" not in text and port not in text
    assert "authorization" not in text.lower()


def test_failures_go_to_the_sidecar_never_to_the_cassette(
    tmp_path: Path, episodes: list[Episode]
) -> None:
    cassette = tmp_path / "c.jsonl"
    with LoopbackLLMServer("openai") as server:
        # Chunk 0: entity budget exhausted twice (fatal). Chunk 1: edge budget exhausted (not).
        server.enqueue(
            openai_completion('{"entities": [', finish_reason="length", completion_tokens=7),
            openai_completion('{"entities": [{"na', finish_reason="length", completion_tokens=9),
        )
        recorder = RecordingExtractor(_oai(server), cassette)
        with pytest.raises(ExtractionFailed):
            run_sync(lambda: recorder.extract(episodes[0], ExtractOptions()))
        server.enqueue(
            openai_completion('{"entities": [{"name": "Grace Hopper"}]}'),
            openai_completion('{"edges": [', finish_reason="length"),
            openai_completion('{"edges": [{"sou', finish_reason="length"),
        )
        outcome = run_sync(lambda: recorder.extract(episodes[1], ExtractOptions()))
    assert outcome.result.edges == ()
    lines = cassette.read_text().splitlines()
    assert len(lines) == 1  # only the non-fatal edge exhaustion produced a record
    failures = [json.loads(x) for x in sidecar_path(cassette).read_text().splitlines()]
    assert [(f["call_type"], f["classification"]) for f in failures] == [
        ("entities", "truncation"),
        ("edges", "truncation"),
    ]
    assert set(failures[0]) == {
        "ts_ms", "model", "call_type", "chunk_key", "classification", "raw_body",
        "finish_reason", "completion_tokens", "max_tokens",
    }  # fmt: skip
    assert failures[0]["chunk_key"] == "chunk-0"
    assert failures[0]["finish_reason"] == "length"
    assert failures[0]["completion_tokens"] == 9
    assert failures[0]["max_tokens"] == 2 * ExtractOptions().max_tokens_entities
    raw = json.loads(failures[0]["raw_body"])  # the complete HTTP body, not a prefix
    assert raw["choices"][0]["message"]["content"] == '{"entities": [{"na'
    assert raw["usage"]["completion_tokens"] == 9


def test_a_very_large_chunk_records_and_replays_whole(tmp_path: Path) -> None:
    body = ("Ada Lovelace met Charles Babbage in London. " * 12_000).strip()  # ~530 KB
    episode = Episode(name="huge", body=body)
    cassette = tmp_path / "huge.jsonl"
    _record_rules(cassette, [episode], ExtractOptions())
    (run,) = _run(ReplayingExtractor.from_path(cassette), [episode], ExtractOptions())
    assert run.outcome is not None
    assert {e.name for e in run.outcome.result.entities} == {
        "Ada Lovelace",
        "Charles Babbage",
        "London",
    }
    assert json.loads(cassette.read_text())["request"]["episode_body"] == body


def test_non_utf8_cassette_bytes_are_a_corrupt_line(
    tmp_path: Path, episodes: list[Episode]
) -> None:
    from evals_pipeline.core.errors import CassetteCorrupt

    cassette = tmp_path / "c.jsonl"
    _record_rules(cassette, episodes[:1], ExtractOptions())
    with cassette.open("ab") as handle:
        handle.write(b'{"key": "\xff\xfe"}\n')
    with pytest.raises(CassetteCorrupt) as err:
        load_cassette(cassette)
    assert err.value.line == 2
    # Said so: pydantic's own words for such bytes are about JSON ("expected value" and such).
    assert "not UTF-8 text (byte 9 of the line)" in err.value.problem


RULES = Path(__file__).parents[3] / "corpus" / "cassettes" / "rules.jsonl"


def test_a_record_target_mid_append_is_not_corrupt(tmp_path: Path) -> None:
    from evals_pipeline.core.cassettes.record import check_record_target
    from evals_pipeline.core.errors import CassetteCorrupt

    first = RULES.read_bytes().split(b"\n")[0] + b"\n"
    target = tmp_path / "rec.jsonl"
    target.write_bytes(first + first[:40])  # another run's record, half written so far
    check_record_target(target)
    target.write_bytes(first[:40] + b"\n" + first)  # a torn line that was ended: corrupt
    with pytest.raises(CassetteCorrupt):
        check_record_target(target)


def test_a_record_target_under_a_file_is_refused_before_any_call(tmp_path: Path) -> None:
    from evals_pipeline.core.cassettes.record import check_record_target
    from evals_pipeline.core.errors import CassetteNotAFile

    (tmp_path / "afile").write_text("a file\n")  # opening the target had raised FileExistsError
    with pytest.raises(CassetteNotAFile, match=r"cannot be made: .*afile is a file, not a folder"):
        check_record_target(tmp_path / "afile" / "deeper" / "rec.jsonl")


def test_a_record_target_must_hold_this_models_answers_at_these_budgets(tmp_path: Path) -> None:
    """A recording run is served what its cassette holds: answers of another model, or made at
    other token budgets, are refused before any call, whichever keys this run will ask."""
    from evals_pipeline.core.cassettes.record import check_record_target
    from evals_pipeline.core.errors import CassetteDuplicateKey, RecordingTargetMismatch

    target = tmp_path / "rec.jsonl"
    lines = RULES.read_text().splitlines(keepends=True)
    target.write_text(lines[0] + lines[1])
    model = json.loads(lines[0])["model"]
    check_record_target(target, model=model, budgets=(4096, 4096), unique=True)
    with pytest.raises(RecordingTargetMismatch, match=f"line 1 is an answer of model '{model}'"):
        check_record_target(target, model="bigger")
    with pytest.raises(RecordingTargetMismatch, match=r"max_tokens 4096 \(edges\)"):
        check_record_target(target, model=model, budgets=(4096, 512))
    target.write_text(lines[0] + lines[1] + lines[0])  # one key answered twice
    with pytest.raises(CassetteDuplicateKey):
        check_record_target(target, model=model, unique=True)
    check_record_target(target, model=model)  # the bench's recast cases record a key twice


def test_a_locked_load_waits_for_an_append_in_progress(tmp_path: Path) -> None:
    """Steps of one run record into one cassette in parallel; a step loading it while another
    appends reads the record whole (appends hold an exclusive flock), never a torn line."""
    import fcntl
    import os
    import threading
    import time

    target = tmp_path / "rec.jsonl"
    lines = RULES.read_bytes().splitlines(keepends=True)
    target.write_bytes(lines[0])
    locked = threading.Event()

    def append_slowly() -> None:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, lines[1][:50])
            locked.set()
            time.sleep(0.3)
            os.write(fd, lines[1][50:])
        finally:
            os.close(fd)

    writer = threading.Thread(target=append_slowly)
    writer.start()
    assert locked.wait(5)
    loaded = load_cassette(target, consume=False, missing_ok=True, locked=True)
    writer.join()
    assert len(loaded) == 2


def test_a_recorded_reply_that_is_no_answer_fails_in_replay_too() -> None:
    """A cassette recorded before the stop-reason rule can hold a content_filter reply whose
    text parses: replay runs today's flow over it, so it fails as live would, not scores as a
    clean chunk that found nothing."""
    from evals_pipeline.core.cassettes.format import ReplayResponse, ServedRecord
    from evals_pipeline.core.cassettes.replay import _TranscriptTransport
    from evals_pipeline.core.extractors.base import run_extract
    from evals_pipeline.core.models import Attempt, FailureRecord, StageTranscript

    filtered = Attempt(
        text='{"entities": []}', finish_reason="content_filter", truncated=False, max_tokens=100
    )
    record = ServedRecord(
        key="k" * 64,
        call_type="extract",
        provider="oai-http",
        model="m",
        response=ReplayResponse(
            transcript=(StageTranscript(stage="entities", attempts=(filtered,)),)
        ),
    )
    episode = Episode(name="ep", body="Alice works at Acme.")
    with pytest.raises(ExtractionFailed) as err:
        run_sync(lambda: run_extract(_TranscriptTransport(record), episode, ExtractOptions()))
    assert isinstance(err.value.failure, FailureRecord)
    assert (err.value.failure.classification, err.value.failure.finish_reason) == (
        "malformed",
        "content_filter",
    )


def test_a_recording_target_in_a_folder_this_user_cannot_search_is_a_typed_error(
    tmp_path: Path, shared_folder: Path
) -> None:
    """A PermissionError had escaped the plan's guard as a traceback, even for --dry-run."""
    from evals_pipeline.core.cassettes.record import check_record_target
    from evals_pipeline.core.errors import CassetteNotAFile
    from evals_pipeline_tests.support.locks import without_write_access

    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    with without_write_access(shared_folder), pytest.raises(CassetteNotAFile, match="cannot be"):
        check_record_target(locked / "rec.jsonl")


def test_a_lock_held_elsewhere_stalls_no_call_in_flight(tmp_path: Path) -> None:
    """Another process holds the cassette's lock (a locked load of it, say) while a recording
    appends: the append had waited on the event loop's thread, so a call in flight whose reply
    came in 0.4 s timed out at 1 s, to be sent (and paid for) again. Now only the append waits."""
    import dataclasses

    from evals_pipeline_tests.support.locks import lock_held_elsewhere

    cassette = tmp_path / "c.jsonl"
    cassette.touch()

    def responder(request):  # type: ignore[no-untyped-def]
        reply = rules.openai_responder(request)
        slow = "Grace" in (request.user_prompt or "")
        return dataclasses.replace(reply, delay_s=0.4) if slow else reply

    episodes = [
        Episode(name="fast", body="Ada Lovelace met Charles Babbage."),
        Episode(name="slow", body="Grace Hopper met Howard Aiken."),
    ]
    with (
        lock_held_elsewhere(cassette, 2.5),
        LoopbackLLMServer("openai", responder=responder) as server,
    ):
        transport = OpenAICompatTransport(
            url=server.base_url, model="rules", timeout_s=1.0, max_retries=0
        )
        recorder = RecordingExtractor(TransportExtractor(transport), cassette)
        runs = _run(recorder, episodes, ExtractOptions())
    assert [run.error for run in runs] == [None, None]
    assert len(server.requests) == 4  # no call sent again
    assert len(cassette.read_text().splitlines()) == 2


def test_a_failed_sidecar_write_keeps_the_paid_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that failed after 3 requests, whose failure record then met a full disk: the
    CassetteWriteError had carried no stats, so the run's spend counted 0 requests."""
    import errno

    from evals_pipeline.core.cassettes import store
    from evals_pipeline.core.cassettes.cache import CachingExtractor
    from evals_pipeline.core.errors import CassetteWriteError

    with LoopbackLLMServer("openai") as server:
        server.enqueue(*[openai_error(500)] * 3)
        transport = OpenAICompatTransport(
            url=server.base_url, model="rules", max_retries=2, backoff_s=0.01, max_backoff_s=0.02
        )
        cassette = tmp_path / "c.jsonl"
        recorder = RecordingExtractor(TransportExtractor(transport), cassette)
        cached = CachingExtractor(recorder, tmp_path / "cache.jsonl", recording_to=cassette)

        def full_disk(fd: int, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(store.os, "write", full_disk)
        with pytest.raises(CassetteWriteError, match="No space left"):
            _run(
                cached,
                [Episode(name="e", body="Ada Lovelace met Charles Babbage.")],
                ExtractOptions(),
            )
    assert len(server.requests) == 3 and cached.requests == 3


class _LiveAnswer(Extractor):
    """A network backend's answer, as the recorder sees it (`local` False: written off the
    loop), with `failures` (edge budgets exhausted) beside it."""

    provider, model, local = "p", "m", False

    def __init__(self, failures: tuple[FailureRecord, ...] = ()) -> None:
        self.failures = failures

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        return ExtractionOutcome(
            result=ExtractionResult(),
            stats=CallStats(requests=1),
            transcript=(),
            failures=self.failures,
            provider="p",
            model="m",
        )

    async def classify_entities(self, entities, types):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    async def classify_relations(self, edges, types):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def _recording_at_once(cassette: Path, calls: int) -> list[asyncio.Task[ExtractionOutcome]]:
    """`calls` answers of a network backend, recorded into `cassette` at once (in a loop)."""
    recorder = RecordingExtractor(_LiveAnswer(), cassette)
    return [
        asyncio.create_task(
            recorder.extract(Episode(name=f"e{i}", body=f"Ada {i}."), ExtractOptions())
        )
        for i in range(calls)
    ]


def test_a_cancel_while_the_record_waits_splits_it_from_its_sidecar_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer with an edge budget exhausted is a record and a sidecar entry. They had been
    two write jobs: a cancel (Ctrl-C) while the first waited on a lock held elsewhere let the
    record be written and dropped the entry."""

    from evals_pipeline.core.cassettes import store

    failure = FailureRecord(
        ts_ms=1,
        model="m",
        call_type="edges",
        chunk_key="c",
        classification="truncation",
        raw_body="",
        finish_reason="length",
        completion_tokens=60,
        max_tokens=60,
    )

    real_append = store.CassetteWriter.append

    def slow_append(self, record):  # type: ignore[no-untyped-def]
        time.sleep(0.5)  # the cassette's lock, held a moment by another process
        return real_append(self, record)

    monkeypatch.setattr(store.CassetteWriter, "append", slow_append)
    cassette = tmp_path / "c.jsonl"

    async def go() -> None:
        recorder = RecordingExtractor(_LiveAnswer((failure,)), cassette)
        task = asyncio.create_task(
            recorder.extract(Episode(name="e", body="Ada."), ExtractOptions())
        )
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_sync(go)  # which returns once the writes it began are done, as asyncio.run's own
    assert len(cassette.read_text().splitlines()) == 1
    assert len(sidecar_path(cassette).read_text().splitlines()) == 1


def test_recordings_waiting_on_a_lock_hold_up_no_host_name_lookup(tmp_path: Path) -> None:
    """Writes waiting on a lock held elsewhere had filled the loop's default executor (a few
    threads), where aiohttp resolves host names: no new connection could be made meanwhile."""

    from evals_pipeline_tests.support.locks import lock_held_elsewhere

    cassette = tmp_path / "c.jsonl"
    cassette.touch()

    async def go() -> float:
        calls = _recording_at_once(cassette, 40)
        await asyncio.sleep(0.2)  # every write is waiting on the lock by now
        started = time.perf_counter()
        await asyncio.get_running_loop().getaddrinfo("localhost", 80)
        took = time.perf_counter() - started
        await asyncio.gather(*calls)
        return took

    with lock_held_elsewhere(cassette, 2.0):
        took = asyncio.run(go())
    assert took < 1.0, took
    assert len(cassette.read_text().splitlines()) == 40


def test_a_cancel_drops_no_write_still_queued(tmp_path: Path) -> None:
    """Every answer paid for is written, even one whose write was queued behind others (on a
    lock held elsewhere) when the run was cancelled: a queued write had been dropped with it."""

    from evals_pipeline_tests.support.locks import lock_held_elsewhere

    cassette = tmp_path / "c.jsonl"
    cassette.touch()

    async def go() -> None:
        calls = _recording_at_once(cassette, 12)
        await asyncio.sleep(0.2)
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)

    with lock_held_elsewhere(cassette, 1.0):
        run_sync(go)
    assert len(cassette.read_text().splitlines()) == 12
