"""Blind pairwise judging against a loopback judge with scripted biases: every count, exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evals_pipeline.core.judge.cache import JudgeCache
from evals_pipeline.core.judge.client import JudgeClient
from evals_pipeline.core.judge.pairwise import judge_all_pairs, pairwise_warnings, slot_orders
from evals_pipeline.core.models import Edge, Entity, ExtractionResult
from evals_pipeline.core.runner import run_sync
from evals_pipeline_tests.conftest import TEST_API_KEY
from evals_pipeline_tests.support import scripted_judge
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer

CHUNKS = [f"c{i}" for i in range(6)]
# c0-c2 trip the "mixed" judge's bias; c3-c5 get consistent verdicts.
BODIES = {c: f"Chunk {c} {'biased' if i < 3 else 'plain'} text." for i, c in enumerate(CHUNKS)}


def graph(n: int) -> ExtractionResult:
    entities = tuple(Entity(name=f"Item{i}", type="Thing", summary=f"S{i}.") for i in range(n))
    edges = tuple(
        Edge(source=f"Item{i}", target=f"Item{i + 1}", relation="R") for i in range(n - 1)
    )
    return ExtractionResult(entities=entities, edges=edges)


def results() -> dict[str, dict[str, ExtractionResult | None]]:
    return {
        "alpha": {c: graph(4) for c in CHUNKS},
        "beta": {c: graph(2) for c in CHUNKS},
        # gamma failed on c5: that chunk is skipped for its pairs, never a loss
        "gamma": {**{c: graph(3) for c in CHUNKS[:5]}, "c5": None},
    }


def run(server: LoopbackLLMServer, cache_path: Path) -> dict[str, Any]:
    client = JudgeClient(JudgeCache(cache_path), api_key=TEST_API_KEY, base_url=server.base_url)

    async def go() -> dict[str, Any]:
        try:
            return await judge_all_pairs(client, BODIES, results())
        finally:
            await client.aclose()

    return run_sync(go)


def tally(pairs: dict[str, Any], pair: str, axis: str = "entities") -> dict[str, Any]:
    return pairs[pair]["axes"][axis]


def test_order_consistent_judge(tmp_path: Path) -> None:
    with LoopbackLLMServer("anthropic", responder=scripted_judge.judge_responder(
        scripted_judge.order_consistent
    )) as server:  # fmt: skip
        pairs = run(server, tmp_path / "cache.jsonl")
        # 3 pairs; alpha/beta 6 chunks, pairs with gamma 5; x 3 axes x 2 orders
        assert len(server.requests) == (6 + 5 + 5) * 3 * 2
    assert set(pairs) == {"alpha vs beta", "alpha vs gamma", "beta vs gamma"}
    for axis in ("entities", "edges", "summaries"):
        assert tally(pairs, "alpha vs beta", axis) == {
            "wins": 6, "losses": 0, "ties": 0, "win_rate": 1.0,
            "order_inconsistency_rate": 0.0, "order_inconsistent": 0,
            "chunks_compared": 6, "chunks_skipped": 0, "judge_errors": 0, "first_error": None,
        }  # fmt: skip
        t = tally(pairs, "beta vs gamma", axis)
        assert (t["wins"], t["losses"], t["ties"], t["win_rate"]) == (0, 5, 0, 0.0)
        assert (t["chunks_compared"], t["chunks_skipped"]) == (5, 1)
    warnings = pairwise_warnings(pairs)
    assert len(warnings) == 9  # every pair/axis is outside 45-55%; none flips
    assert all(w.startswith("note: ") for w in warnings)
    assert "alpha vs beta entities: win rate 100.0% is outside 45%-55%" in warnings[0]


def test_position_biased_judge(tmp_path: Path) -> None:
    with LoopbackLLMServer("anthropic", responder=scripted_judge.judge_responder(
        scripted_judge.position_biased
    )) as server:  # fmt: skip
        pairs = run(server, tmp_path / "cache.jsonl")
    t = tally(pairs, "alpha vs gamma")
    assert t == {
        "wins": 0, "losses": 0, "ties": 5, "win_rate": None,
        "order_inconsistency_rate": 1.0, "order_inconsistent": 5,
        "chunks_compared": 5, "chunks_skipped": 1, "judge_errors": 0, "first_error": None,
    }  # fmt: skip
    warnings = pairwise_warnings(pairs)
    assert len(warnings) == 9 and all(w.startswith("warning: ") for w in warnings)
    assert "flipped its verdict when the slots swapped on 100.0% of chunks" in warnings[0]


def test_mixed_judge(tmp_path: Path) -> None:
    with LoopbackLLMServer("anthropic", responder=scripted_judge.judge_responder(
        scripted_judge.mixed
    )) as server:  # fmt: skip
        pairs = run(server, tmp_path / "cache.jsonl")
    ab = tally(pairs, "alpha vs beta")
    # c0-c2 flip (ties + inconsistencies); c3-c5 consistent wins for alpha
    assert (ab["wins"], ab["losses"], ab["ties"]) == (3, 0, 3)
    assert ab["win_rate"] == 1.0 and ab["order_inconsistency_rate"] == 0.5
    bg = tally(pairs, "beta vs gamma")
    assert (bg["wins"], bg["losses"], bg["ties"], bg["chunks_skipped"]) == (0, 2, 3, 1)
    assert bg["order_inconsistency_rate"] == pytest.approx(3 / 5)
    warnings = pairwise_warnings(pairs)
    assert sum(w.startswith("warning: ") for w in warnings) == 9  # 50% and 60% > 20%
    assert sum(w.startswith("note: ") for w in warnings) == 9  # 100% and 0% win rates


def test_rerun_is_served_by_the_cache_and_slots_reproduce(tmp_path: Path) -> None:
    responder = scripted_judge.judge_responder(scripted_judge.position_biased)
    with LoopbackLLMServer("anthropic", responder=responder) as server:
        first = run(server, tmp_path / "cache.jsonl")
        sent = len(server.requests)
        again = run(server, tmp_path / "cache.jsonl")
        assert len(server.requests) == sent  # zero judge calls on the re-run
        assert again == first
    bodies = sorted(r.body for r in server.requests)
    with LoopbackLLMServer("anthropic", responder=responder) as other:
        run(other, tmp_path / "fresh-cache.jsonl")
        assert sorted(r.body for r in other.requests) == bodies  # byte-identical prompts
    # The judge never sees a backend name.
    assert not any(name.encode() in b for b in bodies for name in ("alpha", "beta", "gamma"))


def test_slot_order_is_a_function_of_chunk_and_pair_only() -> None:
    orders = [slot_orders(c, "alpha", "beta") for c in CHUNKS]
    assert orders == [slot_orders(c, "alpha", "beta") for c in CHUNKS]
    assert all(sorted(o) == [("alpha", "beta"), ("beta", "alpha")] for o in orders)
    assert len({o[0] for o in orders}) == 2  # both first orders occur over six chunks


def test_pairwise_warnings_name_the_mode() -> None:
    section = {
        "a vs b": {
            "axes": {"entities": {"win_rate": 0.9, "order_inconsistency_rate": 0.5}},
        }
    }
    lines = pairwise_warnings(section, "strict")
    assert len(lines) == 2 and all(
        line.split(": ")[1].startswith("a vs b (strict)") for line in lines
    )
