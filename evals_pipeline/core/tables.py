"""Extraction runs as a table: one row per chunk, the shape stored as Parquet and scored.

Graphs are JSON strings in the table so it stays flat (Parquet- and pandas-friendly) while
round-tripping exactly to the pydantic models.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd
from pydantic import TypeAdapter

from .corpus import Chunk
from .gc_tuning import gc_paused
from .models import EDGE_LIST, ENTITY_LIST, Episode, ExtractionResult
from .runner import ChunkRun

COLUMNS = (
    "chunk",
    "ok",
    "error",
    "error_type",
    "failure_classification",
    "entities",
    "edges",
    "requests",
    "input_tokens",
    "output_tokens",
    "latency_ms",
    "clean",
    "recovered",
    "malformed",
    "retry_succeeded",
    "exhausted",
    "edge_budget_exhausted",
    "provider",
    "model",
)


@gc_paused()
def runs_to_table(runs: Sequence[ChunkRun]) -> pd.DataFrame:
    rows = []
    for run in runs:
        stats = run.outcome.stats if run.outcome is not None else run.stats
        result = run.outcome.result if run.outcome is not None else None
        rows.append(
            {
                "chunk": run.episode.name,
                "ok": run.ok,
                "error": run.error,
                "error_type": run.error_type,
                "failure_classification": (
                    run.failure.classification if run.failure is not None else None
                ),
                "entities": (
                    json.dumps(ENTITY_LIST.dump_python(result.entities, mode="json"))
                    if result is not None
                    else None
                ),
                "edges": (
                    json.dumps(EDGE_LIST.dump_python(result.edges, mode="json"))
                    if result is not None
                    else None
                ),
                "requests": stats.requests if stats else 0,
                "input_tokens": stats.input_tokens if stats else 0,
                "output_tokens": stats.output_tokens if stats else 0,
                "latency_ms": stats.latency_ms if stats else 0.0,
                "clean": stats.structured_output.clean if stats else 0,
                "recovered": stats.structured_output.recovered if stats else 0,
                "malformed": stats.structured_output.malformed if stats else 0,
                "retry_succeeded": stats.truncated.retry_succeeded if stats else 0,
                "exhausted": stats.truncated.exhausted if stats else 0,
                "edge_budget_exhausted": bool(run.outcome is not None and run.outcome.failures),
                "provider": run.outcome.provider if run.outcome is not None else None,
                "model": run.outcome.model if run.outcome is not None else None,
            }
        )
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    return frame.astype(
        {
            "ok": bool,
            "edge_budget_exhausted": bool,
            "requests": "int64",
            "input_tokens": "int64",
            "output_tokens": "int64",
            "latency_ms": "float64",
            "clean": "int64",
            "recovered": "int64",
            "malformed": "int64",
            "retry_succeeded": "int64",
            "exhausted": "int64",
        }
    )


def row_result(entities: str | None, edges: str | None) -> ExtractionResult | None:
    if entities is None or edges is None or pd.isna(entities):
        return None
    return ExtractionResult(
        entities=ENTITY_LIST.validate_json(entities), edges=EDGE_LIST.validate_json(edges)
    )


@gc_paused()
def table_results(table: pd.DataFrame) -> dict[str, ExtractionResult | None]:
    """chunk -> parsed graph, or None where that chunk's extraction failed."""
    return {
        str(chunk): row_result(ents, edges)
        for chunk, ents, edges in zip(
            table["chunk"], table["entities"], table["edges"], strict=True
        )
    }


def episodes_table(chunks: Sequence[Chunk]) -> pd.DataFrame:
    """Chunks as a flat table (episode fields plus the expected graph as JSON, if any)."""
    return pd.DataFrame(
        [
            {
                **chunk.episode.model_dump(mode="json"),
                "expected": (
                    chunk.expected.model_dump_json() if chunk.expected is not None else None
                ),
            }
            for chunk in chunks
        ],
        columns=[*Episode.model_fields, "expected"],
    )


def _cell(value: object) -> object:
    """Parquet hands lists back as arrays and missing scalars as NaN/None."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, list | tuple):
        return list(value)
    return None if pd.isna(value) else value


_EPISODES = TypeAdapter(list[Episode])


def table_episodes(table: pd.DataFrame) -> list[Episode]:
    # Column by column (`tolist` boxes values as `to_dict` does), then one validation call.
    fields = list(Episode.model_fields)
    columns = [[_cell(v) for v in table[name].tolist()] for name in fields]
    return _EPISODES.validate_python(
        [dict(zip(fields, row, strict=True)) for row in zip(*columns, strict=True)]
    )
