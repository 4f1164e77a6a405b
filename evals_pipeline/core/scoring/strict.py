"""Strict-string comparison of a candidate backend's extractions against a reference backend's.

This is *reference mode*: the reference is another backend's output (another model's, or the
oracle's hand-written labels), not ground truth in general. A high score means the candidate
extracted the same strings as the reference backend did; against a model it says nothing about
whether either of them is correct. A candidate that finds a real entity the reference
missed is penalised here (a false positive), exactly as one that hallucinates.

Items are compared as normalised strings (casefolded, whitespace collapsed), with multiset
semantics: an item the reference lists twice must be extracted twice to earn two true positives,
and matches are one-to-one (a Counter intersection), so duplicates cannot be double-counted.

- entities: by normalised name;
- types: by (name, type), each normalised: the entity axis with its type required to match, so
  a prompt or ontology-mode change that breaks typing shows here while names stay the same;
- edges: by (source, relation, target), each normalised; direction matters, so a reversed edge
  is one false positive and one false negative;
- summaries: by (entity name, summary), each normalised. Entities with an empty summary carry no
  summary to compare and are left out of this axis (they still count on the entity axis).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..gc_tuning import gc_paused
from ..memo import IdentityMemo, on_forget
from ..models import ExtractionResult
from ..tables import table_graph_json

AXES: tuple[str, ...] = ("entities", "types", "edges", "summaries")


@functools.lru_cache(maxsize=1 << 18)
def normalize(s: str) -> str:
    """Casefold, collapse runs of whitespace to one space, and strip.

    Remembered: every backend in every mode names the same entities and relations, so most
    strings scored are ones already normalised. A run has ~15 distinct strings a chunk (names,
    summaries, edge ends): room for ~17,000 chunks, past which a miss also evicts (a hit costs
    a tenth of a miss that evicts). Full, it holds ~90 MB of ~90-character strings until
    `memo.forget_all()`; Dagster's multiprocess runs drop it with each step's process."""
    return " ".join(s.casefold().split())


on_forget(normalize.cache_clear)


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


@dataclass(frozen=True)
class PRF:
    """True positives, false positives and false negatives on one axis, with derived scores.

    When there is nothing on either side (tp = fp = fn = 0) precision, recall and F1 are all 1.0:
    both backends agree that the chunk holds nothing of this kind, and agreeing on "nothing" is
    agreement. Scoring it 0.0 would punish a candidate for matching the reference exactly, and
    pooling never depends on it (pooled counts are summed first, then scored).
    """

    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def _empty(self) -> bool:
        return self.tp == 0 and self.fp == 0 and self.fn == 0

    @property
    def precision(self) -> float:
        return 1.0 if self._empty else _ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        return 1.0 if self._empty else _ratio(self.tp, self.tp + self.fn)

    @property
    def f1(self) -> float:
        if self._empty:
            return 1.0
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __add__(self, other: PRF) -> PRF:
        if not isinstance(other, PRF):
            return NotImplemented
        return PRF(self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)

    def to_dict(self) -> dict[str, float | int | None]:
        """The counts and scores; a precision with nothing produced, or a recall with nothing
        expected, is None (undefined, shown —), where it had read as a measured 0.0."""
        return {
            "precision": None if self.tp + self.fp == 0 and self.fn else self.precision,
            "recall": None if self.tp + self.fn == 0 and self.fp else self.recall,
            "f1": self.f1,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
        }


ChunkKeys = dict[str, Counter[Hashable]]
"""One chunk's normalised items per axis: all that scoring compares."""

# A reference backend's chunks are compared with every candidate's: their keys are derived once.
_KEYS: IdentityMemo[ChunkKeys] = IdentityMemo(200_000)


def _keys(
    entities: Iterable[tuple[str, str | None, str]], edges: Iterable[tuple[str, str, str]]
) -> ChunkKeys:
    """Keys from (name, type, summary) triples and (source, relation, target) triples."""
    names: list[str] = []
    typed: list[tuple[str, str]] = []
    summaries: list[tuple[str, str]] = []
    for raw_name, raw_type, raw_summary in entities:
        name = normalize(raw_name)
        names.append(name)
        typed.append((name, normalize(raw_type or "")))
        if summary := normalize(raw_summary):
            summaries.append((name, summary))
    triples = [(normalize(s), normalize(r), normalize(t)) for s, r, t in edges]
    return {
        "entities": Counter(names),
        "types": Counter(typed),
        "edges": Counter(triples),
        "summaries": Counter(summaries),
    }


def chunk_keys(result: ExtractionResult) -> ChunkKeys:
    """The keys of one parsed graph."""
    return _keys(
        ((e.name, e.type, e.summary) for e in result.entities),
        ((e.source, e.relation, e.target) for e in result.edges),
    )


def _remembered_keys(result: ExtractionResult) -> ChunkKeys:
    hit = _KEYS.get(result)
    return hit if hit is not None else _KEYS.put((result,), chunk_keys(result))


