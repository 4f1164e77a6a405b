import numpy as np
import pytest

from evals_pipeline.core.statistics_bootstrap import (
    paired_bootstrap_delta,
    paired_bootstrap_deltas,
    pooled_rate,
    resample_sums,
)


def _run(rng: np.random.Generator, dens: np.ndarray, p: float) -> np.ndarray:
    return rng.binomial(dens, p)


def test_a_run_against_itself_gives_exactly_zero() -> None:
    rng = np.random.default_rng(7)
    den = rng.integers(0, 12, size=300)
    num = rng.binomial(den, 0.7)
    assert paired_bootstrap_delta(num, den, num, den) == (0.0, 0.0, 0.0)
    # Fractional counts too: identical columns are summed once.
    frac = rng.random(300)
    assert paired_bootstrap_delta(frac, frac + 1, frac, frac + 1, resamples=500) == (0.0, 0.0, 0.0)


def test_clearly_different_runs_exclude_zero() -> None:
    rng = np.random.default_rng(1)
    den = rng.integers(1, 10, size=200)
    num_a, num_b = _run(rng, den, 0.5), _run(rng, den, 0.9)
    delta, low, high = paired_bootstrap_delta(num_a, den, num_b, den)
    assert delta == pytest.approx(pooled_rate(num_b, den) - pooled_rate(num_a, den))
    assert 0.0 < low < delta < high
    assert 0.3 < delta < 0.5
    # And reversed: the interval flips sign.
    back = paired_bootstrap_delta(num_b, den, num_a, den)
    assert back[0] == pytest.approx(-delta)
    assert back[2] < 0.0


def test_noise_alone_spans_zero() -> None:
    rng = np.random.default_rng(2)
    den = rng.integers(1, 10, size=200)
    _, low, high = paired_bootstrap_delta(_run(rng, den, 0.7), den, _run(rng, den, 0.7), den)
    assert low < 0.0 < high


def test_deterministic_with_a_seed_and_seed_matters() -> None:
    rng = np.random.default_rng(3)
    den = rng.integers(1, 10, size=100)
    num_a, num_b = _run(rng, den, 0.6), _run(rng, den, 0.7)
    first = paired_bootstrap_delta(num_a, den, num_b, den, resamples=2000, seed=11)
    assert first == paired_bootstrap_delta(num_a, den, num_b, den, resamples=2000, seed=11)
    other = paired_bootstrap_delta(num_a, den, num_b, den, resamples=2000, seed=12)
    assert other[0] == first[0]
    assert other[1:] != first[1:]


def test_blocking_over_resamples_does_not_change_the_draw() -> None:
    columns = np.arange(14, dtype=float).reshape(7, 2)
    whole = resample_sums(columns, resamples=50, seed=5)
    blocked = resample_sums(columns, resamples=50, seed=5, budget_bytes=32 * 7 * 3)
    assert np.array_equal(whole, blocked)
    assert whole.shape == (50, 2)
    # Every resample draws n episodes: column 0 sums lie between 7*min and 7*max.
    assert whole[:, 0].min() >= 0 and whole[:, 0].max() <= 7 * 12


def test_a_resample_without_a_rate_in_either_run_is_left_out() -> None:
    """A resample whose denominators sum to 0 in a run had rated 0 there: for a lower-is-better
    rate that read as perfect, dragging the interval across 0 and a clear "B worse" to "cannot
    tell apart". It has no delta, and is left out of the percentiles."""
    assert pooled_rate([0, 0], [0, 0]) == 0.0
    # A never has a denominator: no resample has a rate in both runs, so no interval.
    _, low, high = paired_bootstrap_delta([0, 0, 0], [0, 0, 0], [1, 2, 0], [2, 2, 0])
    assert np.isnan(low) and np.isnan(high)
    # Half the episodes have den 0 in B: where B has a rate, it is 1, as A's: no change.
    _, low, high = paired_bootstrap_delta([1, 1], [1, 1], [1, 0], [1, 0], resamples=2000)
    assert low == high == 0.0
    # A: 2 of 10 edges undeclared; B emits an edge in 3 episodes, all undeclared. About 3% of
    # resamples draw none of B's three: scored 0, they had put the low end at 0.0.
    num_a, den_a = [1, 1] + [0] * 8, [1] * 10
    num_b, den_b = [1, 1, 1] + [0] * 7, [1, 1, 1] + [0] * 7
    _, low, high = paired_bootstrap_delta(num_a, den_a, num_b, den_b, resamples=10_000)
    assert low > 0.0 and high <= 1.0


def test_several_rates_share_resamples_and_match_single_calls() -> None:
    rng = np.random.default_rng(4)
    den = rng.integers(1, 10, size=(150, 3))
    num_a, num_b = rng.binomial(den, 0.5), rng.binomial(den, 0.6)
    delta, low, high = paired_bootstrap_deltas(num_a, den, num_b, den, resamples=1000, seed=9)
    for j in range(3):
        single = paired_bootstrap_delta(
            num_a[:, j], den[:, j], num_b[:, j], den[:, j], resamples=1000, seed=9
        )
        assert single == pytest.approx((delta[j], low[j], high[j]))


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="shape"):
        paired_bootstrap_delta([1, 2], [2, 2], [1], [1])
    with pytest.raises(ValueError, match="no episodes"):
        paired_bootstrap_delta([], [], [], [])
    with pytest.raises(ValueError, match="confidence"):
        paired_bootstrap_delta([1], [1], [1], [1], confidence=1.5)
    with pytest.raises(ValueError, match="non-finite"):
        paired_bootstrap_delta([float("nan")], [1], [1], [1])
    with pytest.raises(ValueError, match="1-D"):
        paired_bootstrap_delta([[1]], [[1]], [[1]], [[1]])


def test_resampling_no_episodes_is_a_value_error() -> None:
    """It had divided by the episode count to size its blocks: a ZeroDivisionError."""
    from evals_pipeline.core.statistics_bootstrap import resample_sums

    with pytest.raises(ValueError, match="no episodes to resample"):
        resample_sums(np.zeros((0, 2)), resamples=3, seed=0)
    with pytest.raises(ValueError, match="resamples must be >= 1"):
        resample_sums(np.ones((2, 2)), resamples=0, seed=0)
