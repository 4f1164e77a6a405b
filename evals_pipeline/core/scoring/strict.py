"""Strict-string comparison of a candidate backend's extractions against a reference backend's.

This is *reference mode*: the reference is another model's output, not ground truth. A high score
means the candidate extracted the same strings as the reference backend did; it says nothing
about whether either of them is correct. A candidate that finds a real entity the reference
missed is penalised here (a false positive), exactly as one that hallucinates.

Items are compared as normalised strings (casefolded, whitespace collapsed), with multiset
semantics: an item the reference lists twice must be extracted twice to earn two true positives,
and matches are one-to-one (a Counter intersection), so duplicates cannot be double-counted.

- entities: by normalised name;
- edges: by (source, relation, target), each normalised; direction matters, so a reversed edge
  is one false positive and one false negative;
- summaries: by (entity name, summary), each normalised. Entities with an empty summary carry no
  summary to compare and are left out of this axis (they still count on the entity axis).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ..gc_tuning import gc_paused
from ..memo import IdentityMemo
from ..models import ExtractionResult

AXES: tuple[str, ...] = ("entities", "edges", "summaries")


def normalize(s: str) -> str:
    """Casefold, collapse runs of whitespace to one space, and strip."""
    return " ".join(s.casefold().split())


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

    def to_dict(self) -> dict[str, float | int]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
        }


_ChunkKeys = dict[str, Counter[Hashable]]

# A reference backend's chunks are compared with every candidate's: their keys are derived once.
_KEYS: IdentityMemo[_ChunkKeys] = IdentityMemo(200_000)


def _chunk_keys(result: ExtractionResult, *, remember: bool = False) -> _ChunkKeys:
    """The normalised items of one chunk, per axis (each name normalised once); `remember`
    for a reference chunk, which every candidate is compared with."""
    hit = _KEYS.get(result) if remember else None
    if hit is not None:
        return hit
    names: list[str] = []
    summaries: list[tuple[str, str]] = []
    for entity in result.entities:
        name = normalize(entity.name)
        names.append(name)
        if summary := normalize(entity.summary):
            summaries.append((name, summary))
    edges = [
        (normalize(e.source), normalize(e.relation), normalize(e.target)) for e in result.edges
    ]
    keys: _ChunkKeys = {
        "entities": Counter(names),
        "edges": Counter(edges),
        "summaries": Counter(summaries),
    }
    return _KEYS.put((result,), keys) if remember else keys


def _prf(candidate: Counter[Hashable], reference: Counter[Hashable]) -> PRF:
    # The size of the multiset intersection, without building it.
    tp = sum(min(n, reference[k]) for k, n in candidate.items() if k in reference)
    return PRF(tp=tp, fp=candidate.total() - tp, fn=reference.total() - tp)


_NOTHING: _ChunkKeys = {axis: Counter() for axis in AXES}


def compare(candidate: ExtractionResult | None, reference: ExtractionResult) -> dict[str, PRF]:
    """PRF per axis for one chunk. A None candidate (a failed chunk) misses every reference item."""
    cand = _NOTHING if candidate is None else _chunk_keys(candidate)
    ref = _chunk_keys(reference, remember=True)
    return {axis: _prf(cand[axis], ref[axis]) for axis in AXES}


@dataclass(frozen=True)
class StrictScores:
    """Micro-averaged (pooled) scores over every chunk the reference extracted successfully."""

    entities: PRF
    edges: PRF
    summaries: PRF
    chunks_compared: int
    skipped_chunks: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "entities": self.entities.to_dict(),
            "edges": self.edges.to_dict(),
            "summaries": self.summaries.to_dict(),
            "chunks_compared": self.chunks_compared,
            "skipped_chunks": self.skipped_chunks,
        }


@gc_paused()
def score_against_reference(
    candidate: Mapping[str, ExtractionResult | None],
    reference: Mapping[str, ExtractionResult | None],
) -> StrictScores:
    """Pool per-chunk counts over the reference's chunks.

    A chunk missing from `candidate` counts as a failed candidate chunk (all FN). A chunk the
    reference failed on has nothing to compare against: it is skipped and counted in
    `skipped_chunks`. Chunks only the candidate has are outside the reference's scope and ignored.
    """
    totals = {axis: PRF() for axis in AXES}
    compared = skipped = 0
    for chunk in sorted(reference):
        ref = reference[chunk]
        if ref is None:
            skipped += 1
            continue
        compared += 1
        for axis, prf in compare(candidate.get(chunk), ref).items():
            totals[axis] = totals[axis] + prf
    return StrictScores(
        entities=totals["entities"],
        edges=totals["edges"],
        summaries=totals["summaries"],
        chunks_compared=compared,
        skipped_chunks=skipped,
    )
