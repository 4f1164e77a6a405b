import math

import pytest

from evals_pipeline.core.statistics import percentiles


def test_percentiles_linear_interpolation() -> None:
    result = percentiles([100.0, 300.0])
    assert result == {
        "p50": pytest.approx(200.0),
        "p90": pytest.approx(280.0),
        "p99": pytest.approx(298.0),
    }
    assert percentiles([1, 2, 3, 4, 5]) == {
        "p50": 3.0,
        "p90": pytest.approx(4.6),
        "p99": pytest.approx(4.96),
    }
    assert all(isinstance(v, float) for v in result.values())


def test_percentiles_single_value_and_custom_qs() -> None:
    assert percentiles([7.5]) == {"p50": 7.5, "p90": 7.5, "p99": 7.5}
    assert percentiles([0, 10], qs=(25, 99.9)) == {"p25": 2.5, "p99.9": pytest.approx(9.99)}


def test_percentiles_empty_is_none() -> None:
    assert percentiles([]) == {"p50": None, "p90": None, "p99": None}
    assert not any(isinstance(v, float) and math.isnan(v) for v in percentiles([]).values())
