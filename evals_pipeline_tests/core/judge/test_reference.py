from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evals_pipeline.core.judge.cache import JudgeCache, JudgeCacheCorrupt, judge_key
from evals_pipeline.core.judge.client import JudgeClient
from evals_pipeline.core.judge.pairwise import WinnerVerdict
from evals_pipeline.core.judge.reference import (
    MatchesVerdict,
    Verdict,
    judge_against_reference,
    judged_scores,
    matches_to_counts,
)
from evals_pipeline.core.models import Edge, Entity, ExtractionResult
from evals_pipeline.core.runner import run_sync
from evals_pipeline.core.scoring.strict import score_against_reference
from evals_pipeline_tests.conftest import TEST_API_KEY
from evals_pipeline_tests.support import scripted_judge
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer, Reply, anthropic_message

REFERENCE = ExtractionResult(
    entities=(
        Entity(name="Ada Lovelace", type="Person", summary="A mathematician."),
        Entity(name="London", type="Place", summary="A city."),
    ),
    edges=(Edge(source="Ada Lovelace", target="London", relation="BORN_IN"),),
)
# Same content, other types and wording: strict matching misses what a judge forgives.
REWORDED = ExtractionResult(
    entities=(
        Entity(name="ada lovelace", type="Human", summary="Mathematician and writer."),
        Entity(name="London", type="City", summary="Capital of England."),
    ),
    edges=(Edge(source="Ada Lovelace", target="London", relation="BORN_IN"),),
)


def judge(server: LoopbackLLMServer, cache: Path, candidate: ExtractionResult):  # type: ignore[no-untyped-def]
    client = JudgeClient(JudgeCache(cache), api_key=TEST_API_KEY, base_url=server.base_url)

    async def go():  # type: ignore[no-untyped-def]
        try:
            return await judge_against_reference(
                client,
                {"c": "Ada Lovelace was born in London."},
                {"c": candidate},
                {"c": REFERENCE},
            )
        finally:
            await client.aclose()

    return run_sync(go), client


def test_judged_scores_forgive_wording_that_strict_scores_do_not(tmp_path: Path) -> None:
    responder = scripted_judge.judge_responder(scripted_judge.order_consistent)
    with LoopbackLLMServer("anthropic", responder=responder) as server:
        verdicts, client = judge(server, tmp_path / "j.jsonl", REWORDED)
        assert client.calls == 3 and len(server.requests) == 3
    judged = judged_scores(verdicts)
    strict = score_against_reference({"c": REWORDED}, {"c": REFERENCE}).to_dict()
    assert judged["entities"]["f1"] == 1.0 and judged["edges"]["f1"] == 1.0
    assert judged["summaries"]["f1"] == 0.0  # the scripted judge matches names, not prose
    assert strict["summaries"]["f1"] == 0.0 and strict["entities"]["f1"] == 1.0
    assert judged["entities"]["judge_errors"] == 0


def test_rerun_makes_zero_judge_calls(tmp_path: Path) -> None:
    responder = scripted_judge.judge_responder(scripted_judge.order_consistent)
    with LoopbackLLMServer("anthropic", responder=responder) as server:
        first, _ = judge(server, tmp_path / "j.jsonl", REWORDED)
        again, client = judge(server, tmp_path / "j.jsonl", REWORDED)
        assert len(server.requests) == 3
    assert again == first and client.calls == 0 and client.hits == 3


def test_malformed_or_failed_judge_replies_are_counted_not_scored(tmp_path: Path) -> None:
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(*[anthropic_message("I think they match.")] * 3)
        verdicts, _ = judge(server, tmp_path / "j.jsonl", REWORDED)
    scores = judged_scores(verdicts)
    assert all(scores[axis]["judge_errors"] == 1 for axis in scores)
    assert all(scores[axis]["tp"] + scores[axis]["fp"] + scores[axis]["fn"] == 0 for axis in scores)


def test_matches_are_one_to_one_and_in_range() -> None:
    counts = matches_to_counts([(1, 1), (1, 2), (2, 1), (3, 9), (2, 2)], 3, 2)
    assert (counts.tp, counts.fp, counts.fn) == (2, 1, 0)


@pytest.mark.parametrize(
    "order", [[(1, 2), (1, 1), (2, 2)], [(1, 1), (1, 2), (2, 2)], [(2, 2), (1, 2), (1, 1)]]
)
def test_the_judges_pairs_count_the_same_in_any_order(order: list[tuple[int, int]]) -> None:
    """Taken first come, (1,2) then (1,1), (2,2) had counted one match where two stand."""
    counts = matches_to_counts(order, 2, 2)
    assert (counts.tp, counts.fp, counts.fn) == (2, 0, 0)


