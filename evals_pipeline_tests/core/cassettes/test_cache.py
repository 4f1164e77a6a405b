"""The extraction cache: a backend that makes calls is served from it on a re-run; a local
backend (a cassette replay, the oracle) is passed through and never copied into it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from evals_pipeline.core.cassettes.cache import CachingExtractor
from evals_pipeline.core.cassettes.replay import ReplayingExtractor
from evals_pipeline.core.errors import CassetteMiss
from evals_pipeline.core.extractors.oracle import OracleExtractor
from evals_pipeline.core.models import (
    ClassifyOutcome,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
)
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline.core.runner import run_sync

EPISODE = Episode(name="c1", body="Ada Lovelace was born in London.")
GRAPH = ExtractionResult(
    entities=(Entity(name="Ada Lovelace"), Entity(name="London")),
    edges=(Edge(source="Ada Lovelace", target="London", relation="BORN_IN"),),
)


class _CountedOracle(OracleExtractor):
    """The oracle's answers, from a backend that says it is not local (as a live one)."""

    local = False

    def __init__(self) -> None:
        super().__init__({EPISODE.name: GRAPH})
        self.extract_calls = 0

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        self.extract_calls += 1
        return await super().extract(episode, options)


def _extract(extractor: CachingExtractor) -> ExtractionResult:
    return run_sync(lambda: extractor.extract(EPISODE, ExtractOptions())).result


def test_a_calling_backend_is_served_from_the_cache_on_a_rerun(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    inner = _CountedOracle()
    first = CachingExtractor(inner, path)
    assert _extract(first) == GRAPH
    assert (first.calls, first.hits, first.replayed, inner.extract_calls) == (1, 0, 0, 1)
    again = CachingExtractor(inner, path)
    assert _extract(again) == GRAPH
    assert (again.calls, again.hits, inner.extract_calls) == (0, 1, 1)


def test_a_local_backend_is_passed_through_and_never_cached(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    for _ in range(2):
        cached = CachingExtractor(OracleExtractor({EPISODE.name: GRAPH}), path)
        assert _extract(cached) == GRAPH
        assert (cached.calls, cached.hits, cached.replayed) == (0, 0, 1)
        assert cached.path is None
    assert not path.exists()


def test_fifo_serves_each_cached_answer_once_then_calls_again(tmp_path: Path) -> None:
    """The bench's recast cases repeat a call on purpose: on a re-run each repeat is served
    its own cached answer once, in order; one more repeat than cached reaches the backend."""
    path = tmp_path / "cache.jsonl"
    inner = _CountedOracle()
    first = CachingExtractor(inner, path, fifo=True)
    _extract(first), _extract(first)
    assert (first.calls, first.hits) == (2, 0)
    again = CachingExtractor(inner, path, fifo=True)
    _extract(again), _extract(again), _extract(again)
    assert (again.calls, again.hits, inner.extract_calls) == (1, 2, 3)


class _CountedClassifier(_CountedOracle):
    def __init__(self) -> None:
        super().__init__()
        self.classify_calls = 0

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        self.classify_calls += 1
        return await super().classify_entities(entities, types)

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        self.classify_calls += 1
        return await super().classify_relations(edges, types)


def test_classify_calls_are_cached_too(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    inner = _CountedClassifier()
    types = ["Person", "Place"]

    def both(extractor: CachingExtractor) -> tuple[ClassifyOutcome, ClassifyOutcome]:
        return (
            run_sync(lambda: extractor.classify_entities(GRAPH.entities, types)),
            run_sync(lambda: extractor.classify_relations(GRAPH.edges, ["BORN_IN"])),
        )

    first = both(CachingExtractor(inner, path))
    again_extractor = CachingExtractor(inner, path)
    assert both(again_extractor) == first
    assert (again_extractor.calls, again_extractor.hits, inner.classify_calls) == (0, 2, 2)


def test_a_cassette_miss_is_counted_as_a_miss_not_a_replay(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    cached = CachingExtractor(ReplayingExtractor.from_path(empty, unique=True), None)
    with pytest.raises(CassetteMiss):
        _extract(cached)
    assert (cached.calls, cached.hits, cached.replayed, cached.misses) == (0, 0, 0, 1)


def test_a_call_stopped_mid_flight_is_counted_as_interrupted(tmp_path: Path) -> None:
    """A live call cancelled before its answer (asyncio.run cancels every task on Ctrl-C or
    SIGTERM) had sent requests its own tally took with it: it is counted apart, so the summary
    can say its requests are missing rather than report fewer than were sent."""
    import asyncio

    started = asyncio.Event()

    class _Hanging(_CountedOracle):
        async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
            started.set()
            await asyncio.sleep(60)
            raise AssertionError("not cancelled")

    extractor = CachingExtractor(_Hanging(), tmp_path / "cache.jsonl")

    async def stop_mid_call() -> None:
        call = asyncio.ensure_future(extractor.extract(EPISODE, ExtractOptions()))
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    run_sync(stop_mid_call)
    assert (extractor.calls, extractor.requests, extractor.interrupted) == (1, 0, 1)
