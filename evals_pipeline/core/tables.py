"""Extraction runs as a table: one row per chunk, the shape stored as Parquet and scored.

Graphs are JSON strings in the table so it stays flat (Parquet- and pandas-friendly) while
round-tripping exactly to the pydantic models.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from typing import Any

import pandas as pd
from pydantic import TypeAdapter
from pydantic_core import from_json

from .corpus import Chunk
from .extractors.base import Extractor
from .gc_tuning import gc_paused
from .models import EDGE_LIST, ENTITY_LIST, Episode, ExtractionResult
from .options import ExtractOptions
from .runner import ChunkRun, run_each, run_sync

# A run's call counts, one column each (0 for a chunk that failed before any call).
_STATS_COLUMNS = (
    "requests",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "clean",
    "recovered",
    "malformed",
    "retry_succeeded",
    "exhausted",
)
COLUMNS = (
    "chunk",
    "ok",
    "error",
    "error_type",
    "failure_classification",
    "entities",
    "edges",
    *_STATS_COLUMNS,
    "edge_budget_exhausted",
    "provider",
    "model",
)


class TableRows:
    """An extraction table filled one run at a time, each at its chunk's index (runs can finish
    out of order), column by column: a list per column, not a dict per row."""

    def __init__(self, size: int, source: tuple[str, str] | None = None) -> None:
        self._size = size
        # A failed run's provider and model (the extractor's): its calls' tokens are still
        # priced, where a table of nothing but failures had named no model to price them at.
        self._source = source or (None, None)
        self._columns: dict[str, list[object]] = {name: [None] * size for name in COLUMNS}

    def put(self, index: int, run: ChunkRun) -> None:
        column = self._columns
        if not 0 <= index < self._size or column["chunk"][index] is not None:
            raise IndexError(f"row {index} of {self._size} is out of range or already filled")
        outcome = run.outcome
        stats = outcome.stats if outcome is not None else run.stats
        column["chunk"][index] = run.episode.name
        column["ok"][index] = outcome is not None
        column["error"][index] = run.error
        column["error_type"][index] = run.error_type
        column["failure_classification"][index] = (
            run.failure.classification if run.failure is not None else None
        )
        if outcome is not None:
            column["entities"][index] = ENTITY_LIST.dump_json(outcome.result.entities).decode()
            column["edges"][index] = EDGE_LIST.dump_json(outcome.result.edges).decode()
        if stats is not None:
            column["requests"][index] = stats.requests
            column["input_tokens"][index] = stats.input_tokens
            column["output_tokens"][index] = stats.output_tokens
            column["latency_ms"][index] = stats.latency_ms
            parse = stats.structured_output
            column["clean"][index] = parse.clean
            column["recovered"][index] = parse.recovered
            column["malformed"][index] = parse.malformed
            column["retry_succeeded"][index] = stats.truncated.retry_succeeded
            column["exhausted"][index] = stats.truncated.exhausted
        else:
            for name in _STATS_COLUMNS:
                column[name][index] = 0
        column["edge_budget_exhausted"][index] = bool(outcome is not None and outcome.failures)
        if outcome is not None:
            column["provider"][index], column["model"][index] = outcome.provider, outcome.model
        else:
            column["provider"][index], column["model"][index] = self._source

    @gc_paused()  # the table's cells are strings and numbers: nothing for the collector
    def frame(self) -> pd.DataFrame:
        """The table; every row must have been put."""
        if any(name is None for name in self._columns["chunk"]):
            raise ValueError("an extraction table is missing the run of some chunk")
        return pd.DataFrame(self._columns, columns=list(COLUMNS)).astype(_DTYPES)


@gc_paused()
def runs_to_table(runs: Sequence[ChunkRun]) -> pd.DataFrame:
    """One row per run, in the runs' order."""
    rows = TableRows(len(runs))
    for index, run in enumerate(runs):
        rows.put(index, run)
    return rows.frame()


def extraction_table(
    extractor: Extractor,
    episodes: Sequence[Episode],
    options: ExtractOptions,
    *,
    concurrency: int = 8,
    tolerate_misses: bool = False,
) -> pd.DataFrame:
    """Run `extractor` over `episodes` (`run_each`), tabulating each run as it finishes, then
    close the extractor. A run's models are dumped to its row and freed at once, while they
    are still in the CPU's caches, instead of all living until the end.

    For a local extractor the collector stays paused throughout: the runs' models are freed
    by reference counting inside the pause and leave it nothing to scan.
    """
    # A failed row names the extractor's model only where calls were paid for: a replay's is
    # a placeholder ("cassette"), where its recorded calls name theirs.
    source = None if extractor.local else (extractor.provider, extractor.model)
    rows = TableRows(len(episodes), source=source)

    async def run() -> None:
        try:
            await run_each(
                extractor,
                episodes,
                options,
                concurrency=concurrency,
                tolerate_misses=tolerate_misses,
                on_done=rows.put,
            )
        finally:
            await extractor.aclose()

    with gc_paused() if extractor.local else nullcontext():
        run_sync(run)
    return rows.frame()