@gc_paused()
def table_keys(table: pd.DataFrame) -> dict[str, ChunkKeys | None]:
    """chunk -> keys of an extraction table, read from its JSON columns without building
    models (the JSON is the models' own dump); None where the chunk's extraction failed.
    Row by row, with the collector paused: each row's parsed JSON is freed as soon as it is
    keyed, and the Counters and tuples kept form no cycles."""
    return {
        chunk: None
        if graph is None
        else _keys(
            ((e["name"], e.get("type"), e["summary"]) for e in graph[0]),
            ((e["source"], e["relation"], e["target"]) for e in graph[1]),
        )
        for chunk, graph in table_graph_json(table)
    }


def _counts(candidate: Counter[Hashable], reference: Counter[Hashable]) -> tuple[int, int, int]:
    """(tp, fp, fn): tp is the size of the multiset intersection, counted without building it."""
    tp = sum(min(n, reference[k]) for k, n in candidate.items() if k in reference)
    return tp, candidate.total() - tp, reference.total() - tp


def _prf(candidate: Counter[Hashable], reference: Counter[Hashable]) -> PRF:
    return PRF(*_counts(candidate, reference))


_NOTHING: ChunkKeys = {axis: Counter() for axis in AXES}


def _compare_keys(candidate: ChunkKeys | None, reference: ChunkKeys) -> dict[str, PRF]:
    cand = _NOTHING if candidate is None else candidate
    return {axis: _prf(cand[axis], reference[axis]) for axis in AXES}


def compare(candidate: ExtractionResult | None, reference: ExtractionResult) -> dict[str, PRF]:
    """PRF per axis for one chunk. A None candidate (a failed chunk) misses every reference item."""
    return _compare_keys(
        None if candidate is None else chunk_keys(candidate), _remembered_keys(reference)
    )


@dataclass(frozen=True)
class StrictScores:
    """Micro-averaged (pooled) scores over every chunk the reference extracted successfully."""

    entities: PRF
    types: PRF
    edges: PRF
    summaries: PRF
    chunks_compared: int
    skipped_chunks: int

    def to_dict(self) -> dict[str, Any]:
        """With no chunk compared (the reference failed on every one, or there were none), the
        scores are None, not the 1.0 of agreeing on nothing: nothing was measured."""
        axes: dict[str, dict[str, Any]] = {axis: getattr(self, axis).to_dict() for axis in AXES}
        if self.chunks_compared == 0:
            for scores in axes.values():
                scores.update(precision=None, recall=None, f1=None)
        return {
            **axes,
            "chunks_compared": self.chunks_compared,
            "skipped_chunks": self.skipped_chunks,
        }


@gc_paused()
def score_against_reference(
    candidate: Mapping[str, ExtractionResult | None],
    reference: Mapping[str, ExtractionResult | None],
) -> StrictScores:
    """Pool per-chunk counts over the reference's chunks (see `score_keys`)."""
    return score_keys(
        {chunk: None if r is None else chunk_keys(r) for chunk, r in candidate.items()},
        {chunk: None if r is None else _remembered_keys(r) for chunk, r in reference.items()},
    )


ChunkCounts = dict[str, tuple[int, int, int]]
"""One chunk's (tp, fp, fn) per axis."""


@gc_paused()
def chunk_counts(
    candidate: Mapping[str, ChunkKeys | None], reference: Mapping[str, ChunkKeys | None]
) -> dict[str, ChunkCounts]:
    """chunk -> its (tp, fp, fn) per axis, for every chunk the reference extracted (a chunk
    missing from `candidate` is a failed one: all FN), kept chunk by chunk so that two runs can
    be paired on them; `pool_counts` sums them."""
    out: dict[str, ChunkCounts] = {}
    for chunk in sorted(reference):
        ref = reference[chunk]
        if ref is None:
            continue
        cand = candidate.get(chunk)
        cand = _NOTHING if cand is None else cand
        out[chunk] = {axis: _counts(cand[axis], ref[axis]) for axis in AXES}
    return out


def pool_counts(counts: Mapping[str, ChunkCounts], skipped: int) -> StrictScores:
    """Scores pooled from `chunk_counts`'s counts (`skipped`: the reference's failed chunks).
    `score_keys` takes both steps; `reports.episodes` keeps the counts between them."""
    totals = {axis: [0, 0, 0] for axis in AXES}  # tp, fp, fn: summed as ints, one PRF each
    for chunk_axes in counts.values():
        for axis in AXES:
            tp, fp, fn = chunk_axes[axis]
            total = totals[axis]
            total[0] += tp
            total[1] += fp
            total[2] += fn
    return StrictScores(
        **{axis: PRF(*totals[axis]) for axis in AXES},
        chunks_compared=len(counts),
        skipped_chunks=skipped,
    )


def score_keys(
    candidate: Mapping[str, ChunkKeys | None], reference: Mapping[str, ChunkKeys | None]
) -> StrictScores:
    """Pool per-chunk counts over the reference's chunks, given each chunk's keys.

    A chunk missing from `candidate` counts as a failed candidate chunk (all FN). A chunk the
    reference failed on has nothing to compare against: it is skipped and counted in
    `skipped_chunks`. Chunks only the candidate has are outside the reference's scope and ignored.
    """
    skipped = sum(1 for keys in reference.values() if keys is None)
    return pool_counts(chunk_counts(candidate, reference), skipped)
