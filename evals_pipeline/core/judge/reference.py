"""Reference mode: judged P/R/F1 of a candidate against the reference backend, per axis.

The judge pairs candidate items with reference items that say the same thing; pairs are made
one-to-one here, whatever the judge returned. Like strict scores, this is agreement with another
model, not ground truth; it forgives wording, so a backend judged against itself lands near 1.0
while its strict score is lower (the noise floor).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict

from ..errors import CassetteWriteError, EvalsError
from ..models import ExtractionResult
from ..runner import gather_all
from ..scoring.strict import PRF
from .client import JudgeClient
from .prompts import AXES, axis_items, render_reference


def _no_bool(value: object) -> object:
    if isinstance(value, bool):  # lax parsing reads JSON's true as 1
        raise ValueError("an item number, not true or false")
    return value


# An item's number as the judge writes it ("2" too), but not a boolean.
ItemNumber = Annotated[int, BeforeValidator(_no_bool)]


class MatchesVerdict(BaseModel):
    """A reference-mode verdict: (candidate item, reference item) pairs that say the same."""

    model_config = ConfigDict(extra="ignore")
    matches: list[tuple[ItemNumber, ItemNumber]]


@dataclass(frozen=True)
class Verdict:
    """`asked`: the judge gave these counts (a call, or its cache); False where they follow
    without one (a chunk the candidate failed, an axis one side has no items on)."""

    chunk: str
    axis: str
    tp: int
    fp: int
    fn: int
    error: str | None = None
    asked: bool = False


def matches_to_counts(matches: list[tuple[int, int]], n_candidate: int, n_reference: int) -> PRF:
    """One-to-one, in-range pairs only: a judge that pairs one item twice gains nothing. Where
    the judge's pairs share an item, the most pairs that do not (a maximum matching): taking
    them first come had made the count depend on the order the judge listed them in."""
    pairs = {(c, r) for c, r in matches if 1 <= c <= n_candidate and 1 <= r <= n_reference}
    if len({c for c, _ in pairs}) == len(pairs) == len({r for _, r in pairs}):
        tp = len(pairs)  # no item twice: every pair stands
    else:
        import numpy as np
        from scipy.optimize import linear_sum_assignment  # on first use, as in claims scoring

        said = np.zeros((n_candidate, n_reference))
        for c, r in pairs:
            said[c - 1, r - 1] = 1.0
        rows, cols = linear_sum_assignment(said, maximize=True)
        tp = int(said[rows, cols].sum())
    return PRF(tp=tp, fp=n_candidate - tp, fn=n_reference - tp)


async def judge_chunk_axis(
    client: JudgeClient,
    chunk: str,
    body: str,
    axis: str,
    candidate: ExtractionResult,
    reference: ExtractionResult,
) -> Verdict:
    n_c, n_r = len(axis_items(candidate, axis)), len(axis_items(reference, axis))
    if n_c == 0 or n_r == 0:
        # Nothing can match: every candidate item is a false positive and every reference item
        # a false negative, whatever a judge would say, so no judge is paid to say it.
        return Verdict(chunk, axis, 0, n_c, n_r)
    name, system, user = render_reference(body, axis, candidate, reference)
    try:
        parsed = await client.judge(name, system, user, MatchesVerdict)
    except CassetteWriteError:  # the cache's, not this verdict's: the step fails (see client)
        raise
    except EvalsError as exc:
        return Verdict(chunk, axis, 0, 0, 0, error=str(exc))  # not scored, counted
    counts = matches_to_counts(parsed.matches, n_c, n_r)
    return Verdict(chunk, axis, counts.tp, counts.fp, counts.fn, asked=True)


async def judge_against_reference(
    client: JudgeClient,
    bodies: Mapping[str, str],
    candidate: Mapping[str, ExtractionResult | None],
    reference: Mapping[str, ExtractionResult | None],
) -> list[Verdict]:
    """Verdicts for every chunk the reference extracted, on every axis (chunk order, then axis).

    Where the candidate failed the chunk, every reference item is a false negative, with no
    judge call: as in strict scoring, a failure counts against the backend, never for it."""
    tasks = [
        judge_chunk_axis(client, chunk, bodies[chunk], axis, cand, ref)
        if (cand := candidate.get(chunk)) is not None
        else _failed(chunk, axis, ref)
        for chunk, ref in reference.items()
        if ref is not None
        for axis in AXES
    ]
    return await gather_all(tasks)


async def _failed(chunk: str, axis: str, reference: ExtractionResult) -> Verdict:
    return Verdict(chunk, axis, 0, 0, len(axis_items(reference, axis)))


def judged_scores(verdicts: list[Verdict]) -> dict[str, dict[str, float | int | None]]:
    """Pooled judged P/R/F1 per axis over the chunks judged; a judge error is left out of the
    pool and counted apart. With no chunk judged on an axis, or with judge errors and no
    verdict the judge gave (only failed chunks and empty sides, which need no call), the scores
    are None, not a 0.0 or the 1.0 of agreeing on nothing: no judge measured anything. (With no
    error, those verdicts alone stand, as in strict scoring: a failed chunk counts against.)"""
    out: dict[str, dict[str, float | int | None]] = {}
    for axis in AXES:
        total = PRF()
        judged = errors = asked = 0
        for v in verdicts:
            if v.axis != axis:
                continue
            if v.error:
                errors += 1
                continue
            judged += 1
            asked += v.asked
            total = total + PRF(tp=v.tp, fp=v.fp, fn=v.fn)
        scores: dict[str, float | int | None] = {**total.to_dict()}
        if judged == 0 or (errors and not asked):
            scores.update(precision=None, recall=None, f1=None)
        out[axis] = {**scores, "chunks_judged": judged, "judge_errors": errors}
    return out


def verdicts_from_rows(rows: list[dict[str, object]]) -> list[Verdict]:
    """Verdicts read back from a stored table (NaN/None errors become None)."""
    out = []
    for row in rows:
        error = row.get("error")
        out.append(
            Verdict(
                chunk=str(row["chunk"]),
                axis=str(row["axis"]),
                tp=int(row["tp"]),  # type: ignore[call-overload]
                fp=int(row["fp"]),  # type: ignore[call-overload]
                fn=int(row["fn"]),  # type: ignore[call-overload]
                error=error if isinstance(error, str) else None,
                # A table from before the column: taken as asked, as it was scored then.
                asked=bool(row.get("asked", True)),
            )
        )
    return out
