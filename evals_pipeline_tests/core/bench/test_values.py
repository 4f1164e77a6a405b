"""Property values coerced by their declared type, as the bench compares them."""

from __future__ import annotations

import pytest

from evals_pipeline.core.bench.values import canonical, coerce, parse_date, words_to_int
from evals_pipeline.core.ontology import PropertyType

INTEGER = PropertyType(name="platforms", type="integer")
NUMBER = PropertyType(name="length", type="number", unit="km")
BOOLEAN = PropertyType(name="open", type="boolean")
DATE = PropertyType(name="opened", type="date")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("three hundred and forty-two", 342),
        ("a hundred", 100),
        ("two thousand and five", 2005),
        ("twelve", 12),
        ("twelve apples", None),
        ("", None),
    ],
)
def test_words_to_int(text: str, value: int | None) -> None:
    assert words_to_int(text) == value


@pytest.mark.parametrize(
    ("text", "iso"),
    [("1990-05-01", "1990-05-01"), ("1 May 1990", "1990-05-01"), ("May 1, 1990", "1990-05-01")],
)
def test_parse_date(text: str, iso: str) -> None:
    assert parse_date(text) == iso


@pytest.mark.parametrize("text", ["31 February 2020", "spring 1990", "1990-13-01"])
def test_a_date_that_is_none_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_date(text)


def test_numbers_by_type_unit_and_grouping() -> None:
    assert coerce("1,234", INTEGER) == 1234 and coerce("four", INTEGER) == 4
    assert coerce("12.5 km", NUMBER) == 12.5 and coerce(7, NUMBER) == 7.0
    assert coerce("yes", BOOLEAN) is True and coerce("False", BOOLEAN) is False
    with pytest.raises(ValueError, match="not an integer"):
        coerce("2.5", INTEGER)
    with pytest.raises(ValueError, match="a boolean is not a integer"):
        coerce(True, INTEGER)


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", float("inf"), 1e400])
def test_a_value_that_is_no_finite_number_is_refused(value: str | float) -> None:
    """float() reads "nan" and "inf": a model writing them states no number, and NaN would
    never equal anything, so it would neither match nor be reported as unfaithful."""
    with pytest.raises(ValueError, match="not a finite number"):
        coerce(value, NUMBER)
    assert canonical(value, NUMBER) == (value.casefold() if isinstance(value, str) else value)
