"""Blind pairwise judging: for every unordered pair of backends, which extraction is better?

Every chunk is judged in both slot orders. Which order goes first comes from a hash of the chunk
key and the two backend names — never the clock or an RNG — so a re-run reproduces the result
exactly. Agreeing verdicts are a win for the agreed side (or an agreed tie); disagreeing verdicts
are a tie plus an order inconsistency: a judge that flips when the operands swap is reporting
position bias, and that must show as a number rather than be averaged away. Chunks present on
only one side, or that either backend failed to extract, are skipped (counted in
`chunks_skipped`), never counted as a loss: a failure's cost shows in the error rate and in
reference mode, where a failed chunk misses every reference item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import CassetteWriteError, EvalsError
from ..models import ExtractionResult
from ..runner import gather_all
from .client import JudgeClient
from .prompts import AXES, render_pairwise

CALIBRATION_BAND_LOW = 0.45
CALIBRATION_BAND_HIGH = 0.55
ORDER_INCONSISTENCY_UNTRUSTED_THRESHOLD = 0.20

Slot = Literal["A", "B", "tie"]


class WinnerVerdict(BaseModel):
    """A pairwise verdict: which slot's extraction is better, or a tie."""

    model_config = ConfigDict(extra="ignore")
    winner: Literal["A", "B", "tie"]


def first_in_slot_a(chunk: str, left: str, right: str) -> bool:
    """Whether `left` (the alphabetically first of the pair) sits in slot A in the first order."""
    digest = hashlib.sha256(f"{chunk}\0{left}\0{right}".encode()).digest()
    return digest[0] % 2 == 0


def slot_orders(chunk: str, left: str, right: str) -> list[tuple[str, str]]:
    """The two (slot A backend, slot B backend) orders, first order first."""
    if first_in_slot_a(chunk, left, right):
        return [(left, right), (right, left)]
    return [(right, left), (left, right)]


@dataclass
class AxisTally:
    wins: int = 0  # for the pair's first backend (alphabetical)
    losses: int = 0
    ties: int = 0
    order_inconsistent: int = 0
    chunks_compared: int = 0
    chunks_skipped: int = 0
    judge_errors: int = 0
    first_error: str | None = None  # what the first judge error said (a 401, a 529, a reply)

    def to_dict(self) -> dict[str, Any]:
        decided = self.wins + self.losses
        return {
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "win_rate": self.wins / decided if decided else None,
            "order_inconsistency_rate": (
                self.order_inconsistent / self.chunks_compared if self.chunks_compared else None
            ),
            "order_inconsistent": self.order_inconsistent,
            "chunks_compared": self.chunks_compared,
            "chunks_skipped": self.chunks_skipped,
            "judge_errors": self.judge_errors,
            "first_error": self.first_error,
        }


async def _verdict(
    client: JudgeClient, body: str, axis: str, a: ExtractionResult, b: ExtractionResult
) -> tuple[Slot | None, str | None]:
    """(the slot the judge picked, None), or (None, what its error said)."""
    name, system, user = render_pairwise(body, axis, a, b)
    try:
        return (await client.judge(name, system, user, WinnerVerdict)).winner, None
    except CassetteWriteError:  # the cache's, not this verdict's: the step fails (see client)
        raise
    except EvalsError as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _winner(slot: Slot, slot_a: str, slot_b: str) -> str | None:
    return None if slot == "tie" else slot_a if slot == "A" else slot_b


async def judge_pair(
    client: JudgeClient,
    bodies: Mapping[str, str],
    left: str,
    right: str,
    results: Mapping[str, Mapping[str, ExtractionResult | None]],
) -> dict[str, AxisTally]:
    tallies = {axis: AxisTally() for axis in AXES}
    chunks = sorted(set(results[left]) | set(results[right]))
    jobs = []
    for chunk in chunks:
        lr, rr = results[left].get(chunk), results[right].get(chunk)
        if lr is None or rr is None:
            for tally in tallies.values():
                tally.chunks_skipped += 1
            continue
        by_name = {left: lr, right: rr}
        for axis in AXES:
            for slot_a, slot_b in slot_orders(chunk, left, right):
                jobs.append((chunk, axis, slot_a, slot_b, by_name[slot_a], by_name[slot_b]))
    verdicts = await gather_all(
        [_verdict(client, bodies[c], axis, a, b) for c, axis, _sa, _sb, a, b in jobs]
    )
    # Jobs come in (first order, second order) pairs per chunk and axis.
    for i in range(0, len(jobs), 2):
        chunk, axis, a1, b1, _, _ = jobs[i]
        _, _, a2, b2, _, _ = jobs[i + 1]
        (v1, e1), (v2, e2) = verdicts[i], verdicts[i + 1]
        tally = tallies[axis]
        if v1 is None or v2 is None:
            tally.judge_errors += 1
            tally.first_error = tally.first_error or e1 or e2
            continue
        tally.chunks_compared += 1
        w1, w2 = _winner(v1, a1, b1), _winner(v2, a2, b2)
        if w1 != w2:
            tally.ties += 1
            tally.order_inconsistent += 1
        elif w1 is None:
            tally.ties += 1
        elif w1 == left:
            tally.wins += 1
        else:
            tally.losses += 1
    return tallies


async def judge_all_pairs(
    client: JudgeClient,
    bodies: Mapping[str, str],
    results: Mapping[str, Mapping[str, ExtractionResult | None]],
) -> dict[str, Any]:
    """The report's `pairwise` section: every unordered pair, per axis."""
    out: dict[str, Any] = {}
    for left, right in combinations(sorted(results), 2):
        tallies = await judge_pair(client, bodies, left, right, results)
        out[f"{left} vs {right}"] = {
            "backends": [left, right],
            "axes": {axis: t.to_dict() for axis, t in tallies.items()},
        }
    return out


def pairwise_warnings(section: Mapping[str, Any], mode: str | None = None) -> list[str]:
    """Stderr notes: win rates outside the calibration band, and untrusted order consistency
    (each naming the ontology mode, where given: a run prints every mode's)."""
    lines = []
    for pair_name, data in section.items():
        pair = f"{pair_name} ({mode})" if mode else pair_name
        for axis, t in data["axes"].items():
            rate, flips = t["win_rate"], t["order_inconsistency_rate"]
            if rate is not None and not CALIBRATION_BAND_LOW <= rate <= CALIBRATION_BAND_HIGH:
                lines.append(
                    f"note: {pair} {axis}: win rate {rate:.1%} is outside "
                    f"{CALIBRATION_BAND_LOW:.0%}-{CALIBRATION_BAND_HIGH:.0%}; if this pair is "
                    "your calibration control (two recordings of one model), suspect judge "
                    "position bias; for genuine candidates this is the signal you want"
                )
            if flips is not None and flips > ORDER_INCONSISTENCY_UNTRUSTED_THRESHOLD:
                lines.append(
                    f"warning: {pair} {axis}: the judge flipped its verdict when the slots "
                    f"swapped on {flips:.1%} of chunks (over "
                    f"{ORDER_INCONSISTENCY_UNTRUSTED_THRESHOLD:.0%}); the win rate is not "
                    "distinguishable from noise"
                )
    return lines
