"""Materialise every partition of the pipeline and wait: the README's main command and CI's.

No Dagster CLI command does this (`dagster job backfill` only queues runs for a daemon), so
this driver runs the same definitions layer by layer, one in-process run per partition: the
claims golden set and its regression gate first (quick, no backend), then inputs per mode,
extraction per backend and mode, judging per backend and mode, the reference comparison,
pairwise tallies and report per mode, the mode matrix, and last the exact-match bench per gold
corpus. A failed blocking check stops it before the layers downstream, with a
non-zero exit; a prose regression (`no_regression`) does not: the other modes, the matrix
and the bench still run, and the exit is 1 after them.

    python -m evals_pipeline.materialize [--config evals.yaml]
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckSeverity,
    AssetsDefinition,
    DagsterEvent,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    Failure,
    materialize,
)
from dagster._core.errors import DagsterAssetCheckFailedError  # a blocking check's failure
from dagster._utils.error import SerializableErrorInfo  # the step failure's error chain
from dagster._utils.interrupts import setup_interrupt_handlers

from .assets.bench import bench_key
from .assets.claims import CLAIMS_ASSETS, CLAIMS_GATE
from .assets.reports import NO_REGRESSION
from .assets.spend import FAILED_STEP
from .core.config import EvalsConfig, default_config_path, load_config
from .core.errors import EvalsError
from .core.gc_tuning import fewer_gc_passes
from .core.preflight import preflight_run
from .core.reports.plot import CHART_FILE
from .graph import build_definitions
from .instance import default_instance
from .partitions import extraction_key
from .run_summary import MaterializeResult, failed_check_exit, print_problems, print_summary
from .stale_runs import run_tags, slot_held

# Dagster's console logger prints every event at DEBUG, and a failed step's traceback at
# ERROR; the driver's own summary names each failure in a line (--verbose shows the log).
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def stop_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does (Dagster's own CLIs map it the same way).

    Dagster copies SIGINT's handler onto SIGTERM. A driver started in the background by a
    script inherits SIGINT ignored, and would then ignore SIGTERM too (a `kill`, a container
    stop); so an ignored or default SIGINT gets Python's handler first. Dagster's runs catch
    SIGINT for their span whatever it was, so a Ctrl-C to the script's process group stops
    such a driver between runs too, as it already did during one."""
    if not callable(signal.getsignal(signal.SIGINT)):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    setup_interrupt_handlers()


def _run(
    defs: Definitions,
    instance: DagsterInstance,
    selection: list[str],
    partition_key: str | None,
    outcome: MaterializeResult,
    quiet: bool,
    *,
    carry_on_after: frozenset[str] = frozenset(),
) -> bool:
    """One Dagster run, its counts and problems added to `outcome`; whether the driver goes
    on. A run whose only failures are blocking checks named in `carry_on_after` goes on: the
    check is listed (the command exits 1 after the reports), not a failed step that stops the
    rest (a prose regression: the other modes, the matrix and the bench still run)."""
    assets = list(defs.assets or [])
    with contextlib.ExitStack() as slots:
        for pool in sorted(_pools(assets, selection)):  # see stale_runs: Dagster's wait is deaf
            slots.enter_context(slot_held(instance, pool))
        result = _materialize(defs, assets, instance, selection, partition_key, quiet)
    outcome.runs += 1
    for event in result.get_asset_materialization_events():
        _count(event.materialization.metadata, outcome)
    for event in result.get_asset_observation_events():  # what failed steps spent (assets.spend)
        if FAILED_STEP in event.asset_observation_data.asset_observation.metadata:
            _count(event.asset_observation_data.asset_observation.metadata, outcome)
    where = f"[{partition_key}]" if partition_key else ""
    for evaluation in result.get_asset_check_evaluations():
        if not evaluation.passed:
            line = (
                f"{evaluation.asset_key.to_user_string()}{where} {evaluation.check_name}: "
                f"{evaluation.description}"
            )
            if evaluation.severity == AssetCheckSeverity.WARN:
                outcome.warnings.append(line)
            else:
                outcome.failed_checks.append(line)
        elif _gate_inactive(evaluation):  # passes, but nothing is gated: CI must see that
            outcome.warnings.append(f"{evaluation.check_name}: {evaluation.description}")
    if not result.success and carry_on_after and _only_checks_failed(result, carry_on_after):
        return True
    for event in result.all_events:
        if event.is_step_failure:
            outcome.failed_steps.append(f"{event.step_key}{where}{_why(event)}")
    if not result.success:
        outcome.success = False
    return result.success


