"""Building run configurations over the shipped corpus for in-process pipeline tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evals_pipeline.core.config import EvalsConfig
from evals_pipeline.core.corpus import load_prose_corpus
from evals_pipeline.core.ontology import load_ontology
from evals_pipeline.core.plan import RunPlan, plan_run

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "corpus" / "prose" / "chunks.jsonl"
ONTOLOGY = REPO / "ontologies" / "prose.yaml"
RULES = REPO / "corpus" / "cassettes" / "rules.jsonl"
SLOPPY = REPO / "corpus" / "cassettes" / "sloppy.jsonl"
CASES = REPO / "corpus" / "cases"  # the exact-match bench corpus
BENCH_RULES = REPO / "corpus" / "cassettes" / "bench-rules.jsonl"
BENCH_SLOPPY = REPO / "corpus" / "cassettes" / "bench-sloppy.jsonl"
BENCH_SCHEMAS = REPO / "ontologies" / "bench"


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


def plan_fixture_run(config: EvalsConfig, **options: Any) -> RunPlan:
    """`plan_run` over the fixture corpus and ontology, scoped as `config` says, with no key
    (unless `environ=` gives one)."""
    ontology = load_ontology(ONTOLOGY)
    corpus = load_prose_corpus(CORPUS, ontology).scoped(config.limit)
    return plan_run(
        config,
        list(corpus.episodes()),
        ontology,
        corpus_path=str(CORPUS),
        corpus_digest=corpus.digest,
        environ=options.pop("environ", {}),
        expected=corpus.expected_graphs(),
        **options,
    )


def write_webnlg(folder: Path) -> Path:
    """A one-entry file in the WebNLG layout (the file, its `ontologies/` folder beside it), for
    tests that must run where the real data is absent. The entry is invented, not WebNLG's."""
    entry = {
        "id": "synthetic-1t-Airport-1",
        "category": "Airport",
        "text": "Aarhus Airport serves Aarhus, Denmark.",
        "triples": [
            {"subject": "Aarhus Airport", "predicate": "cityServed", "object": "Aarhus, Denmark"}
        ],
    }
    (folder / "ontologies").mkdir(parents=True)
    (folder / "ontologies" / "Airport.yaml").write_text(
        "category: Airport\nentity_types: []\nrelations:\n"
        "- name: cityServed\n  description: The city the airport serves.\n"
    )
    path = folder / "dev.jsonl"
    path.write_text(json.dumps(entry) + "\n")
    return path
