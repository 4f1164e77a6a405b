"""Building run configurations over the shipped corpus for in-process pipeline tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evals_pipeline.core.config import EvalsConfig

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "corpus" / "prose" / "chunks.jsonl"
ONTOLOGY = REPO / "ontologies" / "prose.yaml"
RULES = REPO / "corpus" / "cassettes" / "rules.jsonl"
SLOPPY = REPO / "corpus" / "cassettes" / "sloppy.jsonl"


def make_config(tmp_path: Path, backends: dict[str, str], **overrides: Any) -> EvalsConfig:
    values: dict[str, Any] = {
        "backends": backends,
        "reference": next(iter(backends)),
        "corpus": CORPUS,
        "ontology": ONTOLOGY,
        "scope": 4,
        "output_dir": tmp_path / "reports",
        "cache_dir": tmp_path / "cache",
    }
    values.update(overrides)
    return EvalsConfig(**values).check("test")