def _only_checks_failed(result: ExecuteInProcessResult, names: frozenset[str]) -> bool:
    """Whether the run failed only in steps that failed on their own blocking checks, all of
    them in `names` (a run that failed with no such step, an interrupt say, did not)."""
    blocked = [
        e
        for e in result.get_asset_check_evaluations()
        if not e.passed and e.severity == AssetCheckSeverity.ERROR and e.blocking
    ]
    steps = {e.asset_key.to_python_identifier() for e in blocked}
    failures = [e for e in result.all_events if e.is_step_failure]
    return (
        bool(blocked)
        and bool(failures)
        and all(e.check_name in names for e in blocked)
        and all(_failed_on_a_check(e) and e.step_key in steps for e in failures)
    )


def _failed_on_a_check(event: DagsterEvent) -> bool:
    failure = event.step_failure_data
    error = failure.error if failure is not None else None
    while error is not None:
        if error.cls_name == DagsterAssetCheckFailedError.__name__:
            return True
        error = error.cause
    return False


def _materialize(
    defs: Definitions,
    assets: list[Any],
    instance: DagsterInstance,
    selection: list[str],
    partition_key: str | None,
    quiet: bool,
) -> ExecuteInProcessResult:
    # A batch run in this process, next to every loaded cassette and table: with the default
    # thresholds the collector rescans that whole heap again and again (a third of a 3,000-chunk
    # materialisation), to find Dagster's few cycles. Raised, not disabled: cyclic garbage is
    # still collected, in larger batches, and the defaults come back when the run ends.
    with fewer_gc_passes():
        return materialize(
            assets,
            selection=selection,
            partition_key=partition_key,
            instance=instance,
            resources=defs.resources,
            raise_on_error=False,
            run_config=QUIET_RUN_CONFIG if quiet else None,
            tags=run_tags(instance),
        )


def _count(meta: Mapping[str, Any], outcome: MaterializeResult) -> None:
    """Add one step's calls, cache hits, replays and misses (its metadata) to the run's."""
    if "extraction_calls" in meta:
        outcome.extraction_calls += _int(meta, "extraction_calls")
        outcome.llm_requests += _int(meta, "llm_requests")
        outcome.cache_hits += _int(meta, "cache_hits")
        outcome.replayed += _int(meta, "replayed")
        outcome.cassette_misses += _int(meta, "cassette_misses")
        outcome.calls_interrupted += _int(meta, "calls_interrupted")
        outcome.failed_chunks += _int(meta, "errors")
    if "bench_report_md" in meta:
        outcome.bench_reports.append(Path(str(meta["bench_report_md"].value)))
    if "bench_calls" in meta:
        outcome.bench_calls += _int(meta, "bench_calls")
        outcome.bench_llm_requests += _int(meta, "bench_llm_requests")
        outcome.bench_interrupted += _int(meta, "bench_calls_interrupted")
        outcome.bench_cache_hits += _int(meta, "bench_cache_hits")
        outcome.bench_replayed += _int(meta, "bench_replayed")
        outcome.bench_misses += _int(meta, "bench_cassette_misses")
    if "judge_calls" in meta:
        outcome.judge_calls += _int(meta, "judge_calls")
        outcome.judge_cache_hits += _int(meta, "judge_cache_hits")


def _int(meta: Mapping[str, Any], key: str) -> int:
    """A count from step metadata; 0 where the step did not get as far as counting it."""
    value = meta.get(key)
    return int(value.value) if value is not None else 0


def _pools(assets: Sequence[object], selection: Sequence[str]) -> set[str]:
    """The concurrency pools the selected assets' steps claim a slot in."""
    return {
        item.op.pool
        for item in assets
        if isinstance(item, AssetsDefinition)
        and item.op.pool
        and any(key.to_user_string() in selection for key in item.keys)
    }


def _gate_inactive(evaluation: AssetCheckEvaluation) -> bool:
    state = evaluation.metadata.get("state")
    return evaluation.check_name == CLAIMS_GATE and state is not None and state.value == "INACTIVE"


def _why(event: DagsterEvent) -> str:
    """A failed step's own error, in one line: the first error under Dagster's wrappers ("Error
    occurred while executing op ..."), not the root of its chain (a CassetteWriteError names
    the file; the OSError under it does not). The driver prints no traceback unless --verbose."""
    failure = event.step_failure_data
    return step_error_line(failure.error if failure is not None else None)


def step_error_line(error: SerializableErrorInfo | None) -> str:
    while error is not None and error.cause is not None and _dagsters(error):
        error = error.cause
    if error is None or not error.message.strip():
        return ""
    line = error.message.strip().splitlines()[-1]
    # A step's own Failure (run_plan's failed guards) says why; Dagster's class path does not.
    return f": {line.removeprefix(_FAILURE_PREFIX)}"


_FAILURE_PREFIX = f"{Failure.__module__}.{Failure.__qualname__}: "