def test_a_match_is_two_item_numbers() -> None:
    """JSON's true had been read as item 1."""
    with pytest.raises(ValidationError):
        MatchesVerdict.model_validate_json('{"matches": [[true, 1]]}')


def test_cache_families_never_collide_and_corruption_names_the_line(tmp_path: Path) -> None:
    assert judge_key("reference/edges", "s", "u", "m") != judge_key("pairwise/edges", "s", "u", "m")
    assert judge_key("reference/edges", "s", "u", "m") != judge_key(
        "reference/edges", "s", "u", "n"
    )
    cache = JudgeCache(tmp_path / "j.jsonl")
    cache.put("k", "reference/edges", "m", "{}")
    with (tmp_path / "j.jsonl").open("a") as handle:
        handle.write("{oops\n")
    with pytest.raises(JudgeCacheCorrupt) as err:
        JudgeCache(tmp_path / "j.jsonl")
    assert err.value.line == 2 and "j.jsonl:2" in str(err.value)
    (tmp_path / "k.jsonl").write_text('{"a": 1}\n')  # had said only "Field required"
    with pytest.raises(JudgeCacheCorrupt, match=r"k.jsonl:1: key: Field required"):
        JudgeCache(tmp_path / "k.jsonl")


def test_a_judge_cache_that_is_a_folder_is_named(tmp_path: Path) -> None:
    from evals_pipeline.core.errors import InputFileError

    with pytest.raises(InputFileError, match="is a folder; the judge cache is a JSONL file") as err:
        JudgeCache(tmp_path)
    assert err.value.path == tmp_path


@pytest.mark.parametrize(
    "stop_reason", ["max_tokens", "refusal", "pause_turn", "model_context_window_exceeded"]
)
def test_a_cut_off_or_refused_verdict_is_a_judge_error_and_never_cached(
    tmp_path: Path, stop_reason: str
) -> None:
    # A verdict that parses: only the stop reason says it is none (pause_turn and a full
    # context window had been cached as verdicts).
    cut = anthropic_message('{"matches": []}', stop_reason=stop_reason)
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(*[cut] * 3)
        verdicts, client = judge(server, tmp_path / "j.jsonl", REWORDED)
        scores = judged_scores(verdicts)
        assert all(scores[axis]["judge_errors"] == 1 for axis in scores)
        assert len(client.cache) == 0
        # Asked again next run, not read back from the cache as a malformed verdict.
        server.enqueue(*[cut] * 3)
        _again, client = judge(server, tmp_path / "j.jsonl", REWORDED)
        assert client.calls == 3 and len(server.requests) == 6


@pytest.mark.parametrize("body", [b"{}", b'{"type": "message", "content": null}', b"<html>"])
def test_a_reply_that_is_not_a_message_is_a_judge_error(tmp_path: Path, body: bytes) -> None:
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(*[Reply(raw=body)] * 3)
        verdicts, _ = judge(server, tmp_path / "j.jsonl", REWORDED)
    scores = judged_scores(verdicts)
    assert all(scores[axis]["judge_errors"] == 1 for axis in scores)


def test_with_every_judge_call_failed_the_scores_are_none_not_perfect(tmp_path: Path) -> None:
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(*[anthropic_message("I think they match.")] * 3)
        verdicts, _ = judge(server, tmp_path / "j.jsonl", REWORDED)
    for scores in judged_scores(verdicts).values():
        assert (scores["precision"], scores["recall"], scores["f1"]) == (None, None, None)
        assert (scores["chunks_judged"], scores["judge_errors"]) == (0, 1)


def test_a_chunk_the_candidate_failed_counts_every_reference_item_as_missed(
    tmp_path: Path,
) -> None:
    """As in strict scoring: a backend that fails a chunk must not score better for it."""
    client = JudgeClient(JudgeCache(tmp_path / "j.jsonl"), api_key=TEST_API_KEY)
    verdicts = run_sync(
        lambda: judge_against_reference(client, {"c": "text"}, {"c": None}, {"c": REFERENCE})
    )
    assert client.calls == 0  # nothing to ask: no server runs here
    scores = judged_scores(verdicts)
    strict = score_against_reference({"c": None}, {"c": REFERENCE}).to_dict()
    for axis in ("entities", "edges", "summaries"):
        assert (scores[axis]["tp"], scores[axis]["fn"]) == (0, strict[axis]["fn"])
        assert scores[axis]["f1"] == 0.0 and scores[axis]["chunks_judged"] == 1
    # A candidate with no row for the chunk at all counts the same.
    absent = run_sync(lambda: judge_against_reference(client, {"c": "t"}, {}, {"c": REFERENCE}))
    assert absent == verdicts


