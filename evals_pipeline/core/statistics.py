"""Small descriptive statistics for reports."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentiles(
    values: Sequence[float], qs: Sequence[float] = (50, 90, 99)
) -> dict[str, float | None]:
    """`{"p50": ..., "p90": ..., "p99": ...}` by numpy's linear interpolation; None when empty."""
    keys = [f"p{q:g}" for q in qs]
    if len(values) == 0:
        return dict.fromkeys(keys)
    computed = np.percentile(np.asarray(values, dtype=float), list(qs), method="linear")
    return {key: float(v) for key, v in zip(keys, computed, strict=True)}
