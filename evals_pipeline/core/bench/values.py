"""Property values as their declared type makes them: coercion, normalisation, stated values.

`coerce` turns what a text (or a model) writes into the canonical value of a property type:
integers from grouped digits or written-out words, numbers in the declared unit, booleans from
yes/no, dates as YYYY-MM-DD. `stated_values` lists the numbers and dates a quote states, so a
scorer can tell whether a value is faithful to its quote.
"""

from __future__ import annotations

import math
import re
from datetime import date

from ..models import PropertyValue
from ..ontology import PropertyType

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000}
_MONTHS = {
    m: i
    for i, m in enumerate(
        (
            "january", "february", "march", "april", "may", "june", "july", "august",
            "september", "october", "november", "december",
        ),
        start=1,
    )
}  # fmt: skip
_NUMBER_WORDS = set(_UNITS) | set(_SCALES) | {"and", "a"}
_GROUPED = re.compile(
    r"(?<![\w.])-?\d{1,3}(?:[,\u202f\u00a0 ]\d{3})+(?:\.\d+)?(?![\w])|-?\d+(?:\.\d+)?"
)
_MONTH = "(" + "|".join(_MONTHS) + ")"
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+{_MONTH},?\s+(\d{{4}})\b")
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_WORD = re.compile(r"[a-z]+")


def normalise_text(text: str) -> str:
    """Casefold and collapse runs of whitespace: how names and strings compare."""
    return " ".join(text.casefold().split())


def words_to_int(text: str) -> int | None:
    """`three hundred and forty-two` -> 342; None if `text` is not only number words."""
    tokens = [t for t in re.split(r"[\s\-]+", text.casefold().strip()) if t]
    if not tokens or any(t not in _NUMBER_WORDS for t in tokens):
        return None
    if all(t in ("and", "a") for t in tokens):
        return None
    total = current = 0
    seen = False
    for t in tokens:
        if t == "and":
            continue
        if t == "a":
            current = max(current, 1)
            continue
        if t in _UNITS:
            current += _UNITS[t]
            seen = True
        elif t == "hundred":
            current = max(current, 1) * 100
            seen = True
        else:
            total += max(current, 1) * _SCALES[t]
            current = 0
            seen = True
    return total + current if seen else None


def _number(text: str, unit: str | None) -> float:
    s = text.strip()
    if unit and s.casefold().endswith(unit.casefold()):
        s = s[: -len(unit)].strip()
    compact = re.sub(r"(?<=\d)[,\u202f\u00a0 _](?=\d{3}\b)", "", s)
    try:
        return float(compact)
    except ValueError:
        pass
    spelt = words_to_int(s)
    if spelt is None:
        raise ValueError(f"not a number: {text!r}")
    return float(spelt)


def parse_date(text: str) -> str:
    """A date as YYYY-MM-DD, from ISO or a written-out day, month and year."""
    s = normalise_text(text)
    for pattern, order in ((_ISO, "ymd"), (_DAY_FIRST, "dmy"), (_MONTH_FIRST, "mdy")):
        m = pattern.fullmatch(s)
        if m:
            parts = dict(zip(order, m.groups(), strict=True))
            month = _MONTHS.get(parts["m"]) or int(parts["m"])
            return date(int(parts["y"]), month, int(parts["d"])).isoformat()
    raise ValueError(f"not a date: {text!r}")


def coerce(value: PropertyValue, prop: PropertyType) -> PropertyValue:
    """The canonical value of `value` under `prop`'s type; raises ValueError if it has none."""
    if prop.type == "string":
        if not isinstance(value, str):
            raise ValueError(f"not a string: {value!r}")
        return value
    if prop.type == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and normalise_text(value) in ("yes", "true", "no", "false"):
            return normalise_text(value) in ("yes", "true")
        raise ValueError(f"not a yes/no value: {value!r}")
    if isinstance(value, bool):
        raise ValueError(f"a boolean is not a {prop.type}: {value!r}")
    if prop.type == "date":
        if not isinstance(value, str):
            raise ValueError(f"not a date: {value!r}")
        return parse_date(value)
    number = float(value) if isinstance(value, int | float) else _number(value, prop.unit)
    if not math.isfinite(number):  # "nan", "inf", 1e400: no value a text states
        raise ValueError(f"not a finite number: {value!r}")
    if prop.type == "integer":
        if not number.is_integer():
            raise ValueError(f"not an integer: {value!r}")
        return int(number)
    return number


def canonical(value: PropertyValue, prop: PropertyType) -> PropertyValue:
    """The form values compare in: coerced, strings normalised. Uncoercible values stay raw."""
    try:
        coerced = coerce(value, prop)
    except ValueError:
        return normalise_text(value) if isinstance(value, str) else value
    return normalise_text(coerced) if isinstance(coerced, str) else coerced


def is_canonical(value: PropertyValue, prop: PropertyType) -> bool:
    """Whether `value` is already what its field makes of it (as an expected graph must be)."""
    try:
        coerced = coerce(value, prop)
    except ValueError:
        return False
    if type(coerced) is not type(value) and not (
        prop.type == "number" and isinstance(value, int) and not isinstance(value, bool)
    ):
        return False
    return coerced == value


def stated_values(quote: str) -> tuple[set[float], set[str]]:
    """The numbers and the dates (YYYY-MM-DD) a quote states, digits or words alike."""
    text = normalise_text(quote)
    dates: set[str] = set()
    for pattern, order in ((_ISO, "ymd"), (_DAY_FIRST, "dmy"), (_MONTH_FIRST, "mdy")):
        for m in pattern.finditer(text):
            parts = dict(zip(order, m.groups(), strict=True))
            month = _MONTHS.get(parts["m"]) or int(parts["m"])
            try:
                dates.add(date(int(parts["y"]), month, int(parts["d"])).isoformat())
            except ValueError:
                continue
    numbers: set[float] = set()
    for m in _GROUPED.finditer(text):
        numbers.add(float(re.sub(r"[,\u202f\u00a0 ]", "", m.group(0))))
    run: list[str] = []
    for token in [m.group(0) for m in _WORD.finditer(text)] + [""]:
        if token in _NUMBER_WORDS:
            run.append(token)
            continue
        while run and run[-1] in ("and", "a"):
            run.pop()
        if run:
            spelt = words_to_int(" ".join(run))
            if spelt is not None:
                numbers.add(float(spelt))
        run = []
    return numbers, dates


def states(quote: str, value: PropertyValue, prop: PropertyType) -> bool:
    """Whether `quote` states `value` (numbers and dates only; other types always pass)."""
    if prop.type not in ("integer", "number", "date"):
        return True
    try:
        coerced = coerce(value, prop)
    except ValueError:
        return False
    numbers, dates = stated_values(quote)
    if prop.type == "date":
        return coerced in dates
    assert isinstance(coerced, int | float)
    return float(coerced) in numbers
