"""Assembling a mode report from per-backend summaries and the reference comparison.

The Dagster graph computes each backend's summary in its own partition (`backend_summary`) and
the strict comparison once per mode; this joins them into one mode's report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import EvalsConfig
from ..digests import file_sha256
from .report import jsonable_dict


def assemble_mode_report(
    *,
    mode: str,
    reference: str,
    ontology: str | None,
    summaries: Mapping[str, Mapping[str, Any]],
    strict: Mapping[str, Mapping[str, Any] | None],
    corpus: Mapping[str, object],
    judge: Mapping[str, object],
    notes: Sequence[str] = (),
    judged: Mapping[str, Mapping[str, Any] | None] | None = None,
    pairwise: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """`pairwise` is None unless pairwise judging was requested: the section is then absent
    from the report, not null. `provenance` (`inputs_provenance`) pins what produced it."""
    backends = {
        name: {
            **summaries[name],
            "strict": None if name == reference else strict.get(name),
            "judged": None if judged is None or name == reference else judged.get(name),
        }
        for name in sorted(summaries)
    }
    report: dict[str, Any] = {
        "ontology_mode": mode,
        "reference": reference,
        "ontology": ontology,
        "corpus": dict(corpus),
        "judge": dict(judge),
        "notes": list(notes),
        "backends": backends,
    }
    if pairwise is not None:
        report["pairwise"] = dict(pairwise)
    if provenance is not None:
        report["provenance"] = dict(provenance)
    return jsonable_dict(report)


def inputs_provenance(config: EvalsConfig) -> dict[str, Any]:
    """SHA-256 of what a report's numbers came from besides the corpus (whose digest the report
    gives): the extraction prompts' module, the judge's, the ontology and each replayed
    cassette. Two reports whose provenance differs only in `prompts` differ by a prompt edit."""
    from .. import prompts
    from ..judge import prompts as judge_prompts

    cassettes = {
        name: file_sha256(spec.cassette_path)
        for name, spec in sorted(config.specs.items())
        if spec.cassette_path is not None and spec.cassette_path.is_file()
    }
    return {
        "prompts": file_sha256(prompts.__file__),
        "judge_prompts": file_sha256(judge_prompts.__file__),
        "ontology": file_sha256(config.ontology) if config.ontology else None,
        "cassettes": cassettes,
    }
