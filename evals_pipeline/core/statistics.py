"""Small descriptive statistics for reports."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def percentiles(
    values: Sequence[float], qs: Sequence[float] = (50, 90, 99)
) -> dict[str, float | None]:
    """`{"p50": ..., "p90": ..., "p99": ...}` by numpy's linear interpolation; None when empty."""
    keys = [f"p{q:g}" for q in qs]
    if len(values) == 0:
        return dict.fromkeys(keys)
    computed = np.percentile(np.asarray(values, dtype=float), list(qs), method="linear")
    return {key: float(v) for key, v in zip(keys, computed, strict=True)}


def most_frequent(counts: Counter[T]) -> T | None:
    """The most frequent value, ties broken by the smallest value (so a report is the same
    whatever order the values came in); None when there is none."""
    if not counts:
        return None
    return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]