def _dagsters(error: SerializableErrorInfo) -> bool:
    return (error.cls_name or "").startswith("Dagster")


def materialize_claims(
    config: EvalsConfig,
    defs: Definitions,
    instance: DagsterInstance,
    outcome: MaterializeResult,
    *,
    quiet: bool = False,
) -> bool:
    """The claim golden set and its blocking regression gate (INACTIVE without a baseline).

    Runs first: it is quick and needs no backend, so a failing gate stops CI before the prose
    run. Skipped with `claims_gate: false`, and with a warning when the default golden folder
    does not exist (a project without one; a golden_dir the file names must exist).
    """
    if not config.claims_gate:
        return True
    if not config.golden_dir.is_dir():
        if config.claims_baseline is not None:  # a baseline names a gate that must run
            outcome.failed_steps.append(f"claims: no golden folder at {config.golden_dir}")
            outcome.success = False
            return False
        print(
            f"warning: no golden folder at {config.golden_dir}: the claims gate did not run",
            file=sys.stderr,
        )
        return True
    return _run(defs, instance, list(CLAIMS_ASSETS), None, outcome, quiet)


# A prose regression fails its check (and `dagster asset materialize`) but not the driver's
# other modes: it is what the reports are read for.
_REGRESSION = frozenset({NO_REGRESSION})


def materialize_all(
    config: EvalsConfig,
    instance: DagsterInstance | None = None,
    defs: Definitions | None = None,
    *,
    quiet: bool = False,
) -> MaterializeResult:
    defs = defs or build_definitions(config)
    instance = instance or default_instance()
    outcome = MaterializeResult()
    if not materialize_claims(config, defs, instance, outcome, quiet=quiet):
        return outcome
    for mode in config.active_modes:
        if not _run(defs, instance, ["corpus", "run_plan"], mode, outcome, quiet):
            return outcome
        for backend in sorted(config.backends):
            key = str(extraction_key(backend, mode))
            if not _run(defs, instance, ["extractions", "scores"], key, outcome, quiet):
                return outcome
        for backend in sorted(config.backends):  # judging reads every backend's extractions
            key = str(extraction_key(backend, mode))
            if not _run(defs, instance, ["judge_verdicts"], key, outcome, quiet):
                return outcome
        layer = ["reference_comparison", "pairwise_tallies", "report"]
        if not _run(defs, instance, layer, mode, outcome, quiet, carry_on_after=_REGRESSION):
            return outcome
    if not _run(defs, instance, ["mode_matrix_report"], None, outcome, quiet):
        return outcome
    outcome.report_path = config.output_dir / "mode_matrix.md"
    if not materialize_bench(config, defs, instance, outcome, quiet=quiet):
        outcome.report_path = None
    return outcome


def materialize_bench(
    config: EvalsConfig,
    defs: Definitions,
    instance: DagsterInstance,
    outcome: MaterializeResult,
    *,
    quiet: bool = False,
) -> bool:
    """The exact-match bench: per gold corpus, every backend's run, then the bench report."""
    for gold in sorted(config.bench.corpora):
        if not _run(defs, instance, ["gold_corpus"], gold, outcome, quiet):
            return False
        for backend in sorted(config.bench_backends):
            key = str(bench_key(backend, gold))
            if not _run(defs, instance, ["bench_runs"], key, outcome, quiet):
                return False
        if not _run(defs, instance, ["bench_report"], gold, outcome, quiet):
            return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals_pipeline.materialize")
    parser.add_argument(
        "--config", type=Path, default=None, help="default: $EVALS_CONFIG, else evals.yaml"
    )
    parser.add_argument("--verbose", action="store_true", help="print Dagster's event log")
    args = parser.parse_args(argv)
    stop_on_sigterm()
    try:
        source = args.config or default_config_path()
        config = load_config(source).check_inputs(source).check_writable(source).check_keys(source)
        # A bad input is this error, not a failed step after paid calls.
        preflight_run(config)
        outcome = materialize_all(config, quiet=not args.verbose)
    except EvalsError as exc:  # a bad config or input file: one line naming it, no traceback
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while waiting for a pool slot (stale_runs)
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    print_summary(outcome)
    print_problems(outcome, verbose=args.verbose)
    if not outcome.success or outcome.report_path is None:
        print("materialisation failed; downstream assets were not materialised", file=sys.stderr)
        return 1
    for mode in config.active_modes:
        print(f"report ({mode}): {config.output_dir / mode / 'report.md'}")
    for path in outcome.bench_reports:
        print(f"bench report ({path.parent.name}): {path}")
    chart = outcome.report_path.parent / CHART_FILE
    if chart.is_file():
        print(f"chart: {chart}")
    print(f"report: {outcome.report_path}")
    return failed_check_exit(outcome)


if __name__ == "__main__":
    sys.exit(main())
