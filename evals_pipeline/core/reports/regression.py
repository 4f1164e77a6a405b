"""A prose run against a committed baseline run, backend by backend: the `no_regression` gate.

`compare` answers "did this change make a backend worse?" for two files a person picks. In CI
the same question has a fixed baseline: the `episodes.json` of a run kept from before the
change (`prose_baseline: <folder>`, a copy of a reports folder). Each candidate backend in both
is compared with itself, chunk by chunk with the paired bootstrap, and the gate fails where a
rate's interval says this run is worse, where this run lacks counts the baseline has, or where
nothing pairs (then nothing shows the backend is not worse). Tokens and requests a chunk are
said, not gated (`COST_RATES`). Chunks that do not pair (an edited
chunk, a re-recorded reference) are counted in the description, not failed: the gate compares
what the two runs share, and a baseline is refreshed by copying the reports folder again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare import (
    B_WORSE,
    NOT_IN_B,
    UNCOMPARED_OF_A,
    ComparisonRefused,
    RunReportError,
    check_run_report,
    compare_runs,
    load_run_report,
    rates_with_verdict,
)
from ..errors import InputFileError
from .episodes import EPISODES_FILE

# Rates of what a run spends, not of what it extracts: a prompt that says more costs more
# tokens on every chunk, deterministically, which is a price to read, not a regression to
# fail on. A rise is said in the description; `compare --fail-if-worse` still fails on it.
COST_RATES = frozenset({"tokens_per_episode", "requests_per_episode"})
# How `compare`'s messages name the two runs, said once where one is quoted.
_RUNS = "run A is the baseline, run B this run"


@dataclass
class Regression:
    """What the gate found for one mode; `passed` is its verdict."""

    baseline: Path
    compared: dict[str, int] = field(default_factory=dict)  # backend -> paired chunks
    unpaired: dict[str, int] = field(default_factory=dict)  # backend -> baseline chunks not
    worse: dict[str, list[str]] = field(default_factory=dict)  # backend -> rates
    lost: dict[str, list[str]] = field(default_factory=dict)
    costlier: dict[str, list[str]] = field(default_factory=dict)  # worse on COST_RATES only
    refused: dict[str, str] = field(default_factory=dict)  # backend -> why nothing compared
    only_baseline: list[str] = field(default_factory=list)
    only_run: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Nothing worse, lost or uncompared, and some backend compared (unless neither run
        has a candidate backend: then there is nothing to gate)."""
        nothing_to_gate = not (self.only_run or self.only_baseline)
        return not (self.worse or self.lost or self.refused) and (
            bool(self.compared) or nothing_to_gate
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
        if not self.compared and (self.only_run or self.only_baseline):
            parts.append(
                "no backend is in both this run and the baseline (this run: "
                f"{', '.join(self.only_run) or 'none'}; the baseline: "
                f"{', '.join(self.only_baseline) or 'none'})"
            )
        verdict = "; ".join(parts) if parts else "no backend is worse than in the baseline"
        compared = ", ".join(
            f"{name} on {n} chunks"
            + (
                f" ({self.unpaired[name]} of the baseline's chunks unpaired)"
                if name in self.unpaired
                else ""
            )
            for name, n in sorted(self.compared.items())
        )
        extra = [f"compared {compared}"] if compared else []
        extra += [
            f"{name} costs more: {', '.join(rates)} (not gated)"
            for name, rates in sorted(self.costlier.items())
        ]
        if self.compared and self.only_baseline:
            extra.append(f"in the baseline only: {', '.join(self.only_baseline)}")
        if self.compared and self.only_run:
            extra.append(f"not in the baseline: {', '.join(self.only_run)}")
        if self.refused:
            extra.append(_RUNS)
            extra.append("if the change was meant, refresh the baseline (copy the reports again)")
        return f"{verdict} (baseline {self.baseline}" + "".join(f"; {e}" for e in extra) + ")"


def baseline_file(folder: Path, mode: str) -> Path:
    """Where a baseline folder (a copy of a reports folder) keeps a mode's per-chunk counts."""
    return folder / mode / EPISODES_FILE


def gate_plan(folder: Path | None, modes: Sequence[str]) -> str:
    """What the dry run says of the gate: which modes' reports it will check, against what."""
    if folder is None:
        return (
            "regression gate: none (no prose_baseline: no report is checked against a run "
            "kept from before a change)"
        )
    have = [mode for mode in modes if baseline_file(folder, mode).is_file()]
    missing = [mode for mode in modes if mode not in have]
    line = (
        f"regression gate: no_regression checks {', '.join(have) or 'no mode'} against "
        f"{folder}/<mode>/{EPISODES_FILE}"
    )
    if missing:
        line += f"; no file for {', '.join(missing)} (WARN: nothing gated there)"
    return line


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
        except (ComparisonRefused, RunReportError) as exc:  # a bad row: no step failure
            found.refused[name] = str(exc)
            continue
        found.compared[name] = int(result["paired"])
        if missing := sum(len(result["unpaired"][key]) for key in UNCOMPARED_OF_A):
            found.unpaired[name] = missing
        # The verdicts `compare --fail-if-worse` fails on, but for the cost rates.
        for verdict, into in ((B_WORSE, found.worse), (NOT_IN_B, found.lost)):
            rates = rates_with_verdict(result, verdict)
            if gated := [r for r in rates if r not in COST_RATES]:
                into[name] = gated
            if verdict == B_WORSE and (spent := [r for r in rates if r in COST_RATES]):
                found.costlier[name] = spent
    return found
