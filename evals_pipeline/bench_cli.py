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
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from .cli import named_paths, positive_int
from .core.bench.gold import GoldCorpus, load_gold
from .core.bench.runner import BENCH_BUDGETS
from .core.cassettes.cache import extraction_cache_path
from .core.cassettes.keys import extract_key
from .core.cassettes.record import check_record_target
from .core.cassettes.store import Cassette, load_cassette
from .core.config import BenchConfig, EvalsConfig
from .core.errors import CassetteError, EvalsError
from .core.extractors.specs import BackendSpec, parse_named_backend
from .core.models import ONTOLOGY_MODES
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


def bench_plan(config: EvalsConfig, golds: Sequence[GoldCorpus]) -> str:
    """What a bench run would do: gold corpora, each backend's source, planned calls."""
    lines = ["bench plan (dry run: no call made, nothing written)"]
    for gold in golds:
        s = gold.summary()
        extra = (
            f", corpus {s['version']}, split {s['split']}, "
            + ("publishable" if s["publishable"] else "not publishable")
            if gold.kind == "cases"
            else f", {len(s['categories'])} categories"
        )
        # Every extraction a row makes (recasts included), by cassette key: counted once per gold.
        asked = Counter(extract_key(e, o) for e, o in gold.calls(config.bench.ontology_mode))
        calls = asked.total()
        lines.append(
            f"gold {gold.name}: {gold.kind} {gold.path} ({gold.episode_count} episodes{extra})"
        )
        for name, spec in sorted(config.bench_specs.items()):
            if spec.kind == "cassette":
                source = f"replay {spec.cassette_path}"
            elif spec.kind == "oracle":
                source = "oracle (the gold graph: the ceiling, not a model)"
            else:
                source = f"live {spec.describe()}"
            record = config.bench.record_cassette.get(name)
            if record is not None:
                source += f", recording to {record}"
            if spec.kind == "cassette" and spec.cassette_path is not None:
                lines.append(
                    f"  {name}: {source}; " + _cassette_coverage(spec.cassette_path, asked)
                )
            elif spec.kind == "oracle":  # local: no call, nothing cached
                lines.append(f"  {name}: {source}; {calls} extractions replayed, no calls")
            elif record is not None:
                lines.append(f"  {name}: {source}; " + _recording_plan(spec, record, asked))
            else:
                lines.append(f"  {name}: {source}; " + _cached_plan(config, name, gold, asked))
    lines.append(f"output: {config.bench.output_dir}/<gold>/<stamp>.json and .md")
    return "\n".join(lines)


def _answered(cassette: Cassette, asked: Counter[str]) -> int:
    """How many of `asked` (key -> times) `cassette` answers: a recast asks one key twice and
    is served FIFO, so it needs two recorded answers."""
    return sum(min(times, cassette.answers(key)) for key, times in asked.items())


def _recording_plan(spec: BackendSpec, target: Path, asked: Counter[str]) -> str:
    """The calls a recorded live backend makes: those its cassette does not already answer
    (it is served what it holds), or why the run would refuse the cassette."""
    try:
        check_record_target(target, model=spec.recorded_model, budgets=BENCH_BUDGETS)
        recorded = load_cassette(
            target, consume=False, missing_ok=True, locked=True, skip_torn_tail=True
        )
    except CassetteError as exc:
        return f"would abort: {exc}"
    held = _answered(recorded, asked)
    return f"{asked.total() - held} extraction calls planned, {held} already recorded"


def _cached_plan(config: EvalsConfig, name: str, gold: GoldCorpus, asked: Counter[str]) -> str:
    """The calls a live backend makes: those its bench extraction cache does not answer."""
    path = extraction_cache_path(
        config.cache_dir / "bench",
        name,
        config.bench_specs[name],
        corpus_digest=gold.digest,
        budgets=BENCH_BUDGETS,
    )
    try:
        cached = load_cassette(path, consume=False, missing_ok=True, skip_torn_tail=True)
    except CassetteError as exc:  # the run loads it the same way, and fails there
        return f"would abort: {exc}"
    held = _answered(cached, asked)
    return f"{asked.total() - held} extraction calls planned, {held} already cached"


def _cassette_coverage(path: Path, asked: Counter[str]) -> str:
    """How many of the bench's extractions (`asked`: key -> times) a cassette can answer, or
    why it cannot load (the real run would then fail): the check the main CLI's plan makes."""
    try:
        cassette = load_cassette(path, consume=False)
    except CassetteError as exc:
        return f"would abort: {exc}"
    covered = _answered(cassette, asked)
    calls = asked.total()
    note = f"{len(cassette)} records, covers {covered} of {calls} extractions"
    if covered < calls:
        note += (
            " (the rest fail as cassette misses: the cassette was recorded for other cases, "
            "texts, prompts or schemas; record one for these)"
        )
    return note + ", no calls"


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
    return config.check("evals-pipeline bench").resolved_against(Path.cwd())


def main(argv: Sequence[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    from dagster import DagsterInstance

    from .graph import build_definitions
    from .materialize import MaterializeResult, bench_spend, materialize_bench, print_problems

    try:
        config = bench_config(args, parser)
        golds = [  # bad gold is a usage error, up front
            load_gold(name, path, config.bench.split) for name, path in config.bench.corpora.items()
        ]
        if config.prices is not None:  # so is a bad prices file, before any paid call
            load_prices(config.prices)
        if args.dry_run:
            print(bench_plan(config, golds))
            return 0
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
    return 0 if ok and outcome.success else 1