_DTYPES = {
    **{name: object for name in COLUMNS},  # an empty table's text columns too
    "ok": bool,
    "edge_budget_exhausted": bool,
    **{name: "int64" for name in _STATS_COLUMNS},
    "latency_ms": "float64",
}


@gc_paused()
def table_results(table: pd.DataFrame) -> dict[str, ExtractionResult | None]:
    """chunk -> parsed graph, or None where that chunk's extraction failed."""
    return {
        chunk: None
        if cells is None
        else ExtractionResult(
            entities=ENTITY_LIST.validate_json(cells[0]), edges=EDGE_LIST.validate_json(cells[1])
        )
        for chunk, cells in _row_cells(table)
    }


Graph = tuple[list[dict[str, Any]], list[dict[str, Any]]]


def table_graph_json(table: pd.DataFrame) -> Iterator[tuple[str, Graph | None]]:
    """(chunk, (entities, edges) as plain JSON data, or None where the extraction failed), row
    by row: for readers that need a few fields of every item (scoring), not the models, and
    not every row's graph at once. The cells are our own serialiser's JSON, read with
    pydantic's parser (a third faster than json.loads here; NaN and Infinity read alike)."""
    for chunk, cells in _row_cells(table):
        yield chunk, None if cells is None else (from_json(cells[0]), from_json(cells[1]))


def same_graphs(a: pd.DataFrame, b: pd.DataFrame) -> int | None:
    """The number of chunks two extraction tables extracted, where they hold exactly the same
    graphs for the same chunks (and fail the same others); else None, and None where neither
    extracted anything. Compared as the JSON cells, which one serialiser writes alike."""
    first, second = dict(_row_cells(a)), dict(_row_cells(b))
    extracted = sum(1 for graph in first.values() if graph is not None)
    return extracted if first == second and extracted else None


def _row_cells(table: pd.DataFrame) -> Iterator[tuple[str, tuple[str, str] | None]]:
    """(chunk, its entities and edges JSON, or None where its extraction failed), row by row."""
    columns = (table["chunk"].tolist(), table["entities"].tolist(), table["edges"].tolist())
    for chunk, entities, edges in zip(*columns, strict=True):
        yield str(chunk), _graph_cells(entities, edges)


def _graph_cells(entities: object, edges: object) -> tuple[str, str] | None:
    """A row's entities and edges JSON, or None where its extraction failed (a missing cell is
    None, or NaN once Parquet and pandas have had it). A row with one of the two is corrupt."""
    if isinstance(entities, str) and isinstance(edges, str):
        return entities, edges
    if isinstance(entities, str) or isinstance(edges, str):
        raise ValueError("an extraction table row has entities or edges JSON, not both")
    return None


_EPISODES = TypeAdapter(list[Episode])


def episodes_table(chunks: Sequence[Chunk]) -> pd.DataFrame:
    """Chunks as a flat table (episode fields plus the expected graph as JSON, if any), built
    column by column from one serialisation call."""
    rows = _EPISODES.dump_python([chunk.episode for chunk in chunks], mode="json")
    columns: dict[str, list[object]] = {
        name: [row[name] for row in rows] for name in Episode.model_fields
    }
    columns["expected"] = [
        chunk.expected.model_dump_json() if chunk.expected is not None else None for chunk in chunks
    ]
    return pd.DataFrame(columns, columns=list(columns), dtype=object)


def _cell(value: object) -> object:
    """Parquet hands lists back as arrays and missing scalars as NaN/None."""
    if type(value) is str:  # most cells: decided before the slower checks below
        return value
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list | tuple):
        return list(value)
    return None if pd.isna(value) else value


def table_episodes(table: pd.DataFrame) -> list[Episode]:
    # Column by column (`tolist` boxes values as `to_dict` does), then one validation call.
    fields = list(Episode.model_fields)
    columns = [[_cell(v) for v in table[name].tolist()] for name in fields]
    return _EPISODES.validate_python(
        [dict(zip(fields, row, strict=True)) for row in zip(*columns, strict=True)]
    )