def test_an_axis_with_no_item_on_one_side_is_scored_without_a_call(tmp_path: Path) -> None:
    """Nothing can match: every candidate item is a false positive, every reference item a
    false negative, whatever a judge says. No server runs here."""
    client = JudgeClient(JudgeCache(tmp_path / "j.jsonl"), api_key=TEST_API_KEY)
    no_edges = REFERENCE.model_copy(update={"edges": ()})
    empty = ExtractionResult(entities=(), edges=())

    def verdicts(candidate: ExtractionResult, reference: ExtractionResult) -> dict[str, Verdict]:
        found = run_sync(
            lambda: judge_against_reference(client, {"c": "t"}, {"c": candidate}, {"c": reference})
        )
        return {v.axis: v for v in found}

    missed = verdicts(empty, REFERENCE)
    assert [(v.tp, v.fp, v.fn) for v in missed.values()] == [(0, 0, 2), (0, 0, 1), (0, 0, 2)]
    invented = verdicts(REFERENCE.model_copy(update={"entities": ()}), no_edges)
    assert (invented["edges"].fp, invented["edges"].fn) == (1, 0)
    assert client.calls == 0 and not (tmp_path / "j.jsonl").exists()


def test_a_reply_that_is_no_verdict_is_never_cached_and_is_asked_again(tmp_path: Path) -> None:
    responder = scripted_judge.judge_responder(scripted_judge.order_consistent)
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(*[anthropic_message("Sure! Candidate 1 matches reference 1.")] * 3)
        _verdicts, client = judge(server, tmp_path / "j.jsonl", REWORDED)
        assert len(client.cache) == 0
    with LoopbackLLMServer("anthropic", responder=responder) as server:
        verdicts, client = judge(server, tmp_path / "j.jsonl", REWORDED)
        assert client.calls == 3 and len(server.requests) == 3
    assert judged_scores(verdicts)["entities"]["f1"] == 1.0


def test_a_cached_entry_that_is_no_verdict_is_asked_again_and_replaced(tmp_path: Path) -> None:
    """A cache written before only verdicts were cached may hold a reply that does not parse:
    it is asked again, and the new verdict (appended after it) is the one read back."""
    cache_path = tmp_path / "j.jsonl"
    responder = scripted_judge.judge_responder(scripted_judge.order_consistent)
    with LoopbackLLMServer("anthropic", responder=responder) as server:
        judge(server, cache_path, REWORDED)
    lines = cache_path.read_text().splitlines()
    stale = [
        json.dumps({**json.loads(line), "text": "no verdict here"}, ensure_ascii=False)
        for line in lines
    ]
    cache_path.write_text("\n".join(stale) + "\n")
    with LoopbackLLMServer("anthropic", responder=responder) as server:
        first, client = judge(server, cache_path, REWORDED)
        assert client.calls == 3 and client.hits == 0
        again, client = judge(server, cache_path, REWORDED)
        assert client.calls == 0 and client.hits == 3 and len(server.requests) == 3
    assert again == first and judged_scores(first)["entities"]["f1"] == 1.0


def test_a_torn_cache_line_is_skipped_not_fatal(tmp_path: Path) -> None:
    """Another process's append in progress (parallel judging steps share the cache) or a
    crash mid-write: JSON cut short loses only that verdict, now and after later appends
    (which set the torn bytes aside, whole). Any other bad line is corruption, named."""
    path = tmp_path / "j.jsonl"
    cache = JudgeCache(path)
    cache.put("k", "reference/edges", "m", '{"matches": []}')
    with path.open("a") as handle:
        handle.write('{"key": "abc", "prompt_na')
    reloaded = JudgeCache(path)
    assert len(reloaded) == 1 and reloaded.get("k") == '{"matches": []}'
    reloaded.put("k2", "reference/edges", "m", '{"matches": []}')
    assert path.read_text().count("\n") == 2  # the torn line went aside, whole
    assert (tmp_path / "j.jsonl.torn").read_text() == '{"key": "abc", "prompt_na\n'
    assert len(JudgeCache(path)) == 2
    with path.open("a") as handle:
        handle.write('{"key": "abc", "prompt_name": 5}\n')
    with pytest.raises(JudgeCacheCorrupt) as err:
        JudgeCache(path)
    assert err.value.line == 3


def test_judge_errors_beside_only_empty_chunks_measure_nothing() -> None:
    """An empty chunk agrees on nothing (1.0, as strict) only when no judge call failed."""
    empty, failed = Verdict("c", "entities", 0, 0, 0), Verdict("d", "entities", 0, 0, 0, "x")
    assert judged_scores([empty, failed])["entities"]["f1"] is None
    assert judged_scores([empty])["entities"]["f1"] == 1.0


