"""Code versions of the assets, so the UI's staleness (and "Materialize stale") follows an edit
of the files Dagster does not see: the corpus, the ontology, a prompt, a cassette, the prices,
the golden set, the gold corpora, and the project file's settings the assets read.

Dagster marks an asset stale when its own code version changes, not when an asset upstream of
it is stale: a dependent goes stale only once that upstream is materialised again. So each
version here folds in the versions of the assets upstream of it, and one edit marks the asset
that reads the file and everything downstream stale at once, for a single "Materialize stale".

The inputs are files, not code: each version is a digest of what is read (contents, never
where the checkout is: a clone elsewhere, or CI's fresh path, is not an edit), taken when the
definitions load (a new CLI process, or "Reload definitions" in `dagster dev`). A version is
per asset, not per partition: one backend's edited cassette marks every extraction partition
stale, which over-reports, never under-reports. Re-materialising a stale partition whose
inputs did not change for it still makes no call: the caches answer (see the README).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from .core import prompts
from .core.config import EvalsConfig
from .core.digests import contents_key
from .core.judge import prompts as judge_prompts

# The extraction prompts are code, but a template edit changes every extract key; the judge's,
# every judge prompt (its cache asks again, and the verdicts must show as stale).
_PROMPTS = Path(prompts.__file__)
_JUDGE_PROMPTS = Path(judge_prompts.__file__)


def _version(parts: Iterable[object]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _files(paths: Iterable[Path | str | None]) -> list[object]:
    """Each file's contents' digests (a folder's with the names inside it; None where it is
    missing: the run says why), in the order given."""
    return [contents_key(p) if p is not None else None for p in paths]


def _cassettes(specs: dict[str, str]) -> list[object]:
    """Each backend's name and spec, with the cassette it replays by contents, not by path.
    Not a cassette it records into: the step writes that itself, and each recording run had
    marked its own extractions stale."""
    from .core.extractors.specs import parse_backend_spec

    out: list[object] = []
    for name, raw in sorted(specs.items()):
        spec = parse_backend_spec(raw)
        cassette = spec.cassette_path
        params = sorted(
            (key, value)
            for key, value in spec.params.items()
            if not (key == "path" and cassette is not None)
        )
        out += [name, spec.kind, params, *_files([cassette])]
    return out


# What the `corpus` table carries beyond its rows: its file's digest (`CORPUS_DIGEST`), which
# a table stored before it lacks; and what `reference_comparison` stores: its pooled scores and
# its per-chunk counts. A value stored in an older shape shows as stale (with everything
# downstream of it), not as a KeyError in the step that reads it.
_CORPUS_VALUE = ("chunks", "corpus_digest")
COMPARISON_VALUE = ("strict", "episodes")


def corpus_version(config: EvalsConfig) -> str:
    """The chunks and their extract keys: the corpus file, the ontology, the prompts."""
    return _version(
        [
            *_files([config.corpus, config.ontology, _PROMPTS]),
            config.limit,
            config.budgets,
            _CORPUS_VALUE,
        ]
    )


def plan_version(config: EvalsConfig) -> str:
    """The plan and its guards: what answers the extractions (every backend's spec and
    cassette, over the corpus), the recording targets, the judge."""
    targets = sorted((name, Path(path).name) for name, path in config.record_cassette.items())
    cassettes = _cassettes(config.backends)
    return _version([corpus_version(config), *cassettes, targets, _judge(config)])


def extraction_version(config: EvalsConfig) -> str:
    """The extractions run after the plan (a dependency): its inputs are theirs."""
    return _version([plan_version(config)])


def scores_version(config: EvalsConfig) -> str:
    """Scores against the reference; the prices a cost is computed at."""
    return _version([extraction_version(config), config.reference, *_files([config.prices])])


def judging_version(config: EvalsConfig) -> str:
    """Judged against the reference, by the judge model in its mode. Not the judge cache: the
    judging steps write it themselves."""
    return _version([extraction_version(config), config.reference, _judge(config)])


def comparison_version(config: EvalsConfig) -> str:
    """Every backend's extractions side by side with the reference's."""
    return _version([extraction_version(config), config.reference, COMPARISON_VALUE])


def _baselines(config: EvalsConfig) -> list[object]:
    """The baseline files the reports' `no_regression` checks compare with, if any."""
    if config.prose_baseline is None:
        return []
    from .core.reports.regression import baseline_file

    return _files([baseline_file(config.prose_baseline, mode) for mode in config.active_modes])


def report_version(config: EvalsConfig) -> str:
    """A mode's report (and the matrix over them): everything it is assembled from."""
    return _version(
        [
            scores_version(config),
            judging_version(config),
            comparison_version(config),
            plan_version(config),
            config.modes,
            *_baselines(config),
        ]
    )


def gold_version(config: EvalsConfig) -> str:
    """The gold corpora, their cases' schemas included."""
    from .core.bench.gold import gold_inputs

    corpora = sorted(config.bench.corpora.items())
    return _version([config.bench.split, *[(n, _files(gold_inputs(path))) for n, path in corpora]])


def bench_version(config: EvalsConfig) -> str:
    """What answers the bench: its backends' specs and cassettes, and the prompts, over the
    gold corpora; its report's mode."""
    cassettes = _cassettes(config.bench_backends)
    return _version(
        [gold_version(config), *cassettes, *_files([_PROMPTS]), config.bench.ontology_mode]
    )


def golden_version(config: EvalsConfig) -> str:
    """The golden set: its examples, their recordings and the baseline, and the claim prompt
    (an edit makes every recording stale)."""
    from .core.claims.prompt import prompt_fingerprint

    paths = [config.golden_dir, config.claims_baseline_path]
    return _version([*_files(paths), prompt_fingerprint()])


def _judge(config: EvalsConfig) -> object:
    return (config.judge.model, config.judge.mode, *_files([_JUDGE_PROMPTS]))
