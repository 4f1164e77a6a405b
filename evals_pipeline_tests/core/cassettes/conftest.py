from __future__ import annotations

from datetime import UTC, datetime

import pytest

from evals_pipeline.core.models import Episode

TEXTS = [
    "Ada Lovelace worked with Charles Babbage in London. Babbage designed the Analytical Engine.",
    "Grace Hopper joined the Navy. Hopper wrote the first compiler at Remington Rand.",
    "Marie Curie studied in Paris. Curie won the Nobel Prize with Pierre Curie.",
]


@pytest.fixture
def episodes() -> list[Episode]:
    return [
        Episode(
            name=f"chunk-{i}",
            body=text,
            group_id="science",
            reference_time=datetime(2024, 1, i + 1, tzinfo=UTC),
        )
        for i, text in enumerate(TEXTS)
    ]
