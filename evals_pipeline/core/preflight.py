"""Every input a real run reads, read once before it starts.

A run's steps read their inputs when they reach them: the claim gate's golden set first, the
corpus and ontology at each mode's first step, the oracle's labels at its extraction, the gold
corpora after the whole prose run, the judge cache after every extraction. A bad one then
failed a step (exit 1) after the calls before it had been made and paid for. `preflight` reads
each the way its step does, so the same problem is one error naming the file, line or field
(exit 2) before any run, and `--dry-run` reports what the real run would refuse.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .config import EvalsConfig
from .corpus import ProseCorpus, load_prose_corpus
from .errors import ConfigError, EvalsError, InputFileError
from .extractors.anthropic import API_KEY_ENV
from .extractors.environment import check_environment
from .ontology import Ontology, load_ontology

if TYPE_CHECKING:
    from .bench.gold import GoldCorpus


def preflight(
    config: EvalsConfig, environ: Mapping[str, str] | None = None
) -> tuple[Ontology | None, ProseCorpus, list[GoldCorpus]]:
    """Read what the run will read; return the ontology, the scoped corpus and the gold corpora
    (for the plan). Raises the EvalsError its step would have raised, naming where."""
    env = os.environ if environ is None else environ
    ontology = load_ontology(config.ontology) if config.ontology else None
    corpus = load_prose_corpus(config.corpus, ontology).scoped(config.limit)
    check_prose_inputs(config, corpus, env, bench=True)
    check_claims_inputs(config)
    return ontology, corpus, gold_inputs(config)


def check_prose_inputs(
    config: EvalsConfig, corpus: ProseCorpus, environ: Mapping[str, str], *, bench: bool
) -> None:
    """What the prose run's later steps read, given the corpus its first step loaded: the
    oracle's labels, the key and proxy variables and Anthropic base URL its live backends and
    judge send with (`bench`: the bench's backends too), and the judge cache when judging."""
    oracles = [name for name, spec in config.specs.items() if spec.kind == "oracle"]
    unlabelled = [c.episode.name for c in corpus.chunks if c.expected is None]
    if oracles and unlabelled:
        shown = ", ".join(repr(n) for n in unlabelled[:3]) + (" …" if len(unlabelled) > 3 else "")
        raise InputFileError(
            config.corpus,
            f"{len(unlabelled)} chunk(s) in scope have no expected graph ({shown}), which the "
            f"oracle backend {oracles[0]} answers with: label them, or run without the oracle",
            field="expected",
        )
    judging = bool(environ.get(API_KEY_ENV))
    check_environment(config.backends_in_use(bench=bench), judging=judging, environ=environ)
    if judging:  # judging runs: its cache is read before the first verdict
        from .judge.cache import JudgeCache

        JudgeCache(config.judge.cache)


def check_claims_inputs(config: EvalsConfig) -> None:
    """The golden set and its baseline, as the claim gate's steps load them (a missing default
    golden_dir is the INACTIVE gate, not an error; `load_config` checks a named one)."""
    if not config.claims_gate or not config.golden_dir.is_dir():
        return
    from .claims.gate import read_baseline
    from .claims.golden import load_golden_set

    load_golden_set(config.golden_dir, config.claims_baseline_path)
    read_baseline(config.claims_baseline_path, required=config.claims_baseline is not None)


def gold_inputs(config: EvalsConfig) -> list[GoldCorpus]:
    """Each gold corpus the bench scores against, as its `gold_corpus` step loads it."""
    from .bench.gold import load_gold

    golds = []
    for name, path in config.bench.corpora.items():
        try:
            golds.append(load_gold(name, path, config.bench.split))
        except EvalsError as exc:
            raise ConfigError(f"bench.corpora.{name}: {exc}") from exc
    return golds


def preflight_run(config: EvalsConfig, environ: Mapping[str, str] | None = None) -> None:
    """What a real run (the main job, `evals-pipeline`) reads and refuses before it starts:
    `preflight`'s inputs, then what the bench plan says would abort."""
    refuse_bench_aborts(config, preflight(config, environ)[2], environ)


def refuse_bench_aborts(
    config: EvalsConfig, golds: list[GoldCorpus], environ: Mapping[str, str] | None = None
) -> None:
    """What the bench plan says would abort (a recording target or cassette its step cannot
    use) is an error before the run: the bench runs after the whole prose run, whose calls
    would otherwise be made first. `--dry-run` prints the same lines and exits 0."""
    if not config.bench.corpora:
        return
    from .bench.plan import ABORT, bench_plan

    aborts = [
        line.strip() for line in bench_plan(config, golds, environ).splitlines() if ABORT in line
    ]
    if aborts:
        raise ConfigError("the bench would abort: " + "; ".join(aborts))
