"""Extraction runs as a table: every graph round-trips exactly, through Parquet too."""

from __future__ import annotations

import asyncio
import gc
import json
import math
import weakref
from pathlib import Path

import pandas as pd

from evals_pipeline.core.models import (
    CallStats,
    Edge,
    Entity,
    Episode,
    ExtractionOutcome,
    ExtractionResult,
    ParseCounts,
)
from evals_pipeline.core.runner import ChunkRun
from evals_pipeline.core.tables import COLUMNS, runs_to_table, table_graph_json, table_results

ODD = ExtractionResult(
    entities=(
        Entity(
            name="Zoë \u2028 Ångström",
            type=None,
            summary='quotes " and \\ and 😀',
            properties={
                "nan": math.nan,
                "inf": math.inf,
                "neg": -math.inf,
                "big": 10**30,
                "flag": True,
                "ratio": 0.1,
                "text": "1",
            },
        ),
        Entity(name="B", type="Person"),
    ),
    edges=(Edge(source="Zoë \u2028 Ångström", target="B", relation="KNOWS", fact="f"),),
)


def _ok(name: str, result: ExtractionResult) -> ChunkRun:
    stats = CallStats(
        requests=2, input_tokens=7, latency_ms=1.5, structured_output=ParseCounts(clean=2)
    )
    outcome = ExtractionOutcome(result=result, stats=stats, transcript=(), provider="p", model="m")
    return ChunkRun(Episode(name=name, body="text"), outcome)


def _failed(name: str) -> ChunkRun:
    return ChunkRun(Episode(name=name, body="text"), None, "boom", "ExtractionFailed")


def _same(got: ExtractionResult | None, want: ExtractionResult | None) -> bool:
    return repr(got) == repr(want)  # repr: NaN is not equal to itself


def test_graphs_round_trip_exactly_and_failures_are_none(tmp_path: Path) -> None:
    table = runs_to_table([_ok("c1", ODD), _failed("c2"), _ok("c3", ExtractionResult())])
    assert list(table.columns) == list(COLUMNS)
    path = tmp_path / "t.parquet"
    table.to_parquet(path)
    for frame in (table, pd.read_parquet(path)):
        results = table_results(frame)
        assert _same(results["c1"], ODD)
        assert results["c2"] is None
        assert results["c3"] == ExtractionResult()
        graphs = dict(table_graph_json(frame))
        assert graphs["c2"] is None
        assert graphs["c1"] is not None and graphs["c1"][0][0]["name"] == "Zoë \u2028 Ångström"


def test_columns_and_dtypes_do_not_depend_on_the_rows() -> None:
    full = runs_to_table([_ok("c1", ODD), _failed("c2")])
    empty = runs_to_table([])
    assert dict(full.dtypes) == dict(empty.dtypes)
    assert full["requests"].tolist() == [2, 0]  # a failed chunk without stats spent nothing
    assert full["latency_ms"].tolist() == [1.5, 0.0]
    assert full["ok"].tolist() == [True, False]
    assert full["error_type"].tolist() == [None, "ExtractionFailed"]
    assert full["clean"].tolist() == [2, 0]


def test_a_local_extraction_is_tabulated_before_the_collector_runs_again() -> None:
    from evals_pipeline.core.extractors.oracle import OracleExtractor
    from evals_pipeline.core.options import ExtractOptions
    from evals_pipeline.core.runner import extract_all, run_sync
    from evals_pipeline.core.tables import extraction_table

    episodes = [Episode(name=f"c{i}", body="Zoë met B.") for i in range(300)]
    oracle = OracleExtractor({e.name: ODD for e in episodes})
    scanned: list[int] = []  # young objects at the start of each pass

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            scanned.append(len(gc.get_objects(generation=0)))

    gc.collect()
    gc.callbacks.append(note)
    try:
        table = extraction_table(oracle, episodes, ExtractOptions())
    finally:
        gc.callbacks.remove(note)
    # The runs' models (~30 tracked objects a chunk) were freed inside the pause: what a pass
    # finds afterwards is the table and the event loop's leftovers, not 300 outcomes.
    assert scanned and max(scanned) < 3_000
    assert gc.isenabled()
    runs = run_sync(lambda: extract_all(oracle, episodes, ExtractOptions()))
    pd.testing.assert_frame_equal(table, runs_to_table(runs))


