"""`evals-pipeline`: the operator CLI, with the reference harness's flags.

    evals-pipeline --backend baseline=cassette:path=baseline.jsonl \\
                   --backend local=oai-http:url=http://127.0.0.1:8765/v1/chat/completions \\
                   --reference baseline [--limit N | --all] [--ontology PATH [--ontology-mode M]]
                   [--record-cassette NAME=PATH] [--output report.json] [--dry-run]

It builds the same Dagster assets as `dagster dev` and materialises them in-process. Without
`--backend` it runs the project file (`--config`, default evals.yaml). `--dry-run` runs only
the shared resolution code: it prints the plan, makes no call, writes nothing and exits 0.
Exit codes: 0 success, 1 the run failed (a blocking check or a step), 2 usage or input error.

Subcommands: `evals-pipeline compare A.json B.json` (paired-bootstrap comparison of two bench
runs), `evals-pipeline bench` (score backends against the exact-match corpus) and
`evals-pipeline gate` (the golden-set regression gate); each has its own `--help`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from .core.atomic import write_bytes_atomic
from .core.config import DEFAULT_SCOPE, EvalsConfig, JudgeConfig, default_config_path, load_config
from .core.errors import ConfigError, EvalsError
from .core.extractors.specs import parse_named_backend
from .core.files import cannot_be_made, not_writable, real_path, refuse_overwrite
from .core.models import ONTOLOGY_MODES, OntologyMode
from .core.ontology import load_ontology
from .core.options import resolve_ontology_mode

USAGE_ERROR = 2
# Flags that describe a run built from flags; with a project file they are set in the file.
_FLAG_RUN_ONLY = ("--reference", "--ontology", "--record-cassette")


def _whole_number(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of at least 0 (a seed: numpy refuses a negative one)."""
    return _whole_number(text, 0)


