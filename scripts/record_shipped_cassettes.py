"""Re-record the cassettes shipped in corpus/cassettes/, honestly and offline.

Nothing here is a language model. Two rule-based responders from
evals_pipeline_tests/support/deterministic_backend.py are served on 127.0.0.1 over the real
wire protocols, and the pipeline itself records them through its live backends:

- `rules`:  the tidy rules, OpenAI-compatible chat completions, through `oai-http` (httpx)
- `sloppy`: the same rules badly delivered (prose + fenced JSON, no summaries, every other edge
            reversed, one entity call in four truncated first), Anthropic Messages API, through
            the official `anthropic` SDK

Run from the repository root:  python scripts/record_shipped_cassettes.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from dagster import DagsterInstance

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evals_pipeline.core.cassettes.sidecar import sidecar_path  # noqa: E402
from evals_pipeline.core.config import BenchConfig, EvalsConfig  # noqa: E402
from evals_pipeline.materialize import materialize_all  # noqa: E402
from evals_pipeline_tests.support.deterministic_backend import (  # noqa: E402
    openai_responder,
    sloppy_anthropic_responder,
)
from evals_pipeline_tests.support.llm_servers import LoopbackLLMServer  # noqa: E402

OUT = REPO / "corpus" / "cassettes"


def main() -> int:
    targets = {"rules": OUT / "rules.jsonl", "sloppy": OUT / "sloppy.jsonl"}
    bench_targets = {"rules": OUT / "bench-rules.jsonl", "sloppy": OUT / "bench-sloppy.jsonl"}
    for path in [*targets.values(), *bench_targets.values()]:
        path.unlink(missing_ok=True)  # recording appends; start these from nothing
        sidecar_path(path).unlink(missing_ok=True)
    with (
        LoopbackLLMServer("openai", responder=openai_responder) as tidy,
        LoopbackLLMServer("anthropic", responder=sloppy_anthropic_responder) as sloppy,
        tempfile.TemporaryDirectory() as scratch,
    ):
        # The loopback server ignores the key; it never reaches a cassette (the seam is above
        # HTTP) and is not a credential.
        os.environ["ANTHROPIC_API_KEY"] = "loopback-no-real-key"
        os.environ["EVALS_ANTHROPIC_BASE_URL"] = sloppy.base_url
        live = {
            "rules": f"oai-http:url={tidy.base_url},model=rules-tidy",
            "sloppy": "anthropic:model=rules-sloppy",
        }
        config = EvalsConfig(
            backends=live,
            reference="rules",
            corpus=REPO / "corpus" / "prose" / "chunks.jsonl",
            ontology=REPO / "ontologies" / "prose.yaml",
            scope="all",
            record_cassette=targets,
            # The bench's own cassettes: every case of corpus/cases under strict mode (recast
            # cases twice, so their keys appear twice and replay FIFO).
            bench=BenchConfig(
                backends=live,
                record_cassette=bench_targets,
                corpora={"cases": REPO / "corpus" / "cases"},
                output_dir=Path(scratch) / "bench",
            ),
            output_dir=Path(scratch) / "reports",
            cache_dir=Path(scratch) / "cache",
        ).check("record_shipped_cassettes.py")
        outcome = materialize_all(config, instance=DagsterInstance.ephemeral(), quiet=True)
    if not outcome.success:
        print("recording failed:", *outcome.failed_checks, *outcome.failed_steps, sep="\n  ")
        return 1
    for name, path in [*targets.items(), *(("bench-" + k, v) for k, v in bench_targets.items())]:
        side = sidecar_path(path)
        if side.exists() and side.stat().st_size == 0:
            side.unlink()  # nothing failed; an empty sidecar says nothing worth shipping
        lines = path.read_text().count("\n")
        print(f"{name}: {lines} records -> {path.relative_to(REPO)}")
    print(f"{outcome.extraction_calls} extraction calls recorded through the live backends")
    print(f"{outcome.bench_calls} bench calls recorded through the live backends")
    return 0


if __name__ == "__main__":
    sys.exit(main())