def test_a_judge_cache_on_a_full_disk_fails_the_judging_and_starts_no_further_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each verdict had been paid for, then dropped as a judge error, and the run went on
    calling (and exited 0)."""
    import errno

    from evals_pipeline.core.cassettes import store
    from evals_pipeline.core.errors import CassetteWriteError

    def disk_full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "write", disk_full)
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(*[anthropic_message('{"matches": [[1, 1]]}')] * 3)
        client = JudgeClient(
            JudgeCache(tmp_path / "j.jsonl"),
            api_key=TEST_API_KEY,
            base_url=server.base_url,
            concurrency=1,
        )

        async def go() -> list[Any]:
            try:
                return await judge_against_reference(
                    client,
                    {"c": "Ada Lovelace was born in London."},
                    {"c": REWORDED},
                    {"c": REFERENCE},
                )
            finally:
                await client.aclose()

        with pytest.raises(CassetteWriteError, match="No space left on device"):
            run_sync(go)
        assert len(server.requests) == 1  # the other two axes were not asked


def test_one_prompt_asked_twice_at_once_is_one_call(tmp_path: Path) -> None:
    """A pairwise pair whose two slots hold the same graph asks one prompt in both orders,
    at once: both had been sent (and the cache written twice)."""
    with LoopbackLLMServer("anthropic") as server:
        server.enqueue(anthropic_message('{"winner": "tie"}'))
        client = JudgeClient(
            JudgeCache(tmp_path / "j.jsonl"), api_key=TEST_API_KEY, base_url=server.base_url
        )

        async def go() -> list[Any]:
            try:
                return list(
                    await asyncio.gather(
                        *(
                            client.judge("pairwise/entities", "s", "u", WinnerVerdict)
                            for _ in range(3)
                        )
                    )
                )
            finally:
                await client.aclose()

        verdicts = run_sync(go)
    assert [v.winner for v in verdicts] == ["tie"] * 3
    assert (len(server.requests), client.calls, client.hits, len(client.cache)) == (1, 1, 2, 1)


def test_a_judge_cache_locked_elsewhere_stalls_no_call_in_flight(tmp_path: Path) -> None:
    """Another process holds the judge cache's lock (a multiprocess run's other judging step)
    while a verdict is cached: the write had waited on the event loop's thread, so a call in
    flight whose reply came in 0.4 s timed out at 1 s. Now only the write waits."""
    import dataclasses

    from evals_pipeline.core.judge.reference import MatchesVerdict
    from evals_pipeline_tests.support.locks import lock_held_elsewhere

    cache = tmp_path / "j.jsonl"
    cache.touch()

    def responder(request):  # type: ignore[no-untyped-def]
        reply = anthropic_message('{"matches": [[1, 1]]}')
        return dataclasses.replace(reply, delay_s=0.4) if "slow" in request.user_prompt else reply

    with (
        lock_held_elsewhere(cache, 2.5),
        LoopbackLLMServer("anthropic", responder=responder) as server,
    ):
        client = JudgeClient(
            JudgeCache(cache), api_key=TEST_API_KEY, base_url=server.base_url, timeout_s=1.0
        )

        async def go() -> list[MatchesVerdict]:
            try:
                return await asyncio.gather(
                    client.judge("p", "s", "fast", MatchesVerdict),
                    client.judge("p", "s", "slow", MatchesVerdict),
                )
            finally:
                await client.aclose()

        verdicts = run_sync(go)
    assert [v.matches for v in verdicts] == [[(1, 1)], [(1, 1)]]
    assert len(server.requests) == 2 and len(cache.read_text().splitlines()) == 2


def test_no_judged_score_where_the_judge_answered_nothing() -> None:
    """Every judge call failed, and one chunk the candidate had failed (a verdict made with no
    call) was in the pool: the report had shown judged P/R/F1 0.000 over 1 chunk judged."""
    errors = [Verdict(f"c{i}", "edges", 0, 0, 0, error="judge HTTP 529") for i in range(15)]
    no_call = Verdict("c15", "edges", 0, 0, 5)  # the candidate failed c15: all false negatives
    scores = judged_scores([*errors, no_call])["edges"]
    assert (scores["precision"], scores["recall"], scores["f1"]) == (None, None, None)
    assert (scores["chunks_judged"], scores["judge_errors"]) == (1, 15)
    # One verdict the judge gave, and the pool is scored, the failed chunk counting against.
    asked = Verdict("c16", "edges", 2, 0, 0, asked=True)
    scores = judged_scores([*errors, no_call, asked])["edges"]
    assert scores["recall"] == pytest.approx(2 / 7)
    # No error at all: verdicts made without a call stand, as in strict scoring.
    assert judged_scores([no_call])["edges"]["recall"] == 0.0
