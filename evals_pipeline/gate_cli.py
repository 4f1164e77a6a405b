"""`evals-pipeline gate`: the claim-extraction regression gate, as CI and a person run it.

    evals-pipeline gate                                  # replay recordings, score, gate
    evals-pipeline gate --mode live --record --backend main=anthropic
    evals-pipeline gate --write-baseline                 # after checking the diffs

Replay (the default) makes no network call: it re-runs `ClaimExtractor` on each recorded reply
whose prompt fingerprint and input text still match the live code, scores VERIFIED examples
(pending ones are report-only) and prints every false positive and false negative. With no
committed baseline the gate is INACTIVE: a loud warning, exit 0. With one it fails (exit 1) on a
missing or stale recording of a VERIFIED example, or a micro-F1 drop of more than 0.02.
`--mode live --record` refreshes every recording through a live backend first. The golden folder
and baseline come from the project file (`golden_dir`, `claims_baseline`) unless given as flags.
Exit codes: 0 pass or inactive, 1 gate failed / baseline refused / a live call failed,
2 usage or input error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .cli import output_file, positive_int
from .core.atomic import write_text_atomic
from .core.claims.extractor import transport_from_spec
from .core.claims.gate import (
    BaselineRefused,
    GateReport,
    build_baseline,
    run_gate,
    write_baseline,
)
from .core.claims.golden import GoldenSet, load_golden_set
from .core.claims.runner import record_golden_set
from .core.claims.scoring import render_diffs_markdown, render_score_lines
from .core.config import CONFIG_ENV, default_config_path, load_config
from .core.errors import EvalsError
from .core.extractors.specs import parse_named_backend
from .core.files import real_path, refuse_overwrite
from .core.reports.files import report_json

USAGE_ERROR = 2
_BANNER = "!" * 78


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="evals-pipeline gate",
        description="Did this prompt change make claim extraction worse? (the golden-set gate)",
    )
    p.add_argument("--config", type=Path, help="project file for golden_dir/claims_baseline")
    p.add_argument("--golden", type=Path, help="golden set folder (instead of the config's)")
    p.add_argument("--baseline", type=Path, help="baseline file (default <golden>/baseline.json)")
    p.add_argument("--mode", choices=["replay", "live"], default="replay")
    p.add_argument("--record", action="store_true", help="with --mode live: refresh recordings")
    p.add_argument("--backend", metavar="NAME=SPEC", help="live backend, e.g. main=anthropic")
    p.add_argument(
        "--concurrency", type=positive_int, default=4, help="live calls in flight (default 4)"
    )
    p.add_argument("--write-baseline", action="store_true", help="write the baseline from replay")
    p.add_argument(
        "--allow-lower",
        action="store_true",
        help="with --write-baseline: write it even when micro-F1 fell more than the gate allows",
    )
    p.add_argument("--output", type=output_file, help="also write scores and gate state as JSON")
    return p


def _paths(args: argparse.Namespace) -> tuple[Path, Path, bool, Path | None]:
    """`--golden` (with `--baseline` or its own baseline.json), else the project file's
    `golden_dir` / `claims_baseline` when there is a project file (a named one must exist),
    else corpus/golden; whether the baseline was named (`--baseline`, `claims_baseline`)
    rather than defaulted; and the project file, where it sets `claims_gate: false`."""
    golden: Path | None = args.golden
    baseline: Path | None = args.baseline
    named = baseline is not None
    switched_off: Path | None = None
    if golden is None:
        config_path = args.config or default_config_path()
        # A named project file (--config, EVALS_CONFIG) must exist: a typo there would
        # silently drop its golden_dir and claims_baseline. Only the default may be absent.
        named_config = args.config is not None or bool(os.environ.get(CONFIG_ENV))
        if named_config or config_path.is_file():
            config = load_config(config_path)
            if not config.claims_gate:
                switched_off = config_path
            golden = config.golden_dir
            named = named or config.claims_baseline is not None
            baseline = baseline or config.claims_baseline_path
    golden = real_path(golden or Path("corpus/golden"))
    return golden, real_path(baseline or golden / "baseline.json"), named, switched_off


def _record(args: argparse.Namespace, golden_dir: Path, baseline: Path) -> int:
    """Live-extract every example and write its recording; the number of failed calls."""
    name, spec = parse_named_backend(args.backend)
    golden = load_golden_set(golden_dir, baseline)
    transport = transport_from_spec(spec)
    print(f"recording {len(golden)} examples through {name}={spec.describe()} ...")
    result = record_golden_set(
        golden, transport, backend=spec.describe(), concurrency=args.concurrency
    )
    print(f"wrote {len(result.written)} recordings to {golden.recordings_dir}")
    for example_id, why in result.failed:
        print(f"FAILED CALL {example_id}: {why}", file=sys.stderr)
    return len(result.failed)


def _print_report(report: GateReport) -> None:
    summary, result = report.summary, report.result
    for line in render_score_lines(summary):
        print(line)
    print()
    print(render_diffs_markdown(summary))
    if result.state == "INACTIVE":
        print(f"{_BANNER}\nWARNING: {result.render()}\n{_BANNER}", file=sys.stderr)
    elif result.state == "FAIL":
        print(result.render(), file=sys.stderr)
    else:
        print(result.render())


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.record and args.mode != "live":
        parser.error("--record needs --mode live (replay never writes recordings)")
    if args.mode == "live" and not args.record:
        parser.error("--mode live runs to refresh recordings: pass --record")
    if args.mode == "live" and args.backend is None:
        parser.error("--mode live needs --backend NAME=SPEC (anthropic, oai-http or oai-uds)")
    if args.allow_lower and not args.write_baseline:
        parser.error("--allow-lower goes with --write-baseline")
    if args.backend is not None and args.mode != "live":
        parser.error("--backend is only used with --mode live --record")
    try:
        golden_dir, baseline_path, named, switched_off = _paths(args)
        if switched_off is not None:  # as the driver and the asset graph have it
            print(
                f"claim gate off: {switched_off} sets claims_gate: false "
                "(--golden DIR runs it on that golden set)"
            )
            return 0
        if args.output is not None:  # before any live call: the gate reads every file there
            uses = [("the golden set", golden_dir, True), ("the baseline", baseline_path, False)]
            refuse_overwrite("--output", args.output, uses)
        failed_calls = _record(args, golden_dir, baseline_path) if args.mode == "live" else 0
        golden = load_golden_set(golden_dir, baseline_path)
        # A named baseline must exist, unless this run writes it.
        report = run_gate(
            golden, baseline_path, baseline_required=named and not args.write_baseline
        )
    except EvalsError as exc:
        print(f"evals-pipeline gate: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    _print_report(report)
    unwritten = False
    if args.output is not None:
        payload = {
            "scores": report.summary.to_dict(),
            "gate": report.result.to_dict(),
            "recordings": {r.id: r.status for r in report.replay.runs},
        }
        try:
            write_text_atomic(args.output, report_json(payload))
        except EvalsError as exc:  # a full disk: said, and exit 2 unless the gate says 1
            print(f"evals-pipeline gate: error: {exc}", file=sys.stderr)
            unwritten = True
    outcome = _outcome(args, report, golden, baseline_path, failed_calls)
    return outcome if outcome or not unwritten else USAGE_ERROR


def _outcome(
    args: argparse.Namespace,
    report: GateReport,
    golden: GoldenSet,
    baseline_path: Path,
    failed_calls: int,
) -> int:
    """The exit code of the gate, its live calls and the baseline write: 1 where the gate or a
    call failed, 2 where the baseline could not be written."""
    if failed_calls:
        print(f"{failed_calls} live call(s) failed; their recordings were not refreshed")
        return 1
    if args.write_baseline:
        try:
            baseline = build_baseline(
                golden,
                report.replay,
                report.summary,
                committed=report.baseline,
                allow_lower=args.allow_lower,
            )
        except BaselineRefused as exc:
            print(f"evals-pipeline gate: {exc}", file=sys.stderr)
            return 1
        try:
            write_baseline(baseline_path, baseline)
        except EvalsError as exc:
            print(f"evals-pipeline gate: error: {exc}", file=sys.stderr)
            return USAGE_ERROR
        if report.baseline is not None and baseline.micro.f1 < report.baseline.micro.f1:
            print(
                f"the baseline's micro-F1 went down: {report.baseline.micro.f1:.3f} -> "
                f"{baseline.micro.f1:.3f}",
                file=sys.stderr,
            )
        print(
            f"baseline written: {baseline_path} (micro-F1 {baseline.micro.f1:.3f} over "
            f"{len(baseline.examples)} VERIFIED examples, prompt {baseline.prompt_version})"
        )
        return 0
    return 0 if report.result.passed else 1


if __name__ == "__main__":
    sys.exit(main())
