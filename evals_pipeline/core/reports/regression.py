"""A prose run against a committed baseline run, backend by backend: the `no_regression` gate.

`compare` answers "did this change make a backend worse?" for two files a person picks. In CI
the same question has a fixed baseline: the `episodes.json` of a run kept from before the
change (`prose_baseline: <folder>`, a copy of a reports folder). Each candidate backend in both
is compared with itself, chunk by chunk with the paired bootstrap, and the gate fails where a
rate's interval says this run is worse, where this run lacks counts the baseline has, or where
nothing pairs (then nothing shows the backend is not worse). Chunks that do not pair (an edited
chunk, a re-recorded reference) are counted in the description, not failed: the gate compares
what the two runs share, and a baseline is refreshed by copying the reports folder again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare import (
    ComparisonRefused,
    RunReportError,
    check_run_report,
    compare_runs,
    load_run_report,
)
from ..errors import InputFileError
from .episodes import EPISODES_FILE

# Interval failures the gate counts, as `compare --fail-if-worse` does.
WORSE = "B worse"
LOST = "not in run b"


@dataclass
class Regression:
    """What the gate found for one mode; `passed` is its verdict."""

    baseline: Path
    compared: dict[str, int] = field(default_factory=dict)  # backend -> paired chunks
    unpaired: dict[str, int] = field(default_factory=dict)  # backend -> baseline chunks not
    worse: dict[str, list[str]] = field(default_factory=dict)  # backend -> rates
    lost: dict[str, list[str]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # backend -> why nothing paired
    only_baseline: list[str] = field(default_factory=list)
    only_run: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not (self.worse or self.lost or self.refused) and (
            bool(self.compared) or not self.only_run
        )

    def describe(self) -> str:
        parts = [
            f"{name}: worse on {', '.join(rates)}" for name, rates in sorted(self.worse.items())
        ]
        parts += [
            f"{name}: no counts for {', '.join(rates)}, which the baseline has"
            for name, rates in sorted(self.lost.items())
        ]
        parts += [f"{name}: nothing compared ({why})" for name, why in sorted(self.refused.items())]
        if self.only_run and not self.compared:
            parts.append(f"no backend of this run is in the baseline ({', '.join(self.only_run)})")
        verdict = "; ".join(parts) if parts else "no backend is worse than in the baseline"
        compared = ", ".join(
            f"{name} on {n} chunks"
            + (f" ({self.unpaired[name]} unpaired)" if name in self.unpaired else "")
            for name, n in sorted(self.compared.items())
        )
        extra = [f"compared {compared}"] if compared else []
        if self.only_baseline:
            extra.append(f"in the baseline only: {', '.join(self.only_baseline)}")
        if self.only_run and self.compared:
            extra.append(f"not in the baseline: {', '.join(self.only_run)}")
        return f"{verdict} (baseline {self.baseline}" + "".join(f"; {e}" for e in extra) + ")"


def baseline_file(folder: Path, mode: str) -> Path:
    """Where a baseline folder (a copy of a reports folder) keeps a mode's per-chunk counts."""
    return folder / mode / EPISODES_FILE


def read_baseline(path: Path) -> dict[str, Any]:
    """A baseline run report, checked as `compare` reads one: a bad one is an InputFileError
    naming the file, before any run (the project file's check) and in the check's step."""
    report = load_run_report(path)
    try:
        check_run_report(report, "baseline")
    except RunReportError as exc:
        raise InputFileError(path, str(exc)) from exc
    return report


def check_regression(
    baseline: Mapping[str, Any],
    run: Mapping[str, Any],
    *,
    baseline_path: Path,
    resamples: int = 10_000,
    seed: int = 0,
) -> Regression:
    """Every candidate backend of `run` that `baseline` has, compared with itself."""
    base_rows, run_rows = set(baseline.get("rows") or ()), set(run.get("rows") or ())
    found = Regression(
        baseline=baseline_path,
        only_baseline=sorted(base_rows - run_rows),
        only_run=sorted(run_rows - base_rows),
    )
    for name in sorted(base_rows & run_rows):
        try:
            result = compare_runs(
                baseline, run, row_a=name, row_b=name, resamples=resamples, seed=seed
            )
        except ComparisonRefused as exc:
            found.refused[name] = str(exc)
            continue
        found.compared[name] = int(result["paired"])
        unpaired = result["unpaired"]
        missing = sum(len(unpaired[k]) for k in ("only_a", "case_changed", "no_case_digest"))
        if missing:
            found.unpaired[name] = missing
        for verdict, into in ((WORSE, found.worse), (LOST, found.lost)):
            rates = [r["rate"] for r in result["rates"] if r["verdict"] == verdict]
            if rates:
                into[name] = rates
    return found