def test_episodes_round_trip_through_their_table_and_parquet(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta, timezone

    from evals_pipeline.core.corpus import Chunk
    from evals_pipeline.core.tables import episodes_table, table_episodes

    episodes = [
        Episode(name="plain", body="Ada met Babbage."),
        Episode(
            name="full",
            body="Zoë \u2028 said 😀",
            group_id="g",
            reference_time=datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
            source_type="message",
            custom_instructions="Only people.",
            context=("earlier", ""),
        ),
        Episode(name="utc", body="b", reference_time=datetime(2021, 5, 6, tzinfo=UTC)),
    ]
    expected = ExtractionResult(entities=(Entity(name="Zoë", type="Person"),))
    chunks = [Chunk(episode=e, expected=expected if e.name == "full" else None) for e in episodes]
    table = episodes_table(chunks)
    assert list(table.columns) == [*Episode.model_fields, "expected"]
    assert ExtractionResult.model_validate_json(table["expected"][1]) == expected
    assert table["expected"][0] is None
    path = tmp_path / "episodes.parquet"
    table.to_parquet(path)
    for frame in (table, pd.read_parquet(path)):
        back = table_episodes(frame)
        assert back == episodes
        assert [e.reference_time and e.reference_time.isoformat() for e in back] == [
            e.reference_time and e.reference_time.isoformat() for e in episodes
        ]
    empty = episodes_table([])
    assert list(empty.columns) == list(table.columns)
    assert all(pd.api.types.is_object_dtype(dtype) for dtype in empty.dtypes)
    assert table_episodes(empty) == []


def test_a_row_with_only_one_of_its_graph_cells_is_corrupt() -> None:
    import pytest

    table = runs_to_table([_ok("c1", ODD)])
    table.loc[0, "edges"] = None
    with pytest.raises(ValueError, match="not both"):
        dict(table_graph_json(table))
    with pytest.raises(ValueError, match="not both"):
        table_results(table)


class _Closing:
    """An oracle that notes whether it was closed and whether the collector ran meanwhile."""

    def __init__(self, inner: object, *, local: bool) -> None:
        self.inner, self.local, self.closed = inner, local, 0
        self.collecting: list[bool] = []
        self.provider = self.model = "closing"

    async def extract(self, episode: Episode, options: object) -> ExtractionOutcome:
        self.collecting.append(gc.isenabled())
        return await self.inner.extract(episode, options)  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        self.closed += 1


def test_extraction_table_closes_its_extractor_and_pauses_only_a_local_one() -> None:
    import pytest

    from evals_pipeline.core.extractors.oracle import OracleExtractor, OracleMissing
    from evals_pipeline.core.options import ExtractOptions
    from evals_pipeline.core.tables import extraction_table

    episodes = [Episode(name=f"c{i}", body="Zoë met B.") for i in range(3)]
    for local in (True, False):
        probe = _Closing(OracleExtractor({e.name: ODD for e in episodes}), local=local)
        table = extraction_table(probe, episodes, ExtractOptions())  # type: ignore[arg-type]
        assert table["ok"].all() and probe.closed == 1
        assert probe.collecting == [not local] * 3
    missing = _Closing(OracleExtractor({}), local=True)
    with pytest.raises(OracleMissing):
        extraction_table(missing, episodes, ExtractOptions())  # type: ignore[arg-type]
    assert missing.closed == 1 and gc.isenabled()


class _Reversed:
    """A network-like extractor whose chunks finish in reverse order; it keeps a weak reference
    to every outcome it returns, and notes how many are still alive when it is asked again."""

    local = False
    provider = model = "reversed"

    def __init__(self, inner: object, count: int) -> None:
        self.inner, self.count = inner, count
        self.outcomes: list[weakref.ref[ExtractionOutcome]] = []
        self.alive: list[int] = []
        self.finished: list[str] = []

    async def extract(self, episode: Episode, options: object) -> ExtractionOutcome:
        index = int(episode.name[1:])
        for _ in range(self.count - index):  # later chunks wait less, so finish first
            await asyncio.sleep(0)
        self.alive.append(sum(1 for ref in self.outcomes if ref() is not None))
        outcome = await self.inner.extract(episode, options)  # type: ignore[attr-defined]
        self.outcomes.append(weakref.ref(outcome))
        self.finished.append(episode.name)
        return outcome

    async def aclose(self) -> None:
        return None


def test_extraction_table_rows_follow_the_chunks_whatever_order_they_finish_in() -> None:
    from evals_pipeline.core.extractors.oracle import OracleExtractor
    from evals_pipeline.core.options import ExtractOptions
    from evals_pipeline.core.runner import extract_all, run_sync
    from evals_pipeline.core.tables import extraction_table

    episodes = [Episode(name=f"c{i}", body="Zoë met B.") for i in range(6)]
    graphs = {
        e.name: ExtractionResult(entities=(Entity(name=f"E{i}"),)) for i, e in enumerate(episodes)
    }
    probe = _Reversed(OracleExtractor(graphs), len(episodes))
    table = extraction_table(probe, episodes, ExtractOptions(), concurrency=6)  # type: ignore[arg-type]
    assert probe.finished == [e.name for e in reversed(episodes)]
    assert list(table["chunk"]) == [e.name for e in episodes]
    assert [json.loads(cell)[0]["name"] for cell in table["entities"]] == [
        f"E{i}" for i in range(6)
    ]
    oracle = OracleExtractor(graphs)
    runs = run_sync(lambda: extract_all(oracle, episodes, ExtractOptions()))
    pd.testing.assert_frame_equal(table, runs_to_table(runs))


def test_extraction_table_frees_each_run_once_it_is_tabulated() -> None:
    from evals_pipeline.core.extractors.oracle import OracleExtractor
    from evals_pipeline.core.options import ExtractOptions
    from evals_pipeline.core.tables import extraction_table

    episodes = [Episode(name=f"c{i}", body="Zoë met B.") for i in range(20)]
    probe = _Reversed(OracleExtractor({e.name: ODD for e in episodes}), 0)
    probe.local = True  # one chunk after another, as a replay runs
    extraction_table(probe, episodes, ExtractOptions())  # type: ignore[arg-type]
    # Each earlier outcome was dumped to its row and freed before the next chunk began.
    assert probe.alive == [0] * 20


def test_a_table_missing_a_run_is_refused() -> None:
    import pytest

    from evals_pipeline.core.tables import TableRows

    rows = TableRows(2)
    rows.put(1, _ok("c2", ODD))
    with pytest.raises(ValueError, match="missing the run"):
        rows.frame()
    for index in (1, 2, -1):  # filled already, past the end, from the end
        with pytest.raises(IndexError, match="out of range or already filled"):
            rows.put(index, _ok("c1", ODD))


def test_same_graphs_counts_chunks_only_where_every_chunk_agrees(tmp_path: Path) -> None:
    from evals_pipeline.core.tables import same_graphs

    one = runs_to_table([_ok("c1", ODD), _failed("c2")])
    path = tmp_path / "t.parquet"
    one.to_parquet(path)
    assert same_graphs(one, pd.read_parquet(path)) == 1  # a failed cell read back as NaN too
    assert same_graphs(one, runs_to_table([_ok("c1", ODD), _ok("c2", ODD)])) is None
    assert same_graphs(one, runs_to_table([_ok("c1", ExtractionResult()), _failed("c2")])) is None
    nothing = runs_to_table([_failed("c1")])
    assert same_graphs(nothing, nothing) is None  # nothing extracted: nothing to say
