"""Small hand-made bench cases written to a temporary corpus, for loader and metric tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

SCHEMA = {
    "name": "mini",
    "entity_types": [
        {
            "name": "Station",
            "properties": [
                {"name": "opened", "type": "date"},
                {"name": "platforms", "type": "integer"},
            ],
        },
        {
            "name": "Train",
            "properties": [{"name": "number", "type": "string"}],
            "identity": ["number"],
        },
        {
            "name": "Delay",
            "properties": [{"name": "minutes", "type": "integer"}],
            "identity": "blank",
        },
    ],
    "relation_types": [
        {"name": "LINKS_TO", "source": ["Station"], "target": ["Station"]},
        {"name": "STOPS_AT", "source": ["Train"], "target": ["Station"]},
    ],
}
BODY = (
    "Ash (opened 1 May 1990, with four platforms) links to Birch. Birch links to Cedar. "
    "Cedar links to Dale."
)


def expected() -> dict[str, Any]:
    return {
        "ep-1": {
            "vertices": {
                "ash": {
                    "type": "Station",
                    "name": "Ash",
                    "quote": "Ash (opened 1 May 1990, with four platforms)",
                    "properties": {"opened": "1990-05-01", "platforms": 4},
                },
                "birch": {"type": "Station", "name": "Birch", "quote": "Birch."},
                "cedar": {"type": "Station", "name": "Cedar", "quote": "Cedar."},
                "dale": {"type": "Station", "name": "Dale", "quote": "Dale."},
            },
            "edges": [
                {
                    "source": "ash",
                    "relation": "LINKS_TO",
                    "target": "birch",
                    "quote": "links to Birch",
                },
                {
                    "source": "birch",
                    "relation": "LINKS_TO",
                    "target": "cedar",
                    "quote": "Birch links to Cedar",
                },
                {
                    "source": "cedar",
                    "relation": "LINKS_TO",
                    "target": "dale",
                    "quote": "Cedar links to Dale",
                },
            ],
            "forbidden": {
                "vertices": [{"type": "Station", "name": "Elm"}],
                "edges": [{"source": "birch", "relation": "LINKS_TO", "target": "ash"}],
            },
        }
    }


def write_corpus(
    tmp: Path,
    *,
    expected_yaml: dict[str, Any] | None = None,
    episodes: list[dict[str, Any]] | None = None,
    case: dict[str, Any] | None = None,
    splits: dict[str, Any] | None = None,
    schema: dict[str, Any] | None = None,
) -> Path:
    """A corpus of one case `mini/rail` (split dev) under tmp/corpus/cases; returns that root."""
    root = tmp / "corpus" / "cases"
    case_dir = root / "mini" / "rail"
    case_dir.mkdir(parents=True)
    schemas = tmp / "ontologies" / "bench"
    schemas.mkdir(parents=True)
    (schemas / "mini.yaml").write_text(yaml.safe_dump(schema or SCHEMA, sort_keys=False))
    (case_dir / "case.yaml").write_text(
        yaml.safe_dump(case or {"description": "mini", "schema": ["mini.yaml"]}, sort_keys=False)
    )
    lines = episodes or [{"source_id": "ep-1", "body": BODY}]
    (case_dir / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    (case_dir / "expected.yaml").write_text(
        yaml.safe_dump(expected_yaml if expected_yaml is not None else expected(), sort_keys=False)
    )
    (root / "SPLITS.yaml").write_text(
        yaml.safe_dump(splits if splits is not None else {"dev": ["mini/rail"], "test": []})
    )
    return root
