from __future__ import annotations

from pathlib import Path

import pytest

from evals_pipeline.core.judge.cache import JudgeCache, JudgeCacheCorrupt, judge_key
from evals_pipeline.core.judge.client import JudgeClient
from evals_pipeline.core.judge.reference import (
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


@pytest.mark.parametrize("stop_reason", ["max_tokens", "refusal"])
def test_a_cut_off_or_refused_verdict_is_a_judge_error_and_never_cached(
    tmp_path: Path, stop_reason: str
) -> None:
    cut = anthropic_message('{"matches": [[1, 1], [2,', stop_reason=stop_reason)
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
