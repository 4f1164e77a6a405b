"""`evals-pipeline bench`: score backends against gold corpora, exactly; no model judges.

    evals-pipeline bench                                   # the oracle row only; free
    evals-pipeline bench --backend local=oai-http:url=...  # plus a row per --backend
    evals-pipeline bench --split test --backend a=... --backend b=...
    evals-pipeline bench --backend a=cassette:path=a.jsonl # replay: makes no request
    evals-pipeline bench --gold webnlg=../shared/data/webnlg/dev.jsonl

It materialises the same `gold_corpus` → `bench_runs` → `bench_report` assets as `dagster dev`,
in-process. Each run writes `<stamp>.json` and `<stamp>.md` under `--out/<gold corpus>/`; read
two runs with `evals-pipeline compare A.json B.json`. Exit codes: 0 success, 1 a failed check
or step (e.g. an oracle row that is not perfect), 2 usage or input error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .cli import named_paths, positive_int
from .core.bench.gold import load_gold
from .core.bench.plan import bench_plan
from .core.config import BenchConfig, EvalsConfig
from .core.errors import EvalsError
from .core.extractors.environment import check_environment
from .core.extractors.specs import parse_named_backend
from .core.models import ONTOLOGY_MODES
from .core.preflight import refuse_bench_aborts
from .core.prices import load_prices

ORACLE = "oracle"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evals-pipeline bench", description=__doc__.split("\n")[0])
    p.add_argument("--backend", action="append", default=[], metavar="NAME=SPEC")
    p.add_argument(
        "--gold",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a cases folder or a WebNLG .jsonl file (default cases=corpus/cases)",
    )
    p.add_argument("--split", choices=["all", "dev", "test"], default="all")
    p.add_argument("--ontology-mode", choices=list(ONTOLOGY_MODES), default="strict")
    p.add_argument("--out", type=Path, default=Path("bench-results"))
    p.add_argument("--cache-dir", type=Path, default=Path(".evals_cache"))
    p.add_argument("--concurrency", type=positive_int, default=8)
    p.add_argument("--prices", type=Path, help='JSON {"<model>": {"input_per_1m": …, …}}')
    p.add_argument("--record-cassette", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--dry-run", action="store_true", help="print the plan; call and write nothing")
    p.add_argument("--verbose", action="store_true", help="print Dagster's event log")
    return p


def bench_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> EvalsConfig:
    backends = {ORACLE: ORACLE}
    for item in args.backend:
        name, spec = parse_named_backend(item)
        if name in backends:
            parser.error(f"--backend {name} given twice (the oracle row is always there)")
        backends[name] = spec.raw
    corpora = named_paths(args.gold, "--gold", parser)
    record = named_paths(args.record_cassette, "--record-cassette", parser)
    config = EvalsConfig(
        backends=backends,
        reference=ORACLE,
        cache_dir=args.cache_dir,
        concurrency=args.concurrency,
        prices=args.prices,
        bench=BenchConfig(
            backends=backends,
            record_cassette=record,
            corpora=corpora or {"cases": Path("corpus/cases")},
            split=args.split,
            ontology_mode=args.ontology_mode,
            output_dir=args.out,
        ),
    )
    return (
        config.check("evals-pipeline bench")
        .resolved_against(Path.cwd())
        .check_outputs("command line")
    )


def main(argv: Sequence[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    from dagster import DagsterInstance

    from .graph import build_definitions
    from .materialize import materialize_bench
    from .run_summary import MaterializeResult, bench_spend, failed_check_exit, print_problems

    try:
        config = bench_config(args, parser)
        golds = [  # bad gold is a usage error, up front
            load_gold(name, path, config.bench.split) for name, path in config.bench.corpora.items()
        ]
        if config.prices is not None:  # so is a bad prices file, before any paid call
            load_prices(config.prices)
        check_environment(  # and EVALS_ANTHROPIC_BASE_URL, as the plan checks it
            [(f"--backend {n}", s) for n, s in config.bench_specs.items()], judging=False
        )
        if args.dry_run:
            print(bench_plan(config, golds))
            return 0
        config.check_writable("command line", bench_only=True).check_keys("command line")
        refuse_bench_aborts(config, golds)  # what the plan says would abort, before any call
        outcome = MaterializeResult()
        ok = materialize_bench(
            config,
            build_definitions(config),
            DagsterInstance.ephemeral(),
            outcome,
            quiet=not args.verbose,
        )
    except EvalsError as exc:
        print(f"evals-pipeline bench: error: {exc}", file=sys.stderr)
        return 2
    print_problems(outcome, verbose=args.verbose)
    print(bench_spend(outcome), file=sys.stderr)
    for path in outcome.bench_reports:
        print(f"bench report ({path.parent.name}): {path}")
        print(f"bench JSON: {path.with_suffix('.json')}")
    return failed_check_exit(outcome) if ok and outcome.success else 1
