"""Paired bootstrap intervals for the difference of two pooled rates.

Why paired: two runs over the same episodes share the episodes' difficulty, so the question is
how much B − A moves when the *corpus* is resampled, with each episode taking its A and its B
along. Resampling the runs independently would add episode-to-episode variance that the
comparison does not have, and make intervals needlessly wide.

A rate is pooled, as every benchmark metric is: sum of numerators over sum of denominators. A
resample in which either run's denominators sum to 0 (e.g. no edge produced in any drawn
episode) has no rate there, and no delta: it is left out of that rate's percentiles. Scored as
0 it had biased the interval, toward "perfect" for a lower-is-better rate and "worst" for the
others, enough to turn a clear "B worse" into "cannot tell apart" on a sparse denominator.

Vectorised: an index matrix of shape (resamples × n) is drawn with
`numpy.random.default_rng(seed)`, and every resample's summed gather `Σ_j x[idx[r, j]]` is
computed at once for all count columns as `multiplicity @ x`, where `multiplicity[r, i]` is how
often episode i was drawn in resample r (one `bincount` per block). This is the same sum, in one
BLAS call instead of a gather per column. Resamples are processed in blocks so that the
temporaries stay near `MEMORY_BUDGET_BYTES`; the block size does not change the draw, so a
result depends on (seed, n, resamples) only. With integer counts every sum is exact, whatever
the summation order. Measured: 10,000 episodes × 10,000 resamples × 20 count columns take about
1.3 s this way and about 10 s as a fancy-index gather summed per resample.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

MEMORY_BUDGET_BYTES = 100 * 1024 * 1024
# Temporaries per (resample, episode) cell: the index, its flat offset, the int64 bincount and
# its float64 copy.
_BYTES_PER_CELL = 32

FloatArray = NDArray[np.float64]


def _column_block(values: ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1-D (episodes) or 2-D (episodes x rates)")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} holds a non-finite count")
    return arr


def _rates(num: FloatArray, den: FloatArray) -> FloatArray:
    """num / den elementwise, 0 where den is 0 (documented: an empty (sub)sample rates 0)."""
    out = np.zeros(np.broadcast_shapes(num.shape, den.shape), dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def pooled_rate(num: Sequence[float] | ArrayLike, den: Sequence[float] | ArrayLike) -> float:
    """sum(num) / sum(den), or 0.0 when the denominators sum to 0."""
    total = float(np.sum(np.asarray(den, dtype=np.float64)))
    return float(np.sum(np.asarray(num, dtype=np.float64))) / total if total else 0.0


def resample_sums(
    columns: FloatArray, *, resamples: int, seed: int, budget_bytes: int = MEMORY_BUDGET_BYTES
) -> FloatArray:
    """(resamples × columns) sums of `columns` (episodes × columns) over bootstrap resamples."""
    n, width = columns.shape
    if n == 0:  # a resample of no episodes is not defined (and sized its blocks by n)
        raise ValueError("no episodes to resample")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, width), dtype=np.float64)
    block = max(1, min(resamples, budget_bytes // (_BYTES_PER_CELL * n)))
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        idx = rng.integers(0, n, size=(rows, n))
        idx += (np.arange(rows, dtype=idx.dtype) * n)[:, None]
        multiplicity = np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n)
        del idx
        out[start : start + rows] = multiplicity.astype(np.float64) @ columns
    return out


def paired_bootstrap_deltas(
    num_a: ArrayLike,
    den_a: ArrayLike,
    num_b: ArrayLike,
    den_b: ArrayLike,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(delta, low, high) per rate, for several rates sharing one set of resamples.

    Inputs are (episodes,) or (episodes × rates) arrays, row i being the same episode in all four.
    Sharing the index matrix makes the rates' intervals consistent with each other and costs one
    draw for all of them. Identical A and B columns give exactly 0 (they are summed once).
    """
    blocks = [
        _column_block(v, name)
        for v, name in ((num_a, "num_a"), (den_a, "den_a"), (num_b, "num_b"), (den_b, "den_b"))
    ]
    shape = blocks[0].shape
    if any(b.shape != shape for b in blocks):
        raise ValueError(f"count arrays differ in shape: {[b.shape for b in blocks]}")
    n, width = shape
    if n == 0:
        raise ValueError("no episodes to resample")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")

    # Sum each distinct column once: identical A/B columns then give bitwise-identical rates.
    stacked = np.concatenate(blocks, axis=1)
    unique, inverse = np.unique(stacked, axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = resample_sums(np.ascontiguousarray(unique), resamples=resamples, seed=seed)
    full = unique.sum(axis=0)

    def split(row: FloatArray) -> tuple[FloatArray, ...]:
        cols = row[..., inverse]
        return tuple(cols[..., k * width : (k + 1) * width] for k in range(4))

    na, da, nb, db = split(full)
    delta = _rates(nb, db) - _rates(na, da)
    rna, rda, rnb, rdb = split(sums)
    deltas = _rates(rnb, rdb) - _rates(rna, rda)
    deltas[(rda == 0) | (rdb == 0)] = np.nan  # no rate in that resample: no delta either
    tail = 100.0 * (1.0 - confidence) / 2.0
    defined = ~np.isnan(deltas).all(axis=0)
    low = np.full(width, np.nan)
    high = np.full(width, np.nan)
    if defined.any():  # NaN where no resample had a rate in both runs
        low[defined], high[defined] = np.nanpercentile(
            deltas[:, defined], [tail, 100.0 - tail], axis=0, method="linear"
        )
    return delta, low, high


def paired_bootstrap_delta(
    num_a: ArrayLike,
    den_a: ArrayLike,
    num_b: ArrayLike,
    den_b: ArrayLike,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """(B − A, low, high) for one pooled rate; an interval spanning 0 cannot tell A from B."""
    for v, name in ((num_a, "num_a"), (den_a, "den_a"), (num_b, "num_b"), (den_b, "den_b")):
        if np.ndim(v) != 1:
            raise ValueError(f"{name} must be 1-D (one count per episode)")
    delta, low, high = paired_bootstrap_deltas(
        num_a, den_a, num_b, den_b, resamples=resamples, seed=seed, confidence=confidence
    )
    return float(delta[0]), float(low[0]), float(high[0])
