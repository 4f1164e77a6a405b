"""The optional prices file: USD per million input and output tokens, by model name.

    {"claude-sonnet-4-6": {"input_per_1m": 3.0, "output_per_1m": 15.0}, "_note": "..."}

Keys starting with "_" are comments. Read when a run is planned (and by `--dry-run`), so a bad
file is an error naming its field before any paid call, not after the extraction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import InputFileError
from .files import load_json, validate_file_model


class ModelPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Strict: JSON's true is no price (lax parsing made it 1 USD); an integer is a number.
    input_per_1m: float = Field(strict=True)
    output_per_1m: float = Field(strict=True)

    @field_validator("input_per_1m", "output_per_1m")
    @classmethod
    def _a_price(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError("a price must be a finite number of USD, 0 or more")
        return value


def load_prices(path: Path | str) -> dict[str, dict[str, float]]:
    """`{model: {"input_per_1m": …, "output_per_1m": …}}`; InputFileError names what is wrong."""
    path = Path(path)
    data: Any = load_json(path)
    if not isinstance(data, dict):
        raise InputFileError(path, "a prices file is a JSON object of model names")
    out: dict[str, dict[str, float]] = {}
    for name, value in data.items():
        if name.startswith("_"):
            continue
        price = validate_file_model(ModelPrice, value, path, within=(name,))
        out[name] = price.model_dump()
    return out


def cost_usd(
    model: str | None,
    input_tokens: int,
    output_tokens: int,
    prices: Mapping[str, Mapping[str, float]] | None,
) -> float | None:
    """USD for these tokens when `prices` (as `load_prices` returns) names the model; else
    None (no price is not a cost of 0)."""
    if prices is None or model is None or model not in prices:
        return None
    price = prices[model]
    return (input_tokens * price["input_per_1m"] + output_tokens * price["output_per_1m"]) / 1e6
