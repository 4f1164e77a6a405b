"""Tmp golden sets with VERIFIED examples, recorded through the loopback server.

The examples are written for the tests (never shipped). Their labels agree with the rule-based
claims backend in `support/claims_backend.py`, so a full recording scores micro-F1 1.0 and a
lossy one (first claim per text only) scores 0.667: a drop the gate must catch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evals_pipeline.core.claims.extractor import transport_from_spec
from evals_pipeline.core.claims.gate import build_baseline, run_gate, write_baseline
from evals_pipeline.core.claims.golden import load_golden_set
from evals_pipeline.core.claims.runner import RecordResult, record_golden_set
from evals_pipeline.core.extractors.specs import parse_backend_spec
from evals_pipeline_tests.support.claims_backend import openai_claims_responder
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer

Labels = list[tuple[str, str]]

VERIFIED: dict[str, tuple[str, Labels]] = {
    "v-vote": (
        "The council voted 7 to 2 to approve the budget on Tuesday. Members praised the plan.",
        [("The council voted 7 to 2 to approve the budget.", "The council voted 7 to 2")],
    ),
    "v-library": (
        "The library lends 18,000 items a year. It opened in 1964 on Maple Street.",
        [
            ("The library lends 18,000 items a year.", "The library lends 18,000 items a year"),
            ("The library opened on Maple Street in 1964.", "It opened in 1964 on Maple Street"),
        ],
    ),
    "v-negative": ("Residents said they were tired of waiting. Nobody knows what comes next.", []),
    "v-fair": (
        "The fair drew 48,000 visitors over 5 days. The auction raised $212,000 for clubs. "
        "Organizers counted 310 volunteers at the gates.",
        [
            ("The fair drew 48,000 visitors over five days.", "The fair drew 48,000 visitors"),
            (
                "The fair auction raised $212,000 for clubs.",
                "The auction raised $212,000 for clubs",
            ),
            ("Organizers counted 310 volunteers at the fair gates.", "counted 310 volunteers"),
        ],
    ),
}
PENDING: dict[str, tuple[str, Labels]] = {
    "p-draft": (
        "The bridge closes from June 2 to June 6 for inspection. Detours use Elm Avenue.",
        [("The bridge closes from June 2 to June 6.", "The bridge closes from June 2 to June 6")],
    ),
}


def write_example(
    folder: Path,
    example_id: str,
    text: str,
    claims: Labels,
    status: str = "VERIFIED",
    **overrides: Any,
) -> Path:
    data: dict[str, object] = {
        "id": example_id,
        "task": "claim_extraction",
        "input_text": text,
        "input_provenance": "test fixture written for the test suite",
        "expected_claims": [{"claim": c, "evidence_span": s} for c, s in claims],
        "review_status": status,
        "notes": "test example",
    }
    data.update(overrides)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{example_id}.json"
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def make_golden(folder: Path, *, pending: bool = True) -> Path:
    for example_id, (text, claims) in VERIFIED.items():
        write_example(folder, example_id, text, claims)
    if pending:
        for example_id, (text, claims) in PENDING.items():
            write_example(folder, example_id, text, claims, status="PENDING_HUMAN_REVIEW")
    return folder


def record(golden_dir: Path, *, lossy: bool = False) -> RecordResult:
    """Live recording of every example through the OpenAI-compatible transport over TCP."""
    with LoopbackLLMServer("openai", responder=openai_claims_responder(lossy=lossy)) as server:
        spec = parse_backend_spec(f"oai-http:url={server.url},model=rules")
        return record_golden_set(
            load_golden_set(golden_dir), transport_from_spec(spec), backend=spec.describe()
        )


def write_current_baseline(golden_dir: Path) -> Path:
    golden = load_golden_set(golden_dir)
    report = run_gate(golden, golden.baseline_path)
    return write_baseline(
        golden.baseline_path, build_baseline(golden, report.replay, report.summary)
    )
