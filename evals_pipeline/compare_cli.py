"""`evals-pipeline compare A.json B.json`: read run B against run A (bench or prose runs).

Episodes pair on case and source id where their case digests agree; every rate gets A, B,
B − A and a 95% paired bootstrap interval (an interval spanning zero means the corpus cannot
tell the two runs apart). Exit codes: 0 compared, 1 with --fail-if-worse when some rate's
interval says B is worse or B lacks the counts of a rate A has, or with --fail-if-unpaired
when some episode of A went uncompared, 2 usage error or refusal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .cli import non_negative_int, output_file, positive_int
from .core.atomic import write_text_atomic
from .core.compare import (
    B_WORSE,
    NOT_IN_B,
    UNCOMPARED_OF_A,
    RunReportError,
    compare_runs,
    load_run_report,
    rates_with_verdict,
    render_comparison,
)
from .core.errors import EvalsError
from .core.files import refuse_overwrite

# A bootstrap's interval settles long before this; each resample holds a row of sums, so a
# mistyped count (10**11) had died allocating terabytes.
MAX_RESAMPLES = 1_000_000


def _resamples(text: str) -> int:
    value = positive_int(text)
    if value > MAX_RESAMPLES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_RESAMPLES:,}, got {value:,}")
    return value


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="evals-pipeline compare", description=__doc__)
    p.add_argument("a", type=Path, help="run A (the baseline)")
    p.add_argument("b", type=Path, help="run B (read against A)")
    p.add_argument("--row-a", help="row of A when it holds several")
    p.add_argument("--row-b", help="row of B when it holds several")
    p.add_argument(
        "--pair-by-name",
        action="store_true",
        help=(
            "pair a report without case digests (corpus 1.0.0) on case and source id alone, "
            "asserting its cases did not change; cases whose digests differ stay unpaired"
        ),
    )
    p.add_argument("--resamples", type=_resamples, default=10_000)
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument(
        "--json", type=output_file, metavar="PATH", help="also write the comparison as JSON"
    )
    p.add_argument(
        "--fail-if-worse",
        action="store_true",
        help="exit 1 when some rate's interval leaves out 0 on B's worse side, or B lacks the "
        "counts of a rate A has (a CI gate)",
    )
    p.add_argument(
        "--fail-if-unpaired",
        action="store_true",
        help="exit 1 when some episode of A is not compared: not in B, its case changed, or "
        "it has no case digest and --pair-by-name is not given (a gate that B covers all of "
        "A; refresh the baseline after a corpus edit)",
    )
    args = p.parse_args(argv)
    try:
        if args.json is not None:
            refuse_overwrite(
                "--json", args.json, [("run a", args.a, False), ("run b", args.b, False)]
            )
        result = compare_runs(
            load_run_report(args.a),
            load_run_report(args.b),
            row_a=args.row_a,
            row_b=args.row_b,
            pair_by_name=args.pair_by_name,
            resamples=args.resamples,
            seed=args.seed,
        )
    except RunReportError as exc:  # the core knows runs as a and b, not their files
        print(
            f"evals-pipeline compare: error: {exc} (run a is {args.a}, run b is {args.b})",
            file=sys.stderr,
        )
        return 2
    except EvalsError as exc:
        print(f"evals-pipeline compare: error: {exc}", file=sys.stderr)
        return 2
    print(render_comparison(result))
    if args.json is not None:
        text = json.dumps(result, indent=2, sort_keys=True, default=str) + "\n"
        try:
            write_text_atomic(args.json, text)
        except EvalsError as exc:  # a file where its folder goes, a full disk
            print(f"evals-pipeline compare: error: {exc}", file=sys.stderr)
            return 2
    failed = _unpaired_failure(result) if args.fail_if_unpaired else False
    if not args.fail_if_worse:
        return 1 if failed else 0
    worse, lost = rates_with_verdict(result, B_WORSE), rates_with_verdict(result, NOT_IN_B)
    if worse:
        print(f"evals-pipeline compare: B is worse on {', '.join(worse)}", file=sys.stderr)
    if lost:  # counts dropped from B cannot pass the gate as no change
        print(
            f"evals-pipeline compare: B carries no counts for {', '.join(lost)}, which A has: "
            "nothing shows B is not worse there",
            file=sys.stderr,
        )
    return 1 if worse or lost or failed else 0


def _unpaired_failure(result: Mapping[str, Any]) -> bool:
    """Say which of A's episodes went uncompared; True if any did."""
    unpaired = result["unpaired"]
    counts = {_UNCOMPARED[key]: len(unpaired[key]) for key in UNCOMPARED_OF_A if unpaired[key]}
    if counts:
        said = ", ".join(f"{n} {what}" for what, n in counts.items())
        print(f"evals-pipeline compare: episodes of A not compared: {said}", file=sys.stderr)
    return bool(counts)


# How --fail-if-unpaired's message names each of `UNCOMPARED_OF_A`.
_UNCOMPARED = {
    "only_a": "not in B",
    "case_changed": "whose case changed",
    "no_case_digest": "without a case digest (--pair-by-name pairs them)",
}
