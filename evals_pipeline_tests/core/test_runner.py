"""extract_all: the collector policy follows whether the extractor waits on a network."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence
from pathlib import Path

import pytest

from evals_pipeline.core.cassettes.cache import CachingExtractor
from evals_pipeline.core.cassettes.record import RecordingExtractor
from evals_pipeline.core.errors import CassetteMiss
from evals_pipeline.core.extractors.base import Extractor
from evals_pipeline.core.extractors.oracle import OracleExtractor
from evals_pipeline.core.gc_tuning import BULK_THRESHOLDS
from evals_pipeline.core.models import (
    CallStats,
    ClassifyOutcome,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
)
from evals_pipeline.core.options import ExtractOptions
from evals_pipeline.core.runner import extract_all, run_sync


class _Probe(Extractor):
    """Notes the collector's state during each call."""

    provider = model = "probe"

    def __init__(self, *, local: bool) -> None:
        self.local = local
        self.seen: list[tuple[bool, tuple[int, int, int]]] = []

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        self.seen.append((gc.isenabled(), gc.get_threshold()))
        return ExtractionOutcome(
            result=ExtractionResult(), stats=CallStats(), transcript=(), provider="p", model="m"
        )

    async def classify_entities(
        self, entities: Sequence[Entity], types: Sequence[str]
    ) -> ClassifyOutcome:
        raise NotImplementedError

    async def classify_relations(
        self, edges: Sequence[Edge], types: Sequence[str]
    ) -> ClassifyOutcome:
        raise NotImplementedError


EPISODES = [Episode(name=f"c{i}", body="text") for i in range(3)]


@pytest.mark.parametrize("local", [True, False])
def test_a_local_extractor_runs_with_the_collector_paused(local: bool) -> None:
    before = (gc.isenabled(), gc.get_threshold())
    probe = _Probe(local=local)
    runs = run_sync(lambda: extract_all(probe, EPISODES, ExtractOptions()))
    assert all(run.ok for run in runs)
    for enabled, thresholds in probe.seen:
        assert enabled is not local  # paused for a local one; running, less often, otherwise
        if not local:
            assert thresholds[0] >= BULK_THRESHOLDS[0]
    assert (gc.isenabled(), gc.get_threshold()) == before


def test_wrappers_are_as_local_as_what_they_wrap(tmp_path: Path) -> None:
    assert OracleExtractor({}).local
    for local in (True, False):
        inner = _Probe(local=local)
        assert RecordingExtractor(inner, tmp_path / "r.jsonl").local is local
        assert CachingExtractor(inner, tmp_path / "c.jsonl").local is local


class _Overlap(_Probe):
    """Counts how many calls are in flight at once; each yields to the loop once."""

    def __init__(self, *, local: bool) -> None:
        super().__init__(local=local)
        self.in_flight = self.most = 0
        self.order: list[str] = []

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0)
        self.order.append(episode.name)
        self.in_flight -= 1
        return await super().extract(episode, options)


@pytest.mark.parametrize(("local", "most"), [(True, 1), (False, 2)])
def test_a_local_extractor_runs_its_chunks_in_order_one_at_a_time(local: bool, most: int) -> None:
    probe = _Overlap(local=local)
    episodes = [Episode(name=f"c{i}", body="text") for i in range(5)]
    runs = run_sync(lambda: extract_all(probe, episodes, ExtractOptions(), concurrency=2))
    assert [run.episode.name for run in runs] == [e.name for e in episodes]
    assert probe.most == most
    if local:
        assert probe.order == [e.name for e in episodes]


class _Misses(_Probe):
    """A local extractor without a recording for some chunks."""

    def __init__(self, missing: set[str]) -> None:
        super().__init__(local=True)
        self.missing = missing
        self.asked: list[str] = []

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        self.asked.append(episode.name)
        if episode.name in self.missing:
            raise CassetteMiss("k" * 64, "extract")
        return await super().extract(episode, options)


def test_a_local_run_tries_every_chunk_then_raises_the_first_miss() -> None:
    episodes = [Episode(name=f"c{i}", body="text") for i in range(6)]
    probe = _Misses({"c2", "c4"})
    done: list[str] = []
    with pytest.raises(CassetteMiss):
        run_sync(
            lambda: extract_all(
                probe, episodes, ExtractOptions(), on_done=lambda r: done.append(r.episode.name)
            )
        )
    assert probe.asked == [e.name for e in episodes]  # as the concurrent tasks did
    assert done == ["c0", "c1", "c3", "c5"]
    runs = run_sync(lambda: extract_all(probe, episodes, ExtractOptions(), tolerate_misses=True))
    assert [r.error_type for r in runs] == [None, None, "CassetteMiss", None, "CassetteMiss", None]


class _Breaks(_Probe):
    """A network extractor whose third chunk fails with an unexpected error (a full disk, a
    bug) while the first two are still waiting on their replies and two more are queued."""

    def __init__(self) -> None:
        super().__init__(local=False)
        self.started: list[str] = []
        self.finished: list[str] = []
        self.closed_after: list[str] = []

    async def extract(self, episode: Episode, options: ExtractOptions) -> ExtractionOutcome:
        self.started.append(episode.name)
        if episode.name == "c2":
            await asyncio.sleep(0.01)
            raise RuntimeError("a bug in one chunk")
        await asyncio.sleep(0.05)
        self.finished.append(episode.name)
        return await super().extract(episode, options)


def test_a_network_run_finishes_its_calls_in_flight_and_starts_no_more() -> None:
    """The extractor is closed when the run ends: a chunk still in flight then would lose its
    reply (paid for, never recorded) and call a closed client; a chunk not yet started would
    make a call that cannot be recorded either."""
    episodes = [Episode(name=f"c{i}", body="text") for i in range(5)]
    probe = _Breaks()
    done: list[str] = []

    async def run() -> None:
        try:
            await extract_all(
                probe,
                episodes,
                ExtractOptions(),
                concurrency=3,
                on_done=lambda r: done.append(r.episode.name),
            )
        finally:
            probe.closed_after = list(probe.finished)

    with pytest.raises(RuntimeError, match="a bug in one chunk"):
        run_sync(run)
    assert probe.closed_after == ["c0", "c1"] and sorted(done) == ["c0", "c1"]
    assert probe.started == ["c0", "c1", "c2"]  # c3 and c4 never called
