"""What a bench run would do, for `--dry-run`: each gold corpus, each backend's source
(replay, oracle, live, recording) and the extraction calls it would make, or why the run would
abort. Loads cassettes and caches as the run does; calls and writes nothing."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..cassettes.cache import extraction_cache_path
from ..cassettes.keys import extract_key
from ..cassettes.record import check_record_target
from ..cassettes.store import Cassette, load_cassette
from ..config import EvalsConfig
from ..errors import CassetteError
from ..extractors.anthropic import API_KEY_ENV
from ..extractors.specs import BackendSpec
from ..plan import key_not_sent_notes
from .gold import GoldCorpus
from .runner import BENCH_BUDGETS

# How a line says the bench's real run would fail there (`preflight` refuses such a run).
ABORT = "would abort: "
# A replay recorded into a cassette would only copy its own records under a new name.
REPLAY_NOT_RECORDED = (
    "it replays a cassette and also has record_cassette: recording a replay is meaningless"
)


def bench_plan(
    config: EvalsConfig, golds: Sequence[GoldCorpus], environ: Mapping[str, str] | None = None
) -> str:
    """What a bench run would do: gold corpora, each backend's source, planned calls, with the
    keys `environ` (default: this process's) sets, as `preflight` reads them."""
    env = os.environ if environ is None else environ
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
            refusal = _record_refusal(spec, record) if spec.kind in ("oracle", "cassette") else None
            if refusal is not None:  # a local backend is recorded too, into a target it checks
                lines.append(f"  {name}: {source}; {refusal}")
            elif spec.kind == "cassette" and spec.cassette_path is not None:
                lines.append(
                    f"  {name}: {source}; " + _cassette_coverage(spec.cassette_path, asked)
                )
            elif spec.kind == "oracle":  # local: no call, nothing cached
                lines.append(f"  {name}: {source}; {calls} extractions replayed, no calls")
            elif spec.kind == "anthropic" and not env.get(API_KEY_ENV):
                lines.append(f"  {name}: {source}; {ABORT}{API_KEY_ENV} is not set")
            elif record is not None:
                lines.append(f"  {name}: {source}; " + _recording_plan(spec, record, asked))
            else:
                lines.append(f"  {name}: {source}; " + _cached_plan(config, name, gold, asked))
    lines.append(f"output: {config.bench.output_dir}/<gold>/<stamp>.json and .md")
    lines += [f"note: {note}" for note in key_not_sent_notes(config.bench_specs, env)]
    return "\n".join(lines)


def _answered(cassette: Cassette, asked: Counter[str]) -> int:
    """How many of `asked` (key -> times) `cassette` answers: a recast asks one key twice and
    is served FIFO, so it needs two recorded answers."""
    return sum(min(times, cassette.answers(key)) for key, times in asked.items())


def _record_refusal(spec: BackendSpec, target: Path | None) -> str | None:
    """Why the run would refuse to record `spec` into `target` (as it checks before its first
    call), or None: also asked of the oracle and a replay, which the run records too."""
    if target is None:
        return None
    if spec.kind == "cassette":  # the prose plan's no_record_on_replay guard
        return f"{ABORT}{REPLAY_NOT_RECORDED}"
    try:
        check_record_target(target, model=spec.recorded_model, budgets=BENCH_BUDGETS)
    except CassetteError as exc:
        return f"{ABORT}{exc}"
    return None


def _recording_plan(spec: BackendSpec, target: Path, asked: Counter[str]) -> str:
    """The calls a recorded live backend makes: those its cassette does not already answer
    (it is served what it holds), or why the run would refuse the cassette."""
    if (refusal := _record_refusal(spec, target)) is not None:
        return refusal
    try:
        recorded = load_cassette(
            target, consume=False, missing_ok=True, locked=True, skip_torn_tail=True
        )
    except CassetteError as exc:
        return f"{ABORT}{exc}"
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
        return f"{ABORT}{exc}"
    held = _answered(cached, asked)
    return f"{asked.total() - held} extraction calls planned, {held} already cached"


def _cassette_coverage(path: Path, asked: Counter[str]) -> str:
    """How many of the bench's extractions (`asked`: key -> times) a cassette can answer, or
    why it cannot load (the real run would then fail): the check the main CLI's plan makes."""
    try:
        cassette = load_cassette(path, consume=False)
    except CassetteError as exc:
        return f"{ABORT}{exc}"
    covered = _answered(cassette, asked)
    calls = asked.total()
    note = f"{len(cassette)} records, covers {covered} of {calls} extractions"
    if covered < calls:
        note += (
            " (the rest fail as cassette misses: the cassette was recorded for other cases, "
            "texts, prompts or schemas; record one for these)"
        )
    return note + ", no calls"