def output_file(text: str) -> Path:
    """An argparse type: a path to write a file at, not a folder (the write comes after the
    run, so a folder there would waste it)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file to write")
    if (why := cannot_be_made(path)) is not None:
        raise argparse.ArgumentTypeError(f"{text} {why}")
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="evals-pipeline",
        description="Did this prompt or model change make extraction worse?",
        epilog="subcommands: bench, gate, compare (each has its own --help)",
    )
    p.add_argument(
        "--config", type=Path, help="project file (default $EVALS_CONFIG, else evals.yaml)"
    )
    p.add_argument("--backend", action="append", default=[], metavar="NAME=SPEC")
    p.add_argument("--reference", metavar="NAME")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--limit", type=positive_int, metavar="N", help=f"first N chunks ({DEFAULT_SCOPE})"
    )
    scope.add_argument("--all", action="store_true", help="every chunk of the corpus")
    p.add_argument("--corpus", type=Path, help="default corpus/prose/chunks.jsonl")
    p.add_argument("--ontology", type=Path)
    p.add_argument("--ontology-mode", choices=[m for m in ONTOLOGY_MODES if m != "freeform"])
    p.add_argument("--record-cassette", action="append", default=[], metavar="NAME=PATH")
    p.add_argument("--output", type=output_file, help="also write the report JSON here")
    p.add_argument("--output-dir", type=Path, help="default reports")
    p.add_argument("--cache-dir", type=Path, help="default .evals_cache")
    p.add_argument("--concurrency", type=positive_int, help="live calls in flight (default 8)")
    p.add_argument("--prices", type=Path, help='JSON {"<model>": {"input_per_1m": …, …}}')
    p.add_argument(
        "--prose-baseline",
        type=Path,
        metavar="DIR",
        help="a reports folder kept from before a change: each mode's report is checked "
        "against its episodes.json (no_regression; exit 1 if a backend got worse)",
    )
    p.add_argument("--judge-cache", type=Path, help="default judge_cache.jsonl")
    p.add_argument("--judge-model", help=f"default {JudgeConfig().model}")
    p.add_argument("--judge-mode", choices=["reference", "pairwise", "both"])
    p.add_argument("--dry-run", action="store_true", help="print the plan; call and write nothing")
    p.add_argument("--verbose", action="store_true", help="print Dagster's event log")
    return p


def named_paths(
    items: Sequence[str], flag: str, parser: argparse.ArgumentParser
) -> dict[str, Path]:
    """`NAME=PATH` flag values by name; anything else is a usage error naming the flag."""
    out: dict[str, Path] = {}
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name or not path:
            parser.error(f"{flag} expects NAME=PATH, got {item!r}")
        out[name] = Path(path)
    return out


def _config_from_flags(args: argparse.Namespace, parser: argparse.ArgumentParser) -> EvalsConfig:
    backends: dict[str, str] = {}
    for item in args.backend:
        name, spec = parse_named_backend(item)
        if name in backends:
            parser.error(f"--backend {name} given twice")
        backends[name] = spec.raw
    if args.reference is None:
        parser.error("--reference is required with --backend")
    record = named_paths(args.record_cassette, "--record-cassette", parser)
    ontology = load_ontology(args.ontology) if args.ontology else None
    mode: OntologyMode = resolve_ontology_mode(ontology, args.ontology_mode)
    config = EvalsConfig(
        backends=backends,
        reference=args.reference,
        scope="all" if args.all else (args.limit or DEFAULT_SCOPE),
        ontology=args.ontology,
        modes=(mode,),
        record_cassette=record,
    ).model_copy(update=_path_flags(args))
    config = _with_judge_flags(config, args)
    return config.check("command line").resolved_against(Path.cwd()).check_inputs("command line")


def _path_flags(args: argparse.Namespace) -> dict[str, object]:
    """--corpus, --output-dir, --cache-dir, --concurrency, --prices, --prose-baseline as given
    (else the config's value)."""
    given = {
        "corpus": args.corpus,
        "output_dir": args.output_dir,
        "cache_dir": args.cache_dir,
        "concurrency": args.concurrency,
        "prices": args.prices,
        "prose_baseline": args.prose_baseline,
    }
    return {name: value for name, value in given.items() if value is not None}


def _with_judge_flags(config: EvalsConfig, args: argparse.Namespace) -> EvalsConfig:
    """Judge flags given on the command line override the config's judge settings (a path
    relative to the working directory)."""
    cache = real_path(args.judge_cache) if args.judge_cache is not None else None
    given = {"model": args.judge_model, "mode": args.judge_mode, "cache": cache}
    updates = {k: v for k, v in given.items() if v is not None}
    if not updates:
        return config
    return config.model_copy(update={"judge": config.judge.model_copy(update=updates)})


def _project_file(args: argparse.Namespace) -> Path | None:
    """The project file a run reads: none for a run built with --backend."""
    return None if args.backend else (args.config or default_config_path())


def _config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> EvalsConfig:
    if args.backend:
        if args.config is not None:
            parser.error(
                "--config with --backend: a run built with --backend reads no project file; "
                "name the backends in the file instead (or drop --config)"
            )
        if args.ontology_mode and not args.ontology:
            parser.error("--ontology-mode needs --ontology (there is nothing to apply it to)")
        return _config_from_flags(args, parser)
    flag_run_only = [
        flag
        for flag in _FLAG_RUN_ONLY
        if getattr(args, flag[2:].replace("-", "_")) not in (None, [])
    ]
    if flag_run_only:
        parser.error(
            f"{', '.join(flag_run_only)}: only for a run built with --backend; with a project "
            "file, set this in the file"
        )
    source = _project_file(args)
    assert source is not None  # (a --backend run returned above)
    config = load_config(source)
    overrides = {  # a flag path is relative to the working directory
        name: real_path(value) if isinstance(value, Path) else value
        for name, value in _path_flags(args).items()
    }
    if overrides:
        config = config.model_copy(update=overrides)
    if args.ontology_mode and config.ontology is None:
        parser.error("--ontology-mode needs an ontology (--ontology, or ontology: in the config)")
    if args.ontology_mode:
        config = config.model_copy(update={"modes": (args.ontology_mode,)})
    if args.all or args.limit:
        config = config.model_copy(update={"scope": "all" if args.all else args.limit})
    config = _with_judge_flags(config, args)
    flagged = overrides or args.judge_cache is not None
    return config.check_inputs(f"{source} (with the flags given)" if flagged else source)


def dry_run(config: EvalsConfig) -> str:
    """The plan, from the same resolution code a real run uses, after the same up-front read
    of its inputs (`preflight`)."""
    from .core.plan import plan_run
    from .core.preflight import preflight

    ontology, corpus, golds = preflight(config)
    plan = plan_run(
        config,
        list(corpus.episodes()),
        ontology,
        corpus_path=str(corpus.path),
        corpus_digest=corpus.digest,
        expected=corpus.expected_graphs(),
        judge_coverage=True,
    )
    from .core.reports.regression import gate_plan

    prose = plan.render() + "\n" + gate_plan(config.prose_baseline, config.active_modes)
    if not config.bench.corpora:
        return prose
    # The run materialises the bench too: its calls are part of what it would spend.
    from .core.bench.plan import ABORT, bench_plan

    bench = bench_plan(config, golds)
    if ABORT in bench:  # after the whole prose run: say so where guards are read
        bench += "\nguards: the bench would abort a real run (its 'would abort' lines above)"
    return prose + "\n\n" + bench


SUBCOMMANDS = {
    "compare": "evals_pipeline.compare_cli",
    "bench": "evals_pipeline.bench_cli",
    "gate": "evals_pipeline.gate_cli",
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        # Subcommands own their flags; imported lazily so the main run pays nothing for them.
        module = importlib.import_module(SUBCOMMANDS[argv[0]])
        result: int = module.main(argv[1:])
        return result
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = _config(args, parser)
        source = _project_file(args)
        if args.output is not None:
            uses = config.paths_in_use()
            uses += [("the project file", source, False)] if source is not None else []
            refuse_overwrite("--output", args.output, uses)
        if args.dry_run:
            print(dry_run(config))
            return 0
        config.check_writable(source or "command line").check_keys(source or "command line")
        from .core.preflight import preflight_run

        # A bad input is this error, not a failed step after paid calls.
        preflight_run(config)
        if args.output is not None and (why := not_writable(args.output)) is not None:
            raise ConfigError(f"--output {args.output}: {why}")  # before the run, not after
        from .materialize import materialize_all, stop_on_sigterm
        from .run_summary import failed_check_exit, print_problems, print_summary

        stop_on_sigterm()

        outcome = materialize_all(config, quiet=not args.verbose)
    except EvalsError as exc:
        print(f"evals-pipeline: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while waiting for a pool slot (stale_runs)
        print("evals-pipeline: interrupted", file=sys.stderr)
        return 130
    print_summary(outcome)
    print_problems(outcome, verbose=args.verbose)
    if not outcome.success or outcome.report_path is None:
        print("run failed; downstream assets were not materialised", file=sys.stderr)
        return 1
    reports = [config.output_dir / mode / "report.json" for mode in config.active_modes]
    for path in reports:
        print(f"report: {path.with_suffix('.md')}")
    if args.output is not None:
        # One mode: that mode's report. Several: the mode matrix (which holds every report).
        source = reports[0] if len(reports) == 1 else config.output_dir / "mode_matrix.json"
        try:
            write_bytes_atomic(args.output, source.read_bytes())
        except EvalsError as exc:  # a full disk: the reports under output_dir are written
            print(f"evals-pipeline: error: {exc}", file=sys.stderr)
            return USAGE_ERROR
        print(f"report JSON: {args.output}")
    return failed_check_exit(outcome)


if __name__ == "__main__":
    sys.exit(main())
